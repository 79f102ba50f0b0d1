"""Grounding and topicality: judge criteria with their own prompt versions, chosen per evaluation, rated by
people, calibrated and compared like the first three; the first three unchanged."""

import dataclasses
import hashlib
import json

import duckdb
import pytest
from test_app import app, fresh_streamlit_caches, wait_for_jobs  # noqa: F401 - the fixture clears Streamlit's caches
from test_evaluation import ITEMS, dataset
from test_regression import store_run

from pipeline.calibration.agreement import agreement, inter_annotator
from pipeline.calibration.annotations import criterion_rubric, judged_pairs, ratings_for, save_rating
from pipeline.cli.main import main
from pipeline.errors import InputError
from pipeline.evaluation import judge_prompts as prompts
from pipeline.evaluation import regression
from pipeline.evaluation.judge import CRITERIA, JudgePin, judge, judge_pin, recorded_version
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.models.llm import LLM
from store import evals
from store.migrations import MIGRATIONS

NEW = ("grounding", "topicality")
# sha256 of json.dumps([prompt.messages("U"), prompt.schema()], sort_keys=True) of each first criterion's prompt,
# without and with two worked examples, computed from the code before grounding and topicality were added
# (commit da1f1a4): their prompts, and so their cached replies and pins, must not change
BEFORE = {
    "correctness": (
        "ea160e2a22bce97ddd9669d22edb83927f58ca6494ab9478cab71b57ae69ac4f",
        "7b43fae691a75f63a4e29f3b868b7784ceb42023d8c046f9bbfadc5c7481c43d",
    ),
    "helpfulness": (
        "9fdb976eb8e6f1df12930faf29131f1be5dc8933c70f2336999f145be8454f57",
        "d5311e62cf5e2cf57e119407de5113f53705a02d4cabea1a7218bb58f3b0ad32",
    ),
    "faithfulness": (
        "be10a1371b0fd36cf2b223bb0f94dda99dac2b72dd947917c99992774c8b2bdb",
        "5166e1bc78efc25d18b29f10535675dfb92ad469cc6665d3fb93725a73f3fe04",
    ),
}


def digest(prompt) -> str:
    return hashlib.sha256(json.dumps([prompt.messages("U"), prompt.schema()], sort_keys=True).encode()).hexdigest()


def judge_requests(fake, since=0) -> dict[str, int]:
    """Judge requests since the index, counted by the criterion their rubric names."""
    counts = {}
    for r in fake.requests[since:]:
        body = r["body"] or {}
        if "score" in ((body.get("format") or {}).get("properties") or {}):
            system = body["messages"][0]["content"]
            criterion = next(c for c in CRITERIA if f"{c.capitalize()}:" in system)
            counts[criterion] = counts.get(criterion, 0) + 1
    return counts


def uncached(settings):
    return dataclasses.replace(settings, cache_enabled=False)  # every judge prompt reaches the fake


def test_the_first_three_criteria_keep_their_prompts_and_version_byte_for_byte():
    for criterion, (plain, with_examples) in BEFORE.items():
        prompt = prompts.judge_prompt(criterion)
        assert (prompt.name, prompt.version) == (f"judge_{criterion}", "judge-v1")
        assert digest(prompt) == plain
        assert digest(prompts.judge_prompt(criterion, ("EX1", "EX2"))) == with_examples
    assert prompts.JUDGE_PROMPT_VERSION == "judge-v1"


def test_grounding_and_topicality_have_anchored_rubrics_and_versions_of_their_own():
    assert CRITERIA == ("correctness", "helpfulness", "faithfulness", "grounding", "topicality")
    for criterion in NEW:
        prompt = prompts.judge_prompt(criterion)
        assert prompt.version == f"judge-{criterion}-v1" != prompts.JUDGE_PROMPT_VERSION
        description, anchors = criterion_rubric(criterion)
        assert list(anchors) == [5, 4, 3, 2, 1]
        system = prompt.messages("U")[0]["content"]
        assert description in system and all(f"{s}: {text}" in system for s, text in anchors.items())
    # each rubric says what sets it apart from its neighbours
    assert "Unlike faithfulness" in criterion_rubric("grounding")[0]
    assert "not claim by claim" in criterion_rubric("grounding")[0]
    assert "Shared words are not enough" in criterion_rubric("topicality")[0]


