"""The layers, checked: screen (pages/, streamlit_app.py) -> pipeline/ -> store/, never back up; inside pipeline/,
the foundation -> models -> verification -> knowledge -> answering -> history -> evaluation ->
calibration / regression / experiments / collect / detector -> api / cli.

Every import of every module is read with `ast`, including imports inside functions, relative imports
and `importlib.import_module("...")` / `__import__("...")` with a literal name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

# (files, forbidden top-level packages or modules, why)
RULES = [
    ("store", ("pipeline", "pages", "streamlit"), "store/ remembers; it imports nothing from the layers above"),
    (
        "pipeline",
        ("pages", "streamlit"),
        "pipeline/ thinks; the screen is above it and Streamlit belongs to the screen",
    ),
    (
        "pages",
        ("store", "duckdb", "pipeline.models.llm"),
        "pages/ read and write through pipeline/ and never build a model client",
    ),
    (
        "streamlit_app.py",
        ("store", "duckdb", "pipeline.models.llm"),
        "the Chat page reads and writes through pipeline/ and never builds a model client",
    ),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the source, wherever it stands."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                base = ".".join(anchor + ([base] if base else []))
            found += [
                (node.lineno, name)
                for name in [base] + [f"{base}.{a.name}" if base else a.name for a in node.names]
                if name
            ]
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            found.append((node.lineno, node.args[0].value))
    return found


def _dynamic_import(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return (
        name in ("import_module", "__import__")
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def violations(source: str, module: str, forbidden: tuple[str, ...], is_package: bool = False) -> list[str]:
    return sorted(
        {
            f"line {line}: {name}"
            for line, name in imported_modules(source, module, is_package)
            if any(name == f or name.startswith(f + ".") for f in forbidden)
        }
    )


def files_of(target: str) -> list[Path]:
    path = ROOT / target
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


@pytest.mark.parametrize("target, forbidden, why", RULES, ids=[r[0] for r in RULES])
def test_no_layer_imports_upward(target, forbidden, why):
    files = files_of(target)
    assert files, f"nothing to check under {target}"
    found = {}
    for path in files:
        bad = violations(path.read_text(encoding="utf-8"), module_name(path), forbidden, path.name == "__init__.py")
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    assert not found, f"{why}; these imports break it: {found}"


def test_the_walker_sees_every_kind_of_import():
    source = """
import duckdb
from store.db import Database
from . import sibling
import importlib

def later():
    from store import runs
    importlib.import_module("store.history")
    __import__("duckdb")

class Page:
    def method(self):
        import store.kb as kb
