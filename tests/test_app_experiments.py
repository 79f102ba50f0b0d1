"""The Experiments page (AppTest): a sweep's leaderboard (each combination with its 95% interval, calls, tokens and
latency, the reference marked), the best combination per metric, the paired tests against a chosen reference with
the domain's Holm-adjusted p-values, the chart of quality against latency with the Pareto front, the link that opens a
combination in Compare against the reference; the form that runs a sweep, its refusal of an unknown setting, and the
page with no sweep yet."""

from __future__ import annotations

import shutil
import time
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, TEST_ENV
from fake_ollama import FakeOllama
from test_app import app
from test_charts import plotly_points, plotly_spec
from test_compare import open_compare

from pages.views.markup import escape_markdown, fmt_ms, fmt_score
from pages.views.plotly_charts import PARETO_FRONT
from pipeline.config import load_settings
from pipeline.evaluation import datasets
from pipeline.experiments import leaderboard, list_sweeps, run_sweep, sweepable_settings
from pipeline.experiments.jobs import sweep_jobs
from store import db as store_db
from store import sweeps

PAGE = "pages/experiments.py"
GOLDEN = ROOT / "data" / "eval" / "golden.jsonl"
SWEEP = "depth"
METRICS = ["context_recall", "judge_correctness"]
LABELS = ["top_k=3", "top_k=5", "top_k=8"]


@pytest.fixture(autouse=True)
def _clear_caches():
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture(scope="module")
def swept_store(ingested_store, tmp_path_factory):
    """A store with the knowledge base and a finished sweep `depth` (top_k=3,5,8 over 6 golden items), each item of
    each combination given a score of its own (the fake scores every combination alike): context recall rising with
    top_k, so top_k=8 is significantly better than top_k=3 after Holm's correction."""
    path = tmp_path_factory.mktemp("experiments") / "swept.duckdb"
    shutil.copy(ingested_store, path)
    with FakeOllama() as server:
        settings = load_settings(environ={**TEST_ENV, "OLLAMA_HOST": server.url, "WORKBENCH_DB": str(path)})
        database = store_db.Database(str(path), 2, 0)
        try:
            golden = datasets.resolve(database, GOLDEN).select(6)
            outcome = run_sweep(settings, database, golden, SWEEP, ["top_k=3,5,8"], metrics=METRICS, concurrency=2)
            assert outcome.status == "finished", outcome.status
            positions = {c.eval_run_id: c.position for c in sweeps.get_sweep(database, SWEEP).combinations}
            rng = np.random.default_rng(11)
            with database.transaction() as cur:
                rows = cur.execute("SELECT eval_run_id, item_id, metric FROM scores ORDER BY ALL").fetchall()
                for eval_run_id, item_id, metric in rows:
                    if metric == "context_recall":
                        value = float(np.clip(0.3 + 0.3 * positions[eval_run_id] + rng.normal(0, 0.05), 0, 1))
                    else:
                        value = float(rng.integers(1, 6))
                    cur.execute(
                        "UPDATE scores SET value = ?, status = 'ok' "
                        "WHERE eval_run_id = ? AND item_id = ? AND metric = ?",
                        [value, eval_run_id, item_id, metric],
                    )
        finally:
            database.close()
    return path


@pytest.fixture
def swept(swept_store, settings):
    """The per-test store, holding the sweep."""
    shutil.copy(swept_store, settings.store_path)
    return store_db.get_database(settings)