def test_each_score_carries_its_criterions_version_and_the_correction_sets_suffix(fake, settings, db):
    llm = LLM(settings, db)
    base = judge_pin(llm, settings)
    pin = JudgePin(base.model, base.digest, "judge-v1+corrections-v3")
    scores = judge(llm, settings, "When did the Transformer appear?", "In 2017 [1].", "[1] ...", "In 2017.", pin)
    assert {s.metric: s.prompt_version for s in scores} == {
        "judge_correctness": "judge-v1+corrections-v3",
        "judge_helpfulness": "judge-v1+corrections-v3",
        "judge_faithfulness": "judge-v1+corrections-v3",
        "judge_grounding": "judge-grounding-v1+corrections-v3",
        "judge_topicality": "judge-topicality-v1+corrections-v3",
    }
    assert recorded_version("judge_grounding", "judge-v1", {}) == "judge-v1"  # a run that never recorded one
    config = {"judge_prompt_versions": {"grounding": "judge-grounding-v2"}}
    assert recorded_version("judge_grounding", "judge-v1+corrections-v1", config) == "judge-grounding-v2+corrections-v1"
    assert recorded_version("judge_correctness", "judge-v1", config) == "judge-v1"


@pytest.mark.slow
def test_an_evaluation_scores_and_stores_the_new_criteria_under_their_own_version(fake, settings, kb_db):
    outcome = run_evaluation(uncached(settings), kb_db, dataset(ITEMS[:2]), "five")
    run = evals.get_eval_run(kb_db, "five")
    assert run.judge_prompt_version == "judge-v1"  # the run's pin is what it always was
    assert run.config["metrics"][-3:-1] == ["judge_grounding", "judge_topicality"]
    assert run.config["judge_prompt_versions"] == {
        "grounding": "judge-grounding-v1",
        "topicality": "judge-topicality-v1",
        "question_rewrite": "judge-question-rewrite-v1",  # a conversation's turns (test_conversation_eval.py)
    }
    with kb_db.cursor() as cur:
        rows = cur.execute(
            "SELECT metric, prompt_version, status, value FROM scores WHERE eval_run_id = ? AND metric LIKE 'judge_%' "
            "AND metric <> 'judge_question_rewrite'",  # not applicable to single questions
            [outcome.eval_run_id],
        ).fetchall()
    versions = {metric: version for metric, version, _, _ in rows}
    assert versions == {
        "judge_correctness": "judge-v1",
        "judge_helpfulness": "judge-v1",
        "judge_faithfulness": "judge-v1",
        "judge_grounding": "judge-grounding-v1",
        "judge_topicality": "judge-topicality-v1",
    }
    assert len(rows) == 10 and all(status == "ok" and 1 <= value <= 5 for _, _, status, value in rows)
    assert judge_requests(fake) == {c: 2 for c in CRITERIA}
    means = {m["metric"]: m for m in report(settings, kb_db, "five").metrics}
    assert means["judge_grounding"]["n"] == means["judge_topicality"]["n"] == 2


def test_an_unparseable_grounding_reply_is_kept_invalid_with_its_reason(fake, settings, kb_db):
    def grounding(body):
        return "Grounding:" in body["messages"][0]["content"] and "format" in body

    fake.enqueue("a solid answer, I would say four", match=grounding, times=2)
    outcome = run_evaluation(uncached(settings), kb_db, dataset(ITEMS[:1]), "mute-grounding")
    rows = {s["metric"]: s for s in evals.item_scores(kb_db, outcome.eval_run_id, ITEMS[0].id)}
    assert rows["judge_grounding"]["status"] == "invalid" and rows["judge_grounding"]["value"] is None
    assert "invalid judge_grounding reply after a retry" in rows["judge_grounding"]["explanation"]
    assert rows["judge_grounding"]["prompt_version"] == "judge-grounding-v1"
    assert rows["judge_topicality"]["status"] == "ok"
    result = report(settings, kb_db, "mute-grounding")
    assert (result.judge_invalid, result.judge_total) == (1, 5)


