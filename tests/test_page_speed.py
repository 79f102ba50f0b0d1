"""Pages that answer in a second (issue 29): no timed reruns while nothing runs, and statistics computed once per
input, not once per render. (How fast each page is: `python -m bench page_speed`, not a timed test.)"""

from __future__ import annotations

import importlib
import threading

import numpy as np
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.local_script_runner import LocalScriptRunner
from test_app_experiments import swept, swept_store  # noqa: F401 - the fixtures: a store holding a finished sweep

import pipeline.calibration.agreement as agreement_module
from pipeline.errors import WorkbenchError
from pipeline.jobs import Job


def page(path: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    at.switch_page(path)
    return at


@pytest.fixture
def timers(monkeypatch) -> list[float]:
    """The auto-rerun intervals the script asks the browser for (a fragment's run_every), run after run."""
    asked: list[float] = []
    original = LocalScriptRunner.forward_msgs

    def recording(self):
        msgs = original(self)
        asked.extend(m.auto_rerun.interval for m in msgs if m.WhichOneof("type") == "auto_rerun")
        return msgs

    monkeypatch.setattr(LocalScriptRunner, "forward_msgs", recording)
    return asked


@pytest.mark.parametrize(
    "path, registry, running",
    [
        ("pages/evaluate.py", "pipeline.evaluation.jobs:EVALUATIONS", "0 of 3 items"),  # a running evaluation
        ("pages/experiments.py", "pipeline.experiments.jobs:SWEEPS", "Preparing the sweep"),  # a sweep starting
    ],
)
@pytest.mark.slow
def test_a_page_sets_a_refresh_timer_only_while_its_job_runs(kb_db, monkeypatch, timers, path, registry, running):
    module, name = registry.split(":")
    jobs = getattr(importlib.import_module(module), name)
    monkeypatch.setattr(jobs, "by_name", {})
    at = page(path)
    at.run()
    assert not at.exception, at.exception
    assert timers == []  # nothing runs: the browser is asked for no timed rerun

    release = threading.Event()
    job = Job("slow", 3)

    def work() -> None:  # as a job's thread does: it runs until released, then keeps how it ended
        release.wait()
        job.error = WorkbenchError("the test stopped it", fix="none needed")

    job.thread = threading.Thread(target=work, daemon=True)
    job.thread.start()
    jobs.by_name["slow"] = job
    try:
        at.run()
        assert not at.exception, at.exception
        assert timers == [1.0]  # the running job's progress is redrawn every second
        assert any(running in p.proto.text for p in at.get("progress"))
    finally:
        release.set()
        job.thread.join(5)
    timers.clear()
    at.run()  # the job ended: the page is set up again without a timer, and says how it ended
    assert not at.exception, at.exception
    assert timers == []
    assert any("the test stopped it" in e.value for e in at.error), [e.value for e in at.error]


def scores(n: int, seed: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    judge = rng.choice([1, 2, 3, 4, 5], size=n, p=[0.1, 0.15, 0.25, 0.25, 0.25])
    human = np.clip(judge + rng.choice([-1, 0, 1], size=n, p=[0.25, 0.5, 0.25]), 1, 5)
    return judge.tolist(), human.tolist()


@pytest.fixture
def computed(monkeypatch) -> list[int]:
    """One entry per kappa interval actually computed (not taken from the kept ones)."""
    calls: list[int] = []
    compute = agreement_module.table_interval

    def counting(counts, *args):
        calls.append(int(counts.sum()))
        return compute(counts, *args)

    monkeypatch.setattr(agreement_module, "table_interval", counting)
    monkeypatch.setattr(agreement_module, "_INTERVALS", {})
    return calls


def test_a_kappa_interval_is_computed_once_per_table_of_pairs(computed):
    judge, human = scores(40, 1)
    first = agreement_module.agreement(judge, human)
    assert first.kappa_low is not None and computed == [40]
    again = agreement_module.agreement(list(judge), list(human))  # the same pairs, other lists
    assert (again.kappa_low, again.kappa_high) == (first.kappa_low, first.kappa_high) and computed == [40]
    human[0] = 6 - human[0] if human[0] != 3 else 4  # a rating changed: another table
    agreement_module.agreement(judge, human)
    assert computed == [40, 40]
    agreement_module.agreement(judge + [3], human + [3])  # a rating added
    assert computed == [40, 40, 41]


@pytest.mark.slow
def test_the_calibration_page_computes_its_intervals_once_until_a_rating_changes_them(
    fake, settings, kb_db, monkeypatch, computed
):
    """The page reads the judged pairs from the store on every render; their intervals (a double bootstrap, ~1 s
    each on a busy machine) are computed only for pairs not seen before."""
    from test_evaluation import dataset

    import pages.views.calibration as calibration_views
    import pipeline.calibration.annotations as annotations_module
    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(), "cal")
    judge, human = scores(30, 2)
    real = annotations_module.judged_pairs

    def judged_pairs(db, run_ids, criterion, version=None):  # the page's store read, with 30 rated pairs
        if version is not None:
            return real(db, run_ids, criterion, version)
        base = {"run_id": run_ids[0], "annotator": "ana", "explanation": "", "question": "q", "answer": "a"}
        return [{**base, "judge": j, "human": h} for j, h in zip(judge, human, strict=True)]

    monkeypatch.setattr(annotations_module, "judged_pairs", judged_pairs)
    monkeypatch.setattr(calibration_views, "judged_pairs", judged_pairs)  # where the page's statistics read them
    at = page("pages/calibration.py")
    at.run()
    assert not at.exception, at.exception
    assert "[" in at.table[0].value.iloc[0]["95% interval"]  # an interval is shown
    first = len(computed)
    assert first >= 1
    at.run()  # a later render of the same pairs
    assert not at.exception, at.exception
    assert len(computed) == first
    judge.append(2)  # a new rating
    human.append(4)
    at.run()
    assert not at.exception, at.exception
    assert len(computed) > first and 31 in computed


@pytest.fixture
def reports(monkeypatch) -> list[str]:
    """The evaluation reports and comparisons the pages actually computed (not taken from the kept ones)."""
    import pages.views.cached as cached

    computed: list[str] = []
    report, compare_runs = cached.report, cached.compare_runs

    def counting_report(settings, db, name):
        computed.append(name)
        return report(settings, db, name)

    def counting_compare(settings, db, a, b):
        computed.append(f"{a} vs {b}")
        return compare_runs(settings, db, a, b)

    monkeypatch.setattr(cached, "report", counting_report)
    monkeypatch.setattr(cached, "compare_runs", counting_compare)
    cached._report.clear()
    cached._comparison.clear()
    return computed


@pytest.mark.slow
def test_a_finished_evaluations_report_is_computed_once_until_it_or_its_baseline_changes(
    fake, settings, kb_db, reports
):
    from test_evaluation import dataset

    from pipeline.evaluation.runner import run_evaluation
    from store.alerts import pin_baseline
    from store.evals import get_eval_run, mark_eval_run

    for name in ["oldest", "before", "after"]:
        run_evaluation(settings, kb_db, dataset(), name)
    at = page("pages/evaluate.py")
    at.run()
    assert not at.exception, at.exception
    assert reports == ["after"]  # the newest evaluation's report, computed for the first render
    at.run()
    assert reports == ["after"]  # a visit: kept
    pin_baseline(kb_db, "golden-test.jsonl", get_eval_run(kb_db, "oldest").id)  # its baseline: no longer "before"
    at.run()
    assert reports == ["after", "after"]
    after = get_eval_run(kb_db, "after")
    mark_eval_run(kb_db, after.id, "running")  # resumed: computed on every render while it runs
    at.run()
    at.run()
    assert reports == ["after"] * 4
    mark_eval_run(kb_db, after.id, "finished", add_wall_s=1.0)
    at.run()
    at.run()
    assert reports == ["after"] * 5
    assert not at.exception, at.exception


@pytest.mark.slow
def test_a_comparison_of_two_finished_evaluations_is_computed_once(fake, settings, kb_db, reports):
    from test_evaluation import dataset

    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(), "a")
    run_evaluation(settings, kb_db, dataset(), "b")
    at = page("pages/compare.py")
    at.run()
    at.run()
    assert not at.exception, at.exception
    assert reports == ["a vs b"]
    run_evaluation(settings, kb_db, dataset(), "c")  # B is now the newest run, c
    at = page("pages/compare.py")
    at.run()
    assert not at.exception, at.exception
    assert reports == ["a vs b", "b vs c"]


