"""AppTests of the Evaluate page's start-up failures and deep links, and the Calibration corrections form."""

import numpy as np
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from test_app import app, fresh_streamlit_caches, start_evaluation, wait_for_jobs  # noqa: F401 - the fixture
from test_regression import store_run


def evaluate_page(eval_param: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    if eval_param is not None:
        at.query_params["eval"] = eval_param
    at.run()
    at.switch_page("pages/evaluate.py")
    at.run()
    assert not at.exception, at.exception
    return at


def start(at: AppTest, name: str, limit: int, wait: bool = True) -> AppTest:
    at.text_input(key="eval_name").set_value(name)
    at.number_input(key="eval_limit").set_value(limit)
    start_evaluation(at)
    if wait:
        wait_for_jobs()
        at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_an_evaluation_that_cannot_start_says_why_and_keeps_the_form(fake, kb_db):
    from pipeline.evaluation import datasets
    from pipeline.history.evaluations import list_eval_runs

    fake.stop()
    at = start(app("pages/evaluate.py"), "offline", 2, wait=False)
    errors = [e.value for e in at.error]
    assert any(
        "evaluation \\'offline\\' cannot start\\: Ollama is not reachable" in e and "ollama serve" in e for e in errors
    ), errors
    assert at.text_input(key="eval_name").value == "offline"
    assert list_eval_runs(kb_db) == []  # refused before anything was stored
    assert datasets.listing(kb_db) == []  # not even the file as a dataset version


@pytest.mark.slow
def test_an_evaluation_stopped_after_it_started_says_why_until_dismissed(kb_db, monkeypatch):
    from pipeline.errors import StoreLocked
    from pipeline.evaluation import jobs

    def locked_store(*args, **kwargs):  # what run_evaluation raises when another process holds the store
        raise StoreLocked("workbench.duckdb", 15)

    monkeypatch.setattr(jobs, "run_evaluation", locked_store)
    at = start(app("pages/evaluate.py"), "tiny", 1)
    stopped = [e.value for e in at.error if e.value.startswith("Evaluation tiny stopped")]
    assert stopped == [
        "Evaluation tiny stopped\\: the store workbench\\.duckdb stayed locked by another process for 15 s  \n"
        "Fix: wait for the other workbench process \\(a CLI batch or the app\\) to finish, or point WORKBENCH\\_DB "
        "at another file"
    ], [e.value for e in at.error]
    at.run()  # it stays on later reruns, until dismissed
    assert any(e.value.startswith("Evaluation tiny stopped") for e in at.error)
    next(b for b in at.button if b.label == "Dismiss").click().run()
    assert not any(e.value.startswith("Evaluation tiny stopped") for e in at.error)


@pytest.mark.slow
def test_a_finished_evaluation_is_announced_and_selected(kb_db):
    at = app("pages/evaluate.py")
    at.text_input(key="eval_name").set_value("tiny")
    next(n for n in at.number_input if "first N" in n.label).set_value(2)
    start_evaluation(at)
    wait_for_jobs()
    at.run()
    assert not at.exception, at.exception
    finished = "Evaluation tiny\\: finished · 2 done, 0 failed of 2 items · no regression alert"
    assert finished in [s.value for s in at.success]
    assert at.selectbox(key="eval_selected").value == "tiny"
    assert at.query_params["eval"] == "tiny"


@pytest.mark.slow
def test_a_first_evaluation_below_a_floor_says_so_apart_from_regressions(kb_db, monkeypatch):
    """A first evaluation on a fresh store whose answer relevancy (the fake's, well under 0.99) is below its floor:
    the notice, the report and the sidebar show it as below floor, and no regression alert is opened."""
    monkeypatch.setenv("WORKBENCH_FLOORS", "faithfulness=0.70,answer_relevancy=0.99")
    at = start(app("pages/evaluate.py"), "tiny", 2)
    [finished] = [s.value for s in at.success if s.value.startswith("Evaluation tiny")]
    assert finished.startswith("Evaluation tiny\\: finished · 2 done, 0 failed of 2 items · no regression alert · ")
    assert "below floor\\: answer relevancy 0\\." in finished and "\\(floor 0\\.99\\)" in finished
    [report] = [w.value for w in at.warning if w.value.startswith("Below the floor you set")]
    assert "answer relevancy" in report and "faithfulness" not in report and "not a regression" in report
    assert "No open regression alerts." in [c.value for c in at.sidebar.caption]
    assert [link.value for link in at.sidebar.page_link if "floor" in link.value] == ["1 metric below floor"]


@pytest.mark.slow
def test_evaluate_opens_the_evaluation_a_link_names_and_explains_an_unknown_one(db):
    base = np.linspace(0.8, 1.0, 10)
    store_run(db, "monday", {"faithfulness": base})
    store_run(db, "tuesday", {"faithfulness": base})
    assert evaluate_page().selectbox(key="eval_selected").value == "tuesday"  # the newest
    at = evaluate_page("monday")
    assert at.selectbox(key="eval_selected").value == "monday"
    assert not at.error
    at = evaluate_page("<b>**gone**</b>")
    assert [e.value for e in at.error] == [
        "There is no evaluation \\'\\<b\\>\\*\\*gone\\*\\*\\</b\\>\\': it may have been renamed, or the link is "
        "mistyped. Choose one below."
    ]
    assert at.selectbox(key="eval_selected").value == "tuesday"


@pytest.mark.slow
def test_corrections_form_names_the_annotator_and_clears_after_adding(fake, settings, kb_db):
    from test_evaluation import dataset

    from pipeline.calibration.annotations import current_corrections, save_rating
    from pipeline.evaluation.judge import CRITERIA
    from pipeline.evaluation.runner import run_evaluation
    from pipeline.history.evaluations import run_ids_of

    run_evaluation(settings, kb_db, dataset(), "cal")
    run_id = run_ids_of(kb_db, 1)[0]
    for annotator in ("ana", "bo"):
        save_rating(kb_db, run_id, annotator, dict.fromkeys(CRITERIA, 1))
    at = app("pages/calibration.py")
    chooser = next(m for m in at.multiselect if m.label == "Disagreements to turn into corrections")
    labels = [o for o in chooser.options if o.startswith("correctness")]
    assert len(labels) == 2 and labels[0].endswith("by ana") and labels[1].endswith("by bo"), labels
    chooser.set_value([chooser.options.index(labels[0])])
    next(t for t in at.text_area if t.label == "Why the human score is right").set_value("the answer is wrong")
    add = next(b for b in at.button if b.label == "Add corrections")
    add.click().run()
    assert not at.exception, at.exception
    assert any("Correction set version 1 saved" in s.value for s in at.success)
    # the count under the heading is read after the save, not before it
    assert any(c.value.startswith("Correction set version 1: 1 correction.") for c in at.caption), at.caption
    # pressed again: the corrected disagreements are no longer offered and nothing new is saved
    next(b for b in at.button if b.label == "Add corrections").click().run()
    assert not at.exception, at.exception
    version, corrections = current_corrections(kb_db)
    assert version == 1 and len(corrections) == 1
    assert any("nothing was saved" in w.value for w in at.warning)
    chooser = next(m for m in at.multiselect if m.label == "Disagreements to turn into corrections")
    assert chooser.value == [] and not [o for o in chooser.options if o.startswith(f"correctness · run {run_id} ")]


@pytest.mark.slow
def test_chat_answer_links_to_its_run(kb_db):
    from test_app import QUESTION, markdown_text

    at = app()
    at.chat_input[0].set_value(QUESTION).run()
    result = at.session_state["conversation"][0]["result"]
    run_id, attempts = result.run_id, len(result.attempts)
    counted = f"{attempts} attempt{'s' if attempts > 1 else ''}"
    assert f" {counted} · [run {run_id}](/runs?run_id={run_id})" in markdown_text(at)


@pytest.mark.slow
def test_runs_grid_has_the_drilldown_link_first(fake, settings, kb_db):
    from test_app import QUESTION

    from pipeline.answering.engine import VerifiedQueryEngine, final_result

    run = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION))
    grid = app("pages/runs.py").dataframe[0].value
    assert list(grid.columns[:2]) == ["open", "id"]
    assert grid.iloc[0]["open"] == f"/runs?run_id={run.run_id}"