def test_a_chosen_subset_of_metrics_is_all_that_runs(fake, settings, kb_db):
    chosen = ["judge_topicality", "judge_grounding"]
    outcome = run_evaluation(uncached(settings), kb_db, dataset(ITEMS[:2]), "only-two", metrics=chosen)
    assert judge_requests(fake) == {"grounding": 2, "topicality": 2}
    other_metric_calls = [
        r
        for r in fake.requests
        if "questions" in (((r["body"] or {}).get("format") or {}).get("properties") or {})  # answer relevancy
    ]
    assert other_metric_calls == []
    with kb_db.cursor() as cur:
        rows = cur.execute("SELECT metric FROM scores WHERE eval_run_id = ?", [outcome.eval_run_id]).fetchall()
    stored = {r[0] for r in rows}
    assert stored == {"judge_grounding", "judge_topicality"}
    run = evals.get_eval_run(kb_db, "only-two")
    assert run.config["metrics"] == ["judge_grounding", "judge_topicality"]  # registry order
    result = report(settings, kb_db, "only-two")
    assert "faithfulness (not chosen for this evaluation)" in result.diagnosis.sentence


@pytest.mark.slow
def test_a_resumed_evaluation_keeps_its_metrics_and_refuses_others(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "resumable", metrics=["judge_grounding"])
    with pytest.raises(InputError, match="measures judge_grounding; resuming it with judge_correctness"):
        run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "resumable", metrics=["judge_correctness"])
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "resumable")  # no choice: its own
    assert outcome.progress.done == 2
    with kb_db.cursor() as cur:
        stored = cur.execute(
            "SELECT DISTINCT metric FROM scores WHERE eval_run_id = ?", [outcome.eval_run_id]
        ).fetchall()
    assert stored == [("judge_grounding",)]


@pytest.mark.slow
def test_a_run_from_before_the_choice_resumes_with_the_metrics_it_has_scores_of(fake, settings, kb_db):
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "older")
    legacy = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"] + [
        f"judge_{c}" for c in ("correctness", "helpfulness", "faithfulness")
    ]
    with kb_db.cursor() as cur:  # what a run started before this change looks like
        config = json.loads(cur.execute("SELECT config FROM eval_runs WHERE name = 'older'").fetchone()[0])
        del config["metrics"], config["judge_prompt_versions"]
        cur.execute("UPDATE eval_runs SET config = ? WHERE name = 'older'", [json.dumps(config)])
        # only the legacy metrics' scores: those registered since (built in or a plugin) were not measured then
        cur.execute("DELETE FROM scores WHERE NOT list_contains(?, metric)", [legacy])
    resumed = run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "older")
    assert resumed.eval_run_id == outcome.eval_run_id
    second = {s["metric"] for s in evals.item_scores(kb_db, outcome.eval_run_id, ITEMS[1].id)}
    assert second == set(legacy)


@pytest.mark.slow
def test_a_run_from_before_the_choice_with_no_item_done_resumes_with_that_times_metrics(fake, settings, kb_db):
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "older-empty")
    with kb_db.cursor() as cur:  # started before this change, killed before its first item was saved
        config = json.loads(cur.execute("SELECT config FROM eval_runs WHERE name = 'older-empty'").fetchone()[0])
        del config["metrics"], config["judge_prompt_versions"]
        cur.execute("UPDATE eval_runs SET config = ? WHERE name = 'older-empty'", [json.dumps(config)])
        cur.execute("DELETE FROM scores WHERE eval_run_id = ?", [outcome.eval_run_id])
        cur.execute("DELETE FROM eval_items WHERE eval_run_id = ?", [outcome.eval_run_id])
    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "older-empty")  # not refused as a configuration change
    scored = {s["metric"] for s in evals.item_scores(kb_db, outcome.eval_run_id, ITEMS[0].id)}
    assert "judge_correctness" in scored and not scored & {"judge_grounding", "judge_topicality"}


def test_unknown_or_no_metrics_are_refused_with_the_names_to_choose_from(fake, settings, kb_db):
    with pytest.raises(InputError, match="unknown metric 'judge_tone'") as error:
        run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "bad", metrics=["judge_grounding", "judge_tone"])
    assert "judge_topicality" in error.value.fix
    with pytest.raises(InputError, match="no metric chosen"):
        run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "bad", metrics=[])
    assert evals.get_eval_run(kb_db, "bad") is None


