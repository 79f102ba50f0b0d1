"""The layers, checked: screen (pages/, streamlit_app.py) -> pipeline/ -> store/, never back up.

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