@pytest.mark.slow
def test_once_an_evaluation_exists_a_primary_button_opens_the_start_form(db):
    store_run(db, "monday", {"faithfulness": np.linspace(0.8, 1.0, 10)})
    at = evaluate_page()
    [opener] = [b for b in at.button if b.label == "Start an evaluation"]
    assert opener.proto.type == "primary"
    assert at.session_state["start_open"] is False  # the form itself starts closed: the report stays high
    # and closed, draws nothing: its widgets' scripts are not loaded on every first render of the report
    assert not [b for b in at.button if b.label == "Start evaluation"] and not at.file_uploader and not at.radio
    opener.click().run()
    assert not at.exception, at.exception
    assert at.session_state["start_open"] is True
    assert not [b for b in at.button if b.label == "Start an evaluation"]  # open: the button has done its job
    assert [b for b in at.button if b.label == "Start evaluation"]  # the form's own submit


def test_a_fresh_run_ticked_on_the_form_asks_the_model_for_every_call_and_the_report_says_none_was_replayed(
    fake, kb_db
):
    from store import evals
    from store.llm_log import calls_for_eval_run

    at = start(evaluate_page(), "cached", 1)
    at = evaluate_page()
    next(b for b in at.button if b.label == "Start an evaluation").click().run()  # the form, closed once one exists
    at.checkbox(key="eval_fresh").check()
    at = start(at, "fresh", 1)
    fresh = calls_for_eval_run(kb_db, evals.get_eval_run(kb_db, "fresh").id)
    assert fresh and not any(c["cache_hit"] for c in fresh)
    assert evals.get_eval_run(kb_db, "fresh").config["cache_read"] is False  # recorded with the run
    assert any("none replayed from the cache" in c.value for c in at.caption)