"""
    assert "importlib" in {name for _, name in imported_modules(source, "pages.views.drilldown")}
    assert sorted(violations(source, "pages.views.drilldown", ("store", "duckdb"))) == sorted(
        [
            "line 2: duckdb",
            "line 3: store.db",
            "line 3: store.db.Database",
            "line 8: store",
            "line 8: store.runs",
            "line 9: store.history",
            "line 10: duckdb",
            "line 14: store.kb",
        ]
    )


def test_a_relative_import_is_resolved_before_it_is_judged():
    assert violations("from . import sibling\n", "pages.views.drilldown", ("pages.views.sibling",)) == [
        "line 1: pages.views.sibling"
    ]
    assert violations("from ..store import kb\n", "pipeline.history.runs", ("store",)) == []  # pipeline.store
    assert violations("from ... import store\n", "pipeline.history.runs", ("store",)) == ["line 1: store"]
    assert violations("from .db import Database\n", "store", ("store",), is_package=True) == [
        "line 1: store.db",
        "line 1: store.db.Database",
    ]


def test_look_alike_names_are_not_violations():
    assert (
        violations("import storefront\nfrom pipeline.session import open_workbench\n", "pages.x", ("store", "duckdb"))
        == []
    )
    assert violations("import streamlit_extras\n", "pipeline.x", ("streamlit",)) == []


# --- the connection points down only -------------------------------------------------------------------------

# What the connection (store/db.py) may import from the store: nothing that writes runs or evaluation items. The
# journal's replay writes both, so it is a step of the layer above (store/journal.py, called by
# pipeline/session.py and before every save), never of opening a connection.
CONNECTION = "store.db"
CONNECTION_MAY_IMPORT = {"store", "store.errors", "store.key_index", "store.migrations"}  # store: its __init__
WRITERS = ("store.journal", "store.runs", "store.evals")


def module_files(*targets: str) -> dict[str, Path]:
    """{module name: file} of every module under the targets (folders or files)."""
    return {module_name(path): path for target in targets for path in files_of(target)}


def resolve(name: str, modules) -> str | None:
    """The module an imported name lies in (`store.db.Database` -> `store.db`), None when it is not one of ours."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path], sources: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """{module: {module it imports: line}} among the given modules, lazy imports included; `sources` replaces the
    text of some modules (to check the checker)."""
    graph = {}
    for module, path in modules.items():
        source = (sources or {}).get(module) or path.read_text(encoding="utf-8")
        edges = {}
        for line, name in imported_modules(source, module, path.name == "__init__.py"):
            target = resolve(name, modules)
            if target and target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), {}):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def connection_violations(sources: dict[str, str] | None = None) -> list[str]:
    modules = module_files("store")
    graph = import_graph(modules, sources)
    direct = sorted(f"line {line}: {t}" for t, line in graph[CONNECTION].items() if t not in CONNECTION_MAY_IMPORT)
    through = sorted(m for m in reachable(graph, CONNECTION) if m in WRITERS)
    return direct + [f"reaches {m}" for m in through]


def test_the_connection_imports_nothing_that_writes_runs():
    found = connection_violations()
    assert not found, (
        f"store/db.py opens and migrates the store; it may import only {sorted(CONNECTION_MAY_IMPORT)} from store/ "
        f"and must not reach {WRITERS} (the journal's replay is a step of the layer above): {found}"
    )


def test_the_connection_rule_fails_when_the_replay_goes_back_into_the_open():
    source = (ROOT / "store" / "db.py").read_text(encoding="utf-8")
    lazy = source + "\n\ndef _open_again(con, path):\n    from store.journal import replay\n\n    return replay\n"
    assert "reaches store.journal" in connection_violations({CONNECTION: lazy})
    assert any(v.endswith(": store.journal") for v in connection_violations({CONNECTION: lazy}))
    migrations = (ROOT / "store" / "migrations.py").read_text(encoding="utf-8") + "\nfrom store import runs\n"
    assert connection_violations({"store.migrations": migrations}) == ["reaches store.runs"]  # one step removed


# --- no import cycles ------------------------------------------------------------------------------------------

CYCLE_TARGETS = ("pipeline", "store", "pages", "streamlit_app.py")
# Imports allowed to close a cycle, each with why, until they move (none now: all_prompts moved to
# pipeline/prompt_registry.py, above the modules it reads). Only remove entries.
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import cycles: each group of modules that import one another round (strongly connected, Tarjan's
    algorithm without recursion), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, {})))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def without(graph: dict[str, dict[str, int]], edges) -> dict[str, dict[str, int]]:
    return {m: {t: line for t, line in targets.items() if (m, t) not in edges} for m, targets in graph.items()}


def cycle_report(graph: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for group in cycles(graph):
        members = set(group)
        out.append(
            "; ".join(f"{m} imports {t} (line {graph[m][t]})" for m in group for t in sorted(graph[m]) if t in members)
        )
    return out


def test_no_module_imports_one_that_imports_it_back():
    graph = import_graph(module_files(*CYCLE_TARGETS))
    found = cycle_report(without(graph, KNOWN_CYCLE_EDGES))
    assert not found, f"import cycles (move the shared code into a module both import): {found}"
    stale = [edge for edge in KNOWN_CYCLE_EDGES if edge[1] not in graph.get(edge[0], {})]
    assert not stale, f"KNOWN_CYCLE_EDGES names imports that are gone; remove them: {stale}"
    closing = [edge for edge in KNOWN_CYCLE_EDGES if edge[0] in reachable(graph, edge[1])]
    assert sorted(closing) == sorted(KNOWN_CYCLE_EDGES), (
        f"KNOWN_CYCLE_EDGES names imports that close no cycle any more; remove them: "
        f"{sorted(set(KNOWN_CYCLE_EDGES) - set(closing))}"
    )


def test_the_cycle_rule_fails_on_a_lazy_import_back():
    modules = module_files(*CYCLE_TARGETS)
    item = (ROOT / "pipeline" / "evaluation" / "item.py").read_text(encoding="utf-8")
    back = item + "\n\ndef later():\n    from pipeline.evaluation.runner import report\n    return report\n"
    graph = without(import_graph(modules, {"pipeline.evaluation.item": back}), KNOWN_CYCLE_EDGES)
    found = cycle_report(graph)
    assert found and "pipeline.evaluation.item imports pipeline.evaluation.runner" in found[0]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]  # longer too
    assert cycles({"a": {"b": 1}, "b": {}}) == []


# --- the order inside pipeline/ --------------------------------------------------------------------------------

# Top-level modules below models/: each imports only other foundation modules, and any layer may import them.
FOUNDATION = {
    "pipeline": "the package's __init__: its docstring only",
    "pipeline.errors": "the error types every layer raises; imports nothing of ours",
    "pipeline.config": "the settings every layer reads; imports only errors",
    "pipeline.text": "string helpers (plural, question_key, short_source) from models/ up; imports nothing of ours",
    "pipeline.prompting": "the Prompt class and the shared system text, for every layer that sends a prompt",
    "pipeline.formatting": "one format for numbers, durations and times (pages, exports, CLI); imports nothing of ours",
    "pipeline.vocabulary": "StrEnum and the run Status, scored by verification/ and read up to pages/; imports nothing",
    "pipeline.declarations": "what a plugin declares (prompts, options), read by verification/, answering/ and up",
    "pipeline.plugins": "the plugin loader of the verifier and metric registries; imports nothing of ours",
    "pipeline.tracing": "run traces as spans, recorded from models/recorder.py up; imports nothing of ours",
    "pipeline.trace_export": "sends traces over OpenTelemetry (session, collect/); imports only errors",
    "pipeline.jobs": "the background jobs of evaluation/ and experiments/; imports only errors",
    "pipeline.settings_reference": "the settings page of the docs, generated from config alone",
    "pipeline.settings_file": "writes the settings file after config's own checks; imports config and errors",
}
# The packages of pipeline/ from the bottom up. A package imports only the foundation, itself and the ranks below
# it; packages that share a rank do not import each other. The top rank holds the entry points: the Python API
# (pipeline/api.py) and the command line.
PACKAGE_ORDER = [
    ("models",),
    ("verification",),
    ("knowledge",),
    ("answering",),
    ("history",),
    ("evaluation",),
    ("calibration", "regression", "experiments", "collect", "detector"),
    ("pipeline.api", "cli"),
]
# Top-level modules in the top rank that assemble the layers: they may import any unit, the entry points too, and
# the entry points may import them; nothing below the top rank imports them.
TOP = {
    "pipeline.session": "opens the workbench (settings, store, the verifier registry) for api, cli and pages",
    "pipeline.prompt_registry": "every prompt of every layer (engine, verifiers, metrics, synth), for the checks",
    "pipeline.pytest_plugin": "the pytest gate: runs evaluations and prints through cli/",
    "pipeline.__main__": "`python -m pipeline`: runs cli/",
}
ORDER_TEXT = " -> ".join("/".join(rank) for rank in [("foundation",), *PACKAGE_ORDER])


def unit_of(module: str) -> str:
    """What the order ranks a module by: its package under pipeline/ (`pipeline.models.llm` -> models), or a
    top-level module's own name (`pipeline.config`)."""
    parts = module.split(".")
    if len(parts) == 1 or module in FOUNDATION or module in TOP or module == "pipeline.api":
        return module
    return parts[1]


