"""The Calibration page's alignment action: the plan is shown before anything runs, the run keeps or refuses the
new prompt as the command does, and the versions are listed with one to go back to."""

import pytest
from test_align_cli import rated_store
from test_app import app, fresh_streamlit_caches  # noqa: F401 (autouse: each AppTest opens this test's store)
from test_evaluation import dataset

from pipeline.calibration.annotations import save_rating
from pipeline.evaluation.runner import evaluation_pin, run_evaluation
from pipeline.history.evaluations import run_ids_of
from store import judge_versions


@pytest.mark.slow
def test_the_page_plans_runs_and_lists_versions(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(), "cal")  # the page's scope: an evaluation's judged runs
    with kb_db.cursor() as cur:  # people agree with the unbiased judge
        judged = cur.execute(
            "SELECT run_id, value::INTEGER FROM scores WHERE metric = 'judge_correctness' AND status = 'ok'"
            " AND list_contains(?::BIGINT[], run_id)",
            [run_ids_of(kb_db, 1)],
        ).fetchall()
    assert len(judged) == 4
    for run_id, score in judged:
        save_rating(kb_db, run_id, "ana", {"correctness": score, "helpfulness": 3, "faithfulness": 3})
    rated_store(kb_db)
    fake.judge_short_bias = True
    at = app("pages/calibration.py")
    assert any("No fitted versions yet" in c.value for c in at.caption)

    def chats():
        return [r for r in fake.requests if (r.get("body") or {}).get("messages")]

    calls_before = len(chats())
    at.button(key="plan_correctness").click().run()
    assert not at.exception, at.exception
    [plan] = [i.value for i in at.info if "model calls" in i.value]
    assert "44 rated answers of 24 questions" in plan and "prompt tokens" in plan
    assert len(chats()) == calls_before  # planning asks the model nothing
    at.button(key="run_correctness").click().run(timeout=600)
    assert not at.exception, at.exception
    assert any("New judge prompt v1" in s.value for s in at.success), [w.value for w in at.warning]
    assert judge_versions.active(kb_db)["correctness"]["version"] == 1
    [versions] = [t.value for t in at.dataframe if "fitted on" in t.value.columns]
    assert list(versions["version"]) == ["v1"] and list(versions["in use"]) == ["yes"]
    assert list(versions["fitted on"]) == ["44 ratings"]
    at.selectbox(key="version_correctness").set_value("the built-in rubric (v0)").run()
    at.button(key="use_correctness").click().run()
    assert judge_versions.active(kb_db) == {}
    assert evaluation_pin(settings, kb_db).prompt_version == "judge-v1"