def frame_with(at, column: str):
    """The page's one table with this column."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def widget(widgets, label: str):
    return next(w for w in widgets if w.label == label)


def interval(i) -> str:
    return f"{i.mean:.2f} [{i.low:.2f}, {i.high:.2f}]"


@pytest.mark.slow
def test_with_no_sweep_the_page_says_how_to_run_one(db):
    at = app(PAGE)
    assert at.title[0].value == "Experiments"
    assert any(
        "No sweeps yet" in i.value and "`python -m pipeline sweep DATASET --name NAME" in i.value for i in at.info
    )
    assert at.expander[0].label == "Run a sweep" and at.expander[0].proto.expanded
    assert not [d for d in at.dataframe if "combination" in d.value.columns]  # no leaderboard
    assert not [s for s in at.selectbox if s.label == "Sweep"]


@pytest.mark.slow
def test_the_leaderboard_shows_each_combination_with_its_interval_calls_tokens_and_latency(settings, swept):
    at = app(PAGE)
    assert widget(at.selectbox, "Sweep").value == SWEEP
    board = leaderboard(settings, swept, SWEEP)
    shown = frame_with(at, "Pareto front")
    assert list(shown["combination"]) == LABELS == [r.label for r in board.rows]
    assert list(shown["reference"]) == [True, False, False]  # the sweep's reference: the first combination
    assert list(shown["top_k"]) == ["3", "5", "8"] and list(shown["evaluation"]) == [f"{SWEEP}/{x}" for x in LABELS]
    quality = frame_with(at, LABELS[0])  # a metric a row, a combination a column
    costs = frame_with(at, "p50 latency (ms)").set_index("combination")
    for (_, cells), row in zip(shown.iterrows(), board.rows, strict=True):
        for metric, label in (("context_recall", "context recall"), ("judge_correctness", "judge correctness")):
            assert row.metrics[metric].n == 6 and quality.loc[label, row.label] == interval(row.metrics[metric])
        assert cells["Pareto front"] == row.pareto
        cells = costs.loc[row.label]
        assert cells["calls"] == row.calls > 0 and cells["cache hits"] == row.cache_hits
        assert cells["tokens"] == row.prompt_tokens + row.completion_tokens > 0
        assert cells["p50 latency (ms)"] == pytest.approx(row.latency_p50_ms)
        assert (
            cells["p95 latency (ms)"] == pytest.approx(row.latency_p95_ms) and row.latency_p95_ms >= row.latency_p50_ms
        )
    recall = [float(quality.loc["context recall", label].split()[0]) for label in LABELS]
    assert recall == sorted(recall)  # rising with top_k, as scored
    best_on = [", ".join(label.replace("_", " ") for label in row.best_for) or None for row in board.rows]
    assert [None if pd.isna(cell) else cell for cell in shown["best on"]] == best_on
    assert "context recall" in shown["best on"].iloc[2]
    assert any("reference top\\_k\\=3" in c.value and "4 paired tests" in c.value for c in at.caption)


@pytest.mark.slow
def test_the_best_combination_per_metric_is_the_domains(settings, swept):
    at = app(PAGE)
    board = leaderboard(settings, swept, SWEEP)
    best = frame_with(at, "best combination")
    assert dict(zip(best["metric"], best["best combination"], strict=True)) == {
        "context recall": board.best["context_recall"],
        "judge correctness": board.best["judge_correctness"],
    }
    assert board.best["context_recall"] == "top_k=8"
    row = next(r for r in board.rows if r.label == "top_k=8")
    assert best["mean [95% interval]"].iloc[0] == interval(row.metrics["context_recall"])


@pytest.mark.slow
def test_the_tests_against_the_reference_carry_the_domains_holm_adjusted_p_values(settings, swept):
    at = app(PAGE)
    board = leaderboard(settings, swept, SWEEP)
    tests = frame_with(at, "Holm-adjusted p")
    expected = [(r.label, t) for r in board.rows for t in r.tests.values()]
    assert len(tests) == board.n_tests == 4 and len(expected) == 4
    for (_, cells), (label, t) in zip(tests.iterrows(), expected, strict=True):
        assert cells["combination"] == label and cells["verdict"] == t.verdict and cells["shared items"] == 6
        assert cells["difference"] == pytest.approx(t.delta) and cells["p"] == pytest.approx(t.p_value)
        assert cells["Holm-adjusted p"] == pytest.approx(t.p_adjusted)
    recall = tests[(tests["metric"] == "context recall") & (tests["combination"] == "top_k=8")].iloc[0]
    assert recall["verdict"] == "better" and recall["Holm-adjusted p"] <= 0.05
    # another reference: the tests are against it, as the domain's
    widget(at.selectbox, "Reference (every other combination is tested against it)").set_value("top_k=8").run()
    assert not at.exception, at.exception
    other = leaderboard(settings, swept, SWEEP, reference="top_k=8")
    tests = frame_with(at, "Holm-adjusted p")
    assert list(tests["combination"]) == ["top_k=3", "top_k=3", "top_k=5", "top_k=5"]
    assert list(tests["Holm-adjusted p"]) == pytest.approx([t.p_adjusted for r in other.rows for t in r.tests.values()])
    assert list(frame_with(at, "Pareto front")["reference"]) == [False, False, True]
    assert set(tests[tests["metric"] == "context recall"]["verdict"]) == {"worse"}


@pytest.mark.slow
def test_the_chart_puts_each_combination_at_its_quality_and_latency_and_marks_the_pareto_front(settings, swept):
    at = app(PAGE)
    board = leaderboard(settings, swept, SWEEP)
    assert board.quality_metric == "context_recall" and board.pareto
    spec = plotly_spec(at.get("plotly_chart")[0])
    points = plotly_points(spec)
    rows = {r.label: r for r in board.rows}
    assert sorted(points["combination"]) == sorted(LABELS)
    for _, point in points.iterrows():
        row = rows[point["combination"]]
        assert point["quality"] == pytest.approx(row.metrics["context_recall"].mean)
        assert point["latency_ms"] == pytest.approx(row.latency_p50_ms)
        assert point["quality_text"] == fmt_score(row.metrics["context_recall"].mean)  # the hover, as tables write it
        assert point["latency_text"] == fmt_ms(row.latency_p50_ms)
    front = points[points["trace"] == PARETO_FRONT]
    assert sorted(front["combination"]) == sorted(board.pareto)
    assert "top_k=8" in board.pareto  # the best recall is on the front whatever its latency
    (line,) = [t for t in spec["data"] if t["name"] == PARETO_FRONT]
    assert line["mode"] == "lines+markers+text" and line["line"]["dash"] == "dash"  # joined, labelled
    assert line["text"] == list(front.sort_values("latency_ms")["combination"])  # fastest first
    assert any(escape_markdown(", ".join(board.pareto)) in c.value for c in at.caption)
    # another quality metric: the front of that metric
    widget(at.selectbox, "Quality metric (the chart and its Pareto front)").set_value("judge_correctness").run()
    judged = leaderboard(settings, swept, SWEEP, quality_metric="judge_correctness")
    points = plotly_points(at.get("plotly_chart")[0])
    assert sorted(points.loc[points["trace"] == PARETO_FRONT, "combination"]) == sorted(judged.pareto)
    by_label = dict(zip(points["combination"], points["quality"], strict=True))
    assert [by_label[r.label] for r in judged.rows] == pytest.approx(
        [r.metrics["judge_correctness"].mean for r in judged.rows]
    )


@pytest.mark.slow
def test_open_in_compare_links_the_reference_and_the_combination_and_compare_opens_with_them(swept):
    at = app(PAGE)
    shown = frame_with(at, "Pareto front")
    links = list(shown["compare"])
    assert pd.isna(links[0])  # the reference is not compared with itself
    for link, label in zip(links[1:], LABELS[1:], strict=True):
        address = urlsplit(link)
        assert address.path == "/compare"
        assert parse_qs(address.query) == {"a": [f"{SWEEP}/top_k=3"], "b": [f"{SWEEP}/{label}"]}
    query = {key: values[0] for key, values in parse_qs(urlsplit(links[2]).query).items()}
    compare = open_compare(**query)
    assert [s.value for s in compare.selectbox[:2]] == [f"{SWEEP}/top_k=3", f"{SWEEP}/top_k=8"]
    assert not compare.error


def run_form(at, axis: str, name: str = "form-sweep"):
    """The form submitted, and the page once the sweep it started has ended."""
    click_run(at, axis, name)
    if at.error:  # refused: nothing started
        return at
    wait_for_sweeps()
    at.run()  # as the page's timed redraw does once the sweep has ended
    assert not at.exception, at.exception
    return at


def wait_for_sweeps(seconds: float = 120) -> None:
    from pipeline.experiments.jobs import sweep_jobs

    deadline = time.monotonic() + seconds
    while any(j.running for j in sweep_jobs()) and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.slow
def test_the_form_runs_a_two_combination_sweep_and_shows_its_leaderboard(kb_db):
    name = "form <b>sweep</b> **x**"  # untrusted text: shown as written
    at = app(PAGE)
    assert at.expander[0].proto.expanded  # open while there is no sweep
    run_form(at, "top_k=3,5", name)
    assert [s.value for s in at.main.success] == [escape_markdown(f"Sweep {name}: finished · 2 combinations run now")]
    (progress,) = at.get("progress")
    assert progress.proto.value == 100 and "4 of 4 items across 2 combinations" in progress.proto.text
    (listed,) = list_sweeps(kb_db)
    assert listed["name"] == name and listed["combinations"] == listed["finished"] == 2
    stored = sweeps.get_sweep(kb_db, name)
    assert stored.metrics == ["context_recall"] and stored.n_items == 2 and stored.dataset_version == 1
    assert widget(at.selectbox, "Sweep").value == name
    shown = frame_with(at, "Pareto front")
    assert list(shown["combination"]) == ["top_k=3", "top_k=5"] and list(shown["status"]) == ["finished"] * 2
    assert list(shown["evaluation"]) == [f"{name}/top_k=3", f"{name}/top_k=5"]
    assert not any(m.allow_html for m in at.markdown) and not any("<b>" in c.value for c in at.caption)


@pytest.mark.slow
def test_the_form_refuses_an_unknown_setting_with_the_valid_names_and_stores_nothing(kb_db):
    at = app(PAGE)
    run_form(at, "topk=3,5")
    (error,) = at.error
    assert "\\'topk\\' is not a setting" in error.value
    assert all(escape_markdown(name) in error.value for name in sweepable_settings())
    assert not list_sweeps(kb_db) and not datasets.listing(kb_db)  # not even the file as a dataset version
    assert any("No sweeps yet" in i.value for i in at.info)


@pytest.fixture
def held(monkeypatch):
    """Each combination's evaluation waits until the test releases it: the sweep is caught running."""
    import threading

    from pipeline.experiments import sweep as sweep_module

    release = threading.Event()
    real = sweep_module.run_evaluation

    def waiting(*args, **kwargs):
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "run_evaluation", waiting)
    yield release
    release.set()
    wait_for_sweeps()