@pytest.mark.slow
def test_the_cli_chooses_metrics_with_a_comma_list(fake, settings, kb_db, tmp_path, capsys):
    golden = tmp_path / "golden.jsonl"
    golden.write_text(ITEMS[0].model_dump_json() + "\n")
    assert main(["eval", str(golden), "--name", "cli-two", "--metrics", "judge_grounding, judge_topicality"]) == 0
    run = evals.get_eval_run(kb_db, "cli-two")
    assert run.config["metrics"] == ["judge_grounding", "judge_topicality"]
    assert main(["eval", str(golden), "--name", "cli-bad", "--metrics", "judge_tone"]) == 2
    assert "unknown metric 'judge_tone'" in capsys.readouterr().err


@pytest.mark.slow
def test_people_rate_the_new_criteria_and_calibration_measures_them(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(), "rated")
    run_ids = evals.run_ids_of(kb_db, 1)
    human = [5, 4, 2, 1]
    for run_id, score in zip(run_ids, human, strict=True):
        save_rating(
            kb_db,
            run_id,
            "ana",
            {"correctness": 3, "helpfulness": 3, "faithfulness": 3, "grounding": score, "topicality": 6 - score},
        )
        save_rating(
            kb_db,
            run_id,
            "ben",
            {"correctness": 3, "helpfulness": 3, "faithfulness": 3, "grounding": score, "topicality": 3},
        )
    given = dict(zip(run_ids, human, strict=True))
    for criterion, expected in (("grounding", given), ("topicality", {r: 6 - s for r, s in given.items()})):
        pairs = [p for p in judged_pairs(kb_db, run_ids, criterion) if p["annotator"] == "ana"]
        assert {p["run_id"]: p["human"] for p in pairs} == expected
        with kb_db.cursor() as cur:
            judged = dict(
                cur.execute(
                    "SELECT run_id, value FROM scores WHERE metric = ? AND status = 'ok'", [f"judge_{criterion}"]
                ).fetchall()
            )
        assert [p["judge"] for p in pairs] == [int(judged[p["run_id"]]) for p in pairs]
        stats = agreement([p["judge"] for p in pairs], [p["human"] for p in pairs])
        assert stats.n == 4 and stats.mean_abs_diff == pytest.approx(
            sum(abs(p["judge"] - p["human"]) for p in pairs) / 4
        )
    # ana and ben agree on every grounding score
    assert inter_annotator(kb_db, run_ids, "grounding").exact == 1.0


@pytest.mark.slow
def test_a_rating_without_the_new_criteria_counts_for_the_others_only(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "partly")
    run_ids = evals.run_ids_of(kb_db, 1)
    save_rating(kb_db, run_ids[0], "ana", {"correctness": 2, "helpfulness": 2, "faithfulness": 2})
    for bad in (0, 6, 2.5, True):
        with pytest.raises(InputError, match="grounding must be a whole number from 1 to 5"):
            save_rating(
                kb_db, run_ids[1], "ana", {"correctness": 2, "helpfulness": 2, "faithfulness": 2, "grounding": bad}
            )
    with pytest.raises(InputError, match="unknown criterion tone"):
        save_rating(kb_db, run_ids[1], "ana", {"correctness": 2, "helpfulness": 2, "faithfulness": 2, "tone": 3})
    assert [r["grounding"] for r in ratings_for(kb_db, run_ids)] == [None]
    assert len(judged_pairs(kb_db, run_ids, "correctness")) == 1
    assert judged_pairs(kb_db, run_ids, "grounding") == []
    assert inter_annotator(kb_db, run_ids, "grounding").n == 0