@pytest.mark.slow
def test_a_sweeps_leaderboard_is_computed_once_until_the_sweep_changes(settings, swept, monkeypatch):  # noqa: F811
    import streamlit as st

    import pages.views.cached as cached
    from pipeline.experiments.leaderboard import leaderboard
    from store import sweeps
    from store.evals import mark_eval_run

    computed: list[tuple] = []

    def counting(settings, db, name, reference=None, quality=None):
        computed.append((name, reference, quality))
        return leaderboard(settings, db, name, reference, quality)

    monkeypatch.setattr(cached, "leaderboard", counting)
    st.cache_resource.clear()  # the store of this test, and nothing kept
    at = page("pages/experiments.py")
    at.run()
    assert not at.exception, at.exception
    assert len(computed) == 1  # the first render
    at.run()
    assert len(computed) == 1  # a visit: kept
    next(s for s in at.selectbox if s.label.startswith("Reference")).set_value("top_k=5").run()
    assert len(computed) == 2 and computed[-1][1] == "top_k=5"  # another reference: another leaderboard
    row = sweeps.get_sweep(swept, "depth")
    sweeps.set_sweep_status(swept, row.id, sweeps.RUNNING)  # continued: computed on every render while it runs
    at.run()
    at.run()
    assert len(computed) == 4
    sweeps.set_sweep_status(swept, row.id, "finished")
    at.run()
    assert len(computed) == 4  # ended as it was: the leaderboard kept from before
    mark_eval_run(swept, row.combinations[1].eval_run_id, "finished", add_wall_s=1.0)  # a combination resumed
    at.run()
    at.run()
    assert len(computed) == 5
    assert not at.exception, at.exception