def rank_of(unit: str) -> int | None:
    if unit in FOUNDATION:
        return 0
    if unit in TOP:
        return len(PACKAGE_ORDER)
    return next((i for i, rank in enumerate(PACKAGE_ORDER, 1) if unit in rank), None)


def order_violations(sources: dict[str, str] | None = None) -> list[str]:
    """Every import in pipeline/ that breaks the order, as 'file:line imports module: why'; `sources` replaces the
    text of some modules (to check the checker)."""
    modules = module_files("pipeline")
    found = {}
    for module, path in sorted(modules.items()):
        source = (sources or {}).get(module) or path.read_text(encoding="utf-8")
        unit = unit_of(module)
        for line, name in imported_modules(source, module, path.name == "__init__.py"):
            target = resolve(name, modules)
            why = target and unit_of(target) != unit and order_rule_broken(unit, unit_of(target))
            if why:  # one finding per import line and unit: `from pipeline.x import y` names pipeline.x.y
                key = (str(path.relative_to(ROOT)), line, unit_of(target))
                found[key] = max(found.get(key, (target, why)), (target, why), key=lambda f: len(f[0]))
    return [f"{file}:{line} imports {target}: {why}" for (file, line, _), (target, why) in sorted(found.items())]


def order_rule_broken(unit: str, target: str) -> str | None:
    """Why `unit` may not import `target`, or None when it may."""
    mine, theirs = rank_of(unit), rank_of(target)
    if mine is None or theirs is None:
        missing = unit if mine is None else target
        return f"{missing} has no place in the order; add it to FOUNDATION, PACKAGE_ORDER or TOP"
    if mine == 0 and theirs != 0:
        return f"the foundation module {unit} may import only foundation modules, not {target}"
    if theirs > mine:
        return f"{unit} (rank {mine}) may not import {target} (rank {theirs}), a higher layer"
    if theirs == mine and mine > 0 and unit not in TOP and target not in TOP:
        return f"{unit} and {target} share a rank and do not import each other"
    return None