def test_the_migration_keeps_earlier_ratings_and_checks_the_new_columns(tmp_path):
    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    last = next(m for m in MIGRATIONS if m.__name__ == "m015_ratings_grounding_topicality")
    for migration in MIGRATIONS[: MIGRATIONS.index(last)]:
        migration(con)
    con.execute(
        "INSERT INTO ratings (run_id, annotator, correctness, helpfulness, faithfulness) VALUES (1, 'a', 1, 2, 3)"
    )
    last(con)
    assert con.execute(
        "SELECT correctness, helpfulness, faithfulness, grounding, topicality FROM ratings"
    ).fetchall() == [(1, 2, 3, None, None)]
    with pytest.raises(duckdb.ConstraintException):
        con.execute(
            "INSERT INTO ratings (run_id, annotator, correctness, helpfulness, faithfulness, topicality) "
            "VALUES (2, 'a', 1, 1, 1, 6)"
        )


def test_regression_compares_a_criterion_only_under_the_same_version_of_its_prompt(db, settings):
    values = [4.0, 5.0, 3.0, 4.0, 5.0, 4.0]
    chosen = {"metrics": ["judge_correctness", "judge_grounding"]}
    store_run(
        db,
        "v1",
        {"judge_correctness": values, "judge_grounding": values},
        config={**chosen, "judge_prompt_versions": {"grounding": "judge-grounding-v1"}},
    )
    store_run(
        db,
        "v2",
        {"judge_correctness": values, "judge_grounding": [1.0] * 6},
        config={**chosen, "judge_prompt_versions": {"grounding": "judge-grounding-v2"}},
    )
    run, baseline = regression.resolve(db, "v2", None)
    assert baseline.name == "v1"  # the same run pin: judge-v1
    comparisons = {c.metric: c for c in regression.compare(db, settings, run, baseline)}
    assert set(comparisons) == {"judge_correctness", "judge_grounding"}  # only the metrics the run measured
    grounding = comparisons["judge_grounding"]
    assert grounding.kind == "not_comparable" and not grounding.regression
    assert "judge-grounding-v1 in v1 and judge-grounding-v2 in v2" in grounding.message
    assert comparisons["judge_correctness"].kind == "ok"


def test_regression_still_catches_a_grounding_drop_under_one_version(db, settings):
    values = [4.0, 5.0, 4.0, 5.0, 4.0, 5.0, 4.0, 5.0]
    config = {"metrics": ["judge_grounding"], "judge_prompt_versions": {"grounding": "judge-grounding-v1"}}
    store_run(db, "before", {"judge_grounding": values}, config=config)
    store_run(db, "after", {"judge_grounding": [v - 2 for v in values]}, config=config)
    run, baseline = regression.resolve(db, "after", None)
    drops = [c for c in regression.compare(db, settings, run, baseline) if c.regression]
    assert ("judge_grounding", "all") in [(c.metric, c.slice) for c in drops]


@pytest.mark.slow
def test_the_evaluate_form_runs_only_the_metrics_chosen_and_refuses_none(fake, kb_db):
    at = app("pages/evaluate.py")
    chooser = at.multiselect(key="eval_metrics")
    assert chooser.value == list(regression.METRICS)  # every metric unless the user narrows it
    at.text_input(key="eval_name").set_value("form-two")
    at.number_input(key="eval_limit").set_value(1)
    chooser.set_value(["judge_topicality", "judge_grounding"])
    next(b for b in at.button if b.label == "Start evaluation").click().run()
    wait_for_jobs(600)
    at.run()
    assert not at.exception, at.exception
    run = evals.get_eval_run(kb_db, "form-two")
    assert set(evals.item_statuses(kb_db, run.id).values()) == {"done"}, evals.item_statuses(kb_db, run.id)
    assert run is not None and run.config["metrics"] == ["judge_grounding", "judge_topicality"]
    with kb_db.cursor() as cur:
        rows = cur.execute("SELECT DISTINCT metric FROM scores WHERE eval_run_id = ?", [run.id]).fetchall()
    assert sorted(r[0] for r in rows) == ["judge_grounding", "judge_topicality"]

    # still open after the first evaluation started (and a rerun since): the form stays under the user's hand
    assert at.session_state["start_open"] is True and not [b for b in at.button if b.label == "Start an evaluation"]
    at.text_input(key="eval_name").set_value("form-none")
    at.multiselect(key="eval_metrics").set_value([])
    next(b for b in at.button if b.label == "Start evaluation").click().run()
    assert any("no metric chosen" in e.value for e in at.error), [e.value for e in at.error]
    assert evals.get_eval_run(kb_db, "form-none") is None