def click_run(at, axis: str, name: str):
    """The form submitted: the page as it returns, the sweep (if started) running in the background."""
    widget(at.text_input, "Sweep name (the same name continues a sweep)").set_value(name)
    widget(at.text_input, "Grid setting 1").set_value(axis)
    widget(at.number_input, "Only the first N items (0 = all)").set_value(2)
    widget(at.multiselect, "Metrics").set_value(["context_recall"])
    widget(at.button, "Run sweep").click().run()
    assert not at.exception, at.exception


@pytest.mark.slow
def test_a_sweep_runs_in_the_background_and_a_session_that_left_the_page_does_not_stop_it(kb_db, held):
    at = app(PAGE)
    click_run(at, "top_k=3,5", "bg")
    # the form returned at once: the sweep is stored and running; its progress and Cancel show
    (job,) = [j for j in sweep_jobs() if j.name == "bg"]
    assert job.running
    deadline = time.monotonic() + 30
    while (job.progress is None or not job.progress.current) and time.monotonic() < deadline:
        time.sleep(0.05)
    at.run()  # the fragment's next timed redraw
    assert "0 of 4 items across 2 combinations" in " ".join(p.proto.text for p in at.get("progress"))
    assert any(b.label == "Cancel" for b in at.button)
    assert widget(at.selectbox, "Sweep").value == "bg"
    other = app(PAGE)  # another session (the first one left): it sees the sweep running, and stops nothing
    assert "0 of 4 items" in " ".join(p.proto.text for p in other.get("progress"))
    held.set()
    wait_for_sweeps()
    assert sweeps.get_sweep(kb_db, "bg").status == "finished"
    at.run()  # the session that started it is told how it ended, and shows its leaderboard
    assert not at.exception, at.exception
    assert [s.value for s in at.main.success] == [escape_markdown("Sweep bg: finished · 2 combinations run now")]
    assert not any(b.label == "Cancel" for b in at.button)
    assert list(frame_with(at, "Pareto front")["status"]) == ["finished"] * 2