def mutual_imports() -> list[str]:
    """The pairs of units of pipeline/ that import each other, each with one import either way."""
    modules = module_files("pipeline")
    edges = {}
    for module, targets in sorted(import_graph(modules).items()):
        for target, line in targets.items():
            pair = (unit_of(module), unit_of(target))
            edges.setdefault(pair, f"{modules[module].relative_to(ROOT)}:{line} imports {target}")
    return [f"{a} and {b}: {edges[a, b]}; {edges[b, a]}" for a, b in sorted(edges) if a < b and (b, a) in edges]


def test_pipeline_packages_import_only_down_the_order():
    found = order_violations()
    assert not found, f"pipeline/'s order is {ORDER_TEXT}; these imports break it:\n" + "\n".join(found)


def test_no_two_pipeline_packages_import_each_other():
    found = mutual_imports()
    assert not found, "these parts of pipeline/ import each other (move the shared code down):\n" + "\n".join(found)


def test_every_part_of_pipeline_has_a_place_in_the_order():
    units = {unit_of(m) for m in module_files("pipeline")}
    assert sorted(u for u in units if rank_of(u) is None) == []
    placed = set(FOUNDATION) | set(TOP) | {u for rank in PACKAGE_ORDER for u in rank}
    assert sorted(placed - units) == []  # nothing named that is gone


def test_the_order_rule_fails_on_an_import_up_or_across():
    llm = (ROOT / "pipeline" / "models" / "llm.py").read_text(encoding="utf-8")
    lazy = llm + "\n\ndef later():\n    from pipeline.evaluation import registry\n\n    return registry\n"
    found = [f for f in order_violations({"pipeline.models.llm": lazy}) if f.startswith("pipeline/models/llm.py:")]
    assert len(found) == 1
    assert found[0].endswith(
        "imports pipeline.evaluation.registry: models (rank 1) may not import evaluation (rank 6), a higher layer"
    )
    across = "from pipeline.regression import alerts\n"
    found = order_violations({"pipeline.collect.summary": across})
    assert [f for f in found if f.startswith("pipeline/collect/summary.py:")] == [
        "pipeline/collect/summary.py:1 imports pipeline.regression.alerts: collect and regression share a rank and "
        "do not import each other"
    ]
    assert order_rule_broken("pipeline.config", "models") == (
        "the foundation module pipeline.config may import only foundation modules, not models"
    )
    assert order_rule_broken("cli", "pipeline.session") is None  # the top rank's assemblers
    assert order_rule_broken("cli", "pipeline.api") == "cli and pipeline.api share a rank and do not import each other"