@pytest.mark.slow
def test_trends_draws_a_criterion_under_its_own_prompt_version(db):
    values = [4.0, 5.0, 3.0, 4.0, 5.0, 4.0]
    chosen = {"metrics": ["judge_correctness", "judge_grounding"]}
    for name, version in (
        ("g1", "judge-grounding-v1"),
        ("g1-again", "judge-grounding-v1"),
        ("g2", "judge-grounding-v2"),
    ):
        store_run(
            db,
            name,
            {"judge_correctness": values, "judge_grounding": values},
            config={**chosen, "judge_prompt_versions": {"grounding": version}},
        )
    at = app("pages/trends.py")
    metric = next(m for m in at.multiselect if m.label == "Metrics")
    assert {"judge_correctness", "judge_grounding"} <= set(metric.options)

    def series() -> dict[str, int]:
        from test_charts import frame_with

        points = frame_with(at.get("plotly_chart")[0], "mean_text")
        # a series is named "pipeline · judge pin · dataset · size"
        return points["series"].str.split(" · ").str[1].value_counts().to_dict()

    metric.set_value(["judge_grounding"]).run()
    assert series() == {"llama3.2@d1 / judge-grounding-v1": 2, "llama3.2@d1 / judge-grounding-v2": 1}
    next(m for m in at.multiselect if m.label == "Metrics").set_value(["judge_correctness"]).run()
    assert series() == {"llama3.2@d1 / judge-v1": 3}  # the first three criteria's series as before


@pytest.mark.slow
def test_calibration_shows_the_new_criteria_like_the_others(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "cal-five")
    run_ids = evals.run_ids_of(kb_db, 1)
    save_rating(kb_db, run_ids[0], "ana", dict.fromkeys(CRITERIA, 4))
    save_rating(kb_db, run_ids[1], "ana", {"correctness": 2, "helpfulness": 2, "faithfulness": 2})  # before them
    at = app("pages/calibration.py")
    assert not at.exception, at.exception
    overview = at.table[0].value  # judge vs people, a row per criterion
    assert list(overview.index) == ["Correctness", "Helpfulness", "Faithfulness", "Grounding", "Topicality"]
    assert list(overview["n"]) == [2, 2, 2, 1, 1]
    choice = at.radio(key="calibration_criterion")
    assert choice.value == "correctness" and list(choice.options) == [c.capitalize() for c in CRITERIA]
    for criterion, n in [("grounding", 1), ("topicality", 1), ("helpfulness", 2)]:  # the details of one at a time
        at.radio(key="calibration_criterion").set_value(criterion).run()
        assert not at.exception, at.exception
        assert criterion.capitalize() in [h.value for h in at.subheader]
        assert not {c.capitalize() for c in CRITERIA if c != criterion} & {h.value for h in at.subheader}
        details = next(t.value for t in at.table if "judge vs people" in list(t.value.index))
        assert int(details.loc["judge vs people", "n"]) == n


@pytest.mark.slow
def test_calibration_keeps_the_criterion_shown_while_the_scope_has_it(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "all-rated")
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "correctness-rated")
    save_rating(kb_db, evals.run_ids_of(kb_db, 1)[0], "ana", dict.fromkeys(CRITERIA, 4))
    save_rating(kb_db, evals.run_ids_of(kb_db, 2)[0], "ana", {"correctness": 3, "helpfulness": 3, "faithfulness": 3})
    at = app("pages/calibration.py")
    at.selectbox[0].set_value("run: all-rated").run()
    at.radio(key="calibration_criterion").set_value("grounding").run()
    assert "Grounding" in [h.value for h in at.subheader]
    at.selectbox[0].set_value("run: correctness-rated").run()  # grounding is not rated there
    assert not at.exception, at.exception
    assert at.radio(key="calibration_criterion").value == "correctness"
    assert "Correctness" in [h.value for h in at.subheader] and "Grounding" not in [h.value for h in at.subheader]
    at.selectbox[0].set_value("run: all-rated").run()
    assert at.radio(key="calibration_criterion").value == "correctness"