@pytest.mark.slow
def test_cancel_stops_a_running_sweep_and_the_same_name_continues_it(kb_db, held):
    at = app(PAGE)
    click_run(at, "top_k=3,5", "stop")
    widget(at.button, "Cancel").click().run()
    assert any("Cancelling" in i.value for i in at.info)
    held.set()
    wait_for_sweeps()
    at.run()
    assert not at.exception, at.exception
    assert any(escape_markdown("Sweep stop: cancelled") in w.value for w in at.main.warning)
    assert sweeps.get_sweep(kb_db, "stop").status == "cancelled"
    click_run(at, "top_k=3,5", "stop")  # the same name continues it
    wait_for_sweeps()
    at.run()
    assert sweeps.get_sweep(kb_db, "stop").status == "finished"


def test_a_sweep_that_cannot_start_says_why_and_stores_nothing(fake, kb_db):
    fake.stop()
    at = app(PAGE)
    run_form(at, "top_k=3,5", "offline")
    errors = [e.value for e in at.error]  # the sidebar's health check says so too
    wanted = "sweep \\'offline\\' cannot start\\: Ollama is not reachable"
    assert any(wanted in e and "ollama serve" in e for e in errors), errors
    assert not list_sweeps(kb_db) and not datasets.listing(kb_db) and not sweep_jobs_named("offline")


def sweep_jobs_named(name: str) -> list:
    return [j for j in sweep_jobs() if j.name == name]
