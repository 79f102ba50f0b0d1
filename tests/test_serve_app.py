"""`make run`'s entry point: the pages' modules are imported before Streamlit's server starts (issue 29)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest
from conftest import ROOT
from test_app import app, fresh_streamlit_caches  # noqa: F401 - the autouse fixture: the caches start empty

import pages.views

PROBE = """
import gc, json, sys, threading
import serve_app
from streamlit.web import cli
from pages.views import prefetch
cli.main = lambda: print(json.dumps({"argv": sys.argv, "frozen": gc.get_freeze_count(), "seen": len(gc.get_objects()),
    "prefetch_listed": prefetch.prefetch_script.cache_info().currsize,
    "imported": sorted(m for m in sys.modules if m.startswith("pages.views.")),
    "threads": [t.name for t in threading.enumerate()]}))
serve_app.main(["--server.port", "8600"])
"""


@pytest.mark.slow
def test_the_app_starts_with_its_views_imported_its_heap_frozen_the_precompute_waiting_and_streamlit_run_on_chat():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["argv"] == ["streamlit", "run", "streamlit_app.py", "--server.port", "8600"]
    views = sorted(f"pages.views.{m.name}" for m in pkgutil.iter_modules(pages.views.__path__))
    assert len(views) > 10 and set(views) <= set(seen["imported"])
    assert "No runtime found" not in done.stderr  # the cache decorators' warning is kept out of `make run`
    assert "precompute" in seen["threads"]  # waiting for the server, to compute what Evaluate and Calibration show
    # what the warm-up made is out of the collector's sight: Streamlit's collection after each script run walks
    # what the pages made since, not the imported modules (0.24-0.27 s a run when it walked them all)
    assert seen["frozen"] > 100_000 and seen["seen"] < seen["frozen"] / 10, seen
    assert seen["prefetch_listed"] == 1  # the prefetch's file list is read before the server, not by a page


@pytest.mark.slow
def test_precompute_leaves_evaluate_compare_and_calibration_nothing_to_compute_on_their_first_visit(
    fake, settings, db, tmp_path, monkeypatch
):
    """What serve_app's thread runs once the server is up: the newest evaluation's report and the first Calibration
    scope's kappa intervals are kept, so the pages' first runs show them without computing them."""
    from test_judge_repeats import evaluate, rows

    from pages.views import cached
    from pages.views.common import resources
    from pages.views.precompute import precompute
    from pipeline.calibration import agreement
    from pipeline.calibration.annotations import save_rating
    from pipeline.evaluation.runner import report
    from store import evals

    path = tmp_path / "towers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(20)))
    fake.judge_noise = (2, 4)  # the judge's scores vary, so kappa has an interval
    evaluate(settings, db, path, "older", 1)
    evaluate(settings, db, path, "newest", 1)
    for n, run_id in enumerate(evals.run_ids_of(db, evals.get_eval_run(db, "newest").id)):
        save_rating(db, run_id, "ana", {"correctness": 1 + n % 5, "helpfulness": 3, "faithfulness": 4})
    expected = report(settings, db, "newest")
    agreement._INTERVALS.clear()

    done = precompute(*resources())
    assert done[0] == "the report of evaluation newest" and done[1] == "the comparison of older with newest"
    assert done[2].startswith("Calibration's agreement for all runs")
    assert agreement._INTERVALS  # the correctness pairs' interval was computed

    def computed_again(*args, **kwargs):
        raise AssertionError("computed on the page's first visit")

    monkeypatch.setattr(agreement, "table_interval", computed_again)
    monkeypatch.setattr(cached, "report", computed_again)
    monkeypatch.setattr(cached, "compare_runs", computed_again)
    at = app("pages/calibration.py")
    assert not at.exception, at.exception
    assert at.table[0].value.loc["Correctness", "95% interval"].startswith("[")
    at = app("pages/evaluate.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="eval_selected").value == "newest"
    assert len(at.metric) >= len(expected.metrics)  # a tile per metric, from the kept report
    at = app("pages/compare.py")
    assert not at.exception, at.exception
    assert [s.value for s in at.selectbox][:2] == ["older", "newest"]  # A, B: the kept comparison shown


def test_a_busy_store_at_start_is_one_line_in_the_log_and_the_pages_compute_their_own(caplog):
    from pages.views.precompute import precompute_when_serving
    from store.errors import StoreLocked

    def busy():
        raise StoreLocked("workbench.duckdb", 15)

    precompute_when_serving(busy, is_up=lambda: True)  # returns: nothing raised into the server's thread
    assert "the pages' statistics were not precomputed (the store workbench.duckdb stayed locked" in caplog.text
    assert "Traceback" not in caplog.text
