"""docs/reference/schema.md is the schema the migrations make, regenerated; the migrations are registered where
they are defined, in that order, under the names old stores recorded."""

from __future__ import annotations

import ast
import re

import pytest
from conftest import ROOT

from store import migrations, schema_snapshot

PAGE = ROOT / "docs" / "reference" / "schema.md"
# The names stores have recorded in schema_migrations: never renamed or reordered, or an old store would apply
# a migration twice (or call one it has unknown and refuse to open).
APPLIED_NAMES = [
    "m001_knowledge_base",
    "m002_run_log",
    "m003_llm_calls_and_cache",
    "m004_evaluations",
    "m005_detector_benchmarks",
    "m006_regression_alerts",
    "m007_search_text_and_zonemaps",
    "m008_annotations_and_corrections",
    "m009_call_texts_and_spans",
    "m010_journal_entries",
    "m011_chunk_flags",
    "m013_attempts_on_topic",
    "m014_retired_documents",
    "m015_ratings_grounding_topicality",
    "m016_call_texts_by_id",
    "m017_cache_by_id",
    "m018_cache_in_texts",
    "m019_grades_on_runs",
]


def test_the_schema_page_is_up_to_date(tmp_path):
    target = tmp_path / "schema.md"
    assert schema_snapshot.main(["--output", str(target)]) == 0
    assert PAGE.exists(), f"docs/reference/schema.md is missing: run `{schema_snapshot.COMMAND}`"
    assert PAGE.read_text(encoding="utf-8") == target.read_text(encoding="utf-8"), (
        f"docs/reference/schema.md is out of date with store/migrations.py: run `{schema_snapshot.COMMAND}`"
    )


def test_the_snapshot_is_the_same_every_time():
    first, _ = schema_snapshot.snapshot()
    second, _ = schema_snapshot.snapshot()
    assert first == second
    assert "tmp" not in first and "schema-snapshot-" not in first  # no path of the temporary store


def test_the_diagram_names_every_table_and_view_and_only_those():
    page, problems = schema_snapshot.snapshot()
    assert problems == []
    diagram = page.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()
    tables = {t.split()[0] for t in page.split("## Tables", 1)[1].split("## Views", 1)[0].split("CREATE TABLE ")[1:]}
    views = {v.split()[0] for v in page.split("CREATE VIEW ")[1:]}
    assert {"runs", "eval_runs", "llm_texts", "chunks", "documents", "llm_cache"} <= tables | views

    entries = [line.split()[0] for line in diagram if not line.startswith(" ")]
    assert sorted(entries) == sorted(tables | views), "each table and view once in the diagram"
    named = set()
    for line in diagram:
        line = line.strip()
        if line.startswith("←"):
            named |= {t.strip() for t in line[1:].split(",")}
        elif "→" in line:
            after = line.split("→", 1)[1].replace("reads ", "")
            named |= {t.strip().split(".")[0] for t in after.replace(" or ", ",").split(",")}
    assert named and named <= tables | views, f"the diagram names {sorted(named - tables - views)}, which do not exist"


def test_a_reference_column_the_snapshot_does_not_know_is_named():
    found = {
        "columns": {"runs": ["id"], "widgets": ["id", "gadget_id", "run_id"]},
        "views": {"llm_cache": "CREATE VIEW llm_cache AS SELECT 1"},
    }
    problems = schema_snapshot.problems(found)
    assert any("widgets.gadget_id looks like a reference" in p for p in problems), problems
    assert not any("widgets.run_id" in p for p in problems)
    assert any("llm_texts" in p for p in problems)  # the view reads a table this schema lacks


def decorated_migrations() -> list[str]:
    """The functions store/migrations.py defines with @migration, in the order they are defined."""
    tree = ast.parse((ROOT / "store" / "migrations.py").read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "migration" for d in node.decorator_list)
    ]


def test_migrations_are_registered_in_the_order_they_are_defined_under_unique_names():
    registered = [m.__name__ for m in migrations.MIGRATIONS]
    assert registered == decorated_migrations()
    assert len(set(registered)) == len(registered)
    assert registered[: len(APPLIED_NAMES)] == APPLIED_NAMES, "an applied migration was renamed or reordered"
    numbers = [int(name[1:4]) for name in registered]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_every_migration_function_is_registered():
    tree = ast.parse((ROOT / "store" / "migrations.py").read_text(encoding="utf-8"))
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    defined = [name for name in functions if re.fullmatch(r"m\d{3}_\w+", name)]
    assert defined == decorated_migrations(), "a migration function lacks @migration: it would never run"


def test_a_second_migration_of_one_name_is_refused(monkeypatch):
    monkeypatch.setattr(migrations, "MIGRATIONS", list(migrations.MIGRATIONS))

    def m001_knowledge_base(con):
        pass

    with pytest.raises(ValueError, match="two migrations are named 'm001_knowledge_base'"):
        migrations.migration(m001_knowledge_base)
