"""Another pipeline's answers, scored as given: the three column conventions, refusals, rows without contexts,
the drilldown of an imported run, regressions between two runs of one pipeline, and two pipelines side by side."""

import csv
import io
import json
from itertools import groupby

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_app import fresh_streamlit_caches  # noqa: F401 - the autouse fixture: no cached store across tests

from pipeline.errors import InputError
from pipeline.evaluation import regression
from pipeline.evaluation.compare_runs import compare_runs
from pipeline.evaluation.dataset import load_dataset, parse_dataset, question_id
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.history.runs import load_result
from store import evals

TOWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."
BRIDGE = "The Golden Gate Bridge opened in 1937. Its main span is 1,280 metres long."
WALL = "The Great Wall of China is more than 21,000 kilometres long. Most of it was built during the Ming dynasty."
ROWS = [
    ("tower", "How tall is the Eiffel Tower?", "The Eiffel Tower is 330 metres tall.", TOWER),
    ("bridge", "When did the Golden Gate Bridge open?", "The Golden Gate Bridge opened in 1937.", BRIDGE),
    (
        "wall",
        "How long is the Great Wall of China?",
        "The Great Wall of China is more than 21,000 kilometres long.",
        WALL,
    ),
]
INVENTED = " It was painted bright green by a travelling circus from Lisbon."
JUDGED = {"faithfulness", "answer_relevancy", "judge_correctness"}


def ours(rows=ROWS, invent=False):
    return [
        {"id": i, "question": q, "answer": a + (INVENTED if invent else ""), "contexts": [c], "reference": a}
        for i, q, a, c in rows
    ]


def ragas(rows=ROWS):
    return [{"user_input": q, "response": a, "retrieved_contexts": [c], "reference": a} for _, q, a, c in rows]


def deepeval(rows=ROWS):
    return [
        {"input": q, "actual_output": a, "retrieval_context": [{"text": c, "source": f"{i}.md"}], "expected_output": a}
        for i, q, a, c in rows
    ]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path, rows):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()})
    path.write_text(out.getvalue())
    return path


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def stages(db, eval_run_id):
    with db.cursor() as cur:
        return {
            r[0]
            for r in cur.execute("SELECT DISTINCT stage FROM llm_calls WHERE eval_run_id = ?", [eval_run_id]).fetchall()
        }


@pytest.mark.parametrize(
    ("convention", "rows", "write", "suffix"),
    [
        ("the workbench", ours(), write_jsonl, "jsonl"),
        ("Ragas", ragas(), write_csv, "csv"),
        ("DeepEval", deepeval(), write_parquet, "parquet"),
    ],
)
@pytest.mark.slow
def test_each_convention_is_scored_as_given_end_to_end(fake, settings, db, tmp_path, convention, rows, write, suffix):
    dataset = load_dataset(write(tmp_path / f"answers.{suffix}", rows))
    assert dataset.mapping.convention == convention and dataset.given_answers and not dataset.bad_rows
    outcome = run_evaluation(settings, db, dataset, "imported")
    assert outcome.status == "finished" and outcome.progress.done == 3
    result = report(settings, db, "imported")
    means = {m["metric"]: m["mean"] for m in result.metrics}
    assert means["faithfulness"] == 1.0  # every answer copies its context
    assert means["context_recall"] == 1.0 and means["context_precision"] == 1.0  # the reference is in the context
    assert means["answer_relevancy"] is not None and means["judge_correctness"] is not None
    assert evals.get_eval_run(db, "imported").pipeline == "answers"  # the file's name
    # no retrieval and no generation: only the checker's, the judge's and the metrics' calls
    assert not stages(db, outcome.eval_run_id) & {"generate", "grade_context", "rewrite_query", "on_topic"}
    assert {"judge_correctness", "metric_answer_relevancy"} <= stages(db, outcome.eval_run_id)
    # each answer copies its context, so every sentence is supported as it stands: none is split into claims
    assert "extract_claims" not in stages(db, outcome.eval_run_id)
    run = load_result(db, result.items[0]["run_id"])
    assert run.kind == "imported" and run.pipeline == "answers" and run.status == "accepted"
    assert [p.text for p in run.passages] == [next(c for _, q, _, c in ROWS if q == run.question)]


@pytest.mark.slow
def test_the_drilldown_of_an_imported_answer_has_its_claims_evidence_and_calls(fake, settings, db, tmp_path):
    rows = ours(invent=True)
    rows[0]["contexts"] = [{"text": TOWER, "source": "tower.md", "score": 0.9}, BRIDGE]
    run_evaluation(settings, db, load_dataset(write_jsonl(tmp_path / "v2.jsonl", rows)), "v2", pipeline="bot")
    item = next(i for i in report(settings, db, "v2").items if i["item_id"] == "tower")
    run = load_result(db, item["run_id"])
    assert run.kind == "imported" and run.pipeline == "bot" and run.status == "flagged"
    assert [(p.n, p.source, p.text, p.score) for p in run.passages] == [
        (1, "tower.md", TOWER, 0.9),
        (2, "context 2", BRIDGE, 0.0),
    ]
    verdicts = {c.text: c.verdict for c in run.final_claims}
    assert verdicts["The Eiffel Tower is 330 metres tall."] == "supported"
    assert verdicts[INVENTED.strip()] in ("unsupported", "contradicted")
    supported = next(c for c in run.final_claims if c.verdict == "supported")
    assert supported.passage is not None and supported.passage.source == "tower.md"
    with db.cursor() as cur:
        calls = cur.execute("SELECT count(*) FROM llm_calls WHERE run_id = ?", [item["run_id"]]).fetchone()[0]
    assert calls > 0  # the judging's model calls belong to the run


@pytest.mark.slow
def test_a_row_with_an_answer_but_no_contexts_is_scored_by_the_metrics_that_apply(fake, settings, db, tmp_path):
    rows = [{"question": q, "answer": a, "reference": a} for _, q, a, _ in ROWS]
    dataset = load_dataset(write_jsonl(tmp_path / "bare.jsonl", rows))
    assert dataset.given_answers and "no contexts column" in " ".join(dataset.mapping.notes)
    run_evaluation(settings, db, dataset, "bare")
    summary = {m["metric"]: m for m in report(settings, db, "bare").metrics}
    for metric in ("faithfulness", "context_precision", "context_recall", "judge_faithfulness", "judge_grounding"):
        assert summary[metric]["mean"] is None and summary[metric]["not_applicable"] == 3, metric
    assert summary["answer_relevancy"]["mean"] is not None and summary["judge_correctness"]["mean"] is not None
    run_id = report(settings, db, "bare").items[0]["run_id"]
    scores = {s["metric"]: s for s in evals.item_scores(db, evals.get_eval_run(db, "bare").id, question_id(ROWS[0][1]))}
    assert scores["faithfulness"]["explanation"] == "the answer was given without contexts: nothing to check it against"
    assert load_result(db, run_id).status == "no_contexts"


def test_a_file_without_a_question_column_is_refused_naming_it(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"prompt": "q?", "response": "a."}])
    with pytest.raises(InputError) as caught:
        load_dataset(path)
    assert "no question column (looked for question, user_input, input)" in caught.value.message
    assert "prompt, response" in caught.value.message


def test_contexts_that_are_neither_a_list_nor_a_string_are_bad_rows_by_line(tmp_path):
    rows = [
        *ours(),
        {"id": "n", "question": "Q?", "answer": "A.", "contexts": 42},
        {"id": "d", "question": "Q2?", "answer": "A.", "contexts": {"k": 1}},
    ]
    dataset = load_dataset(write_jsonl(tmp_path / "mixed.jsonl", rows))
    assert [i.id for i in dataset.items] == ["tower", "bridge", "wall"]
    assert [(b.line, b.reason) for b in dataset.bad_rows] == [
        (4, "contexts: must be a list of contexts or a string, not int"),
        (5, "contexts: must be a list of contexts or a string, not dict"),
    ]
    only_bad = write_jsonl(tmp_path / "bad.jsonl", rows[3:])
    with pytest.raises(InputError, match="has no valid rows \\(2 bad\\): line 1: contexts"):
        load_dataset(only_bad)


def test_csv_contexts_are_a_json_list_or_one_plain_string_and_a_missing_answer_is_a_bad_row():
    text = (
        'question,answer,contexts\nQ1?,A1.,"[""one"", ""two""]"\nQ2?,A2.,just one context\n'
        'Q3?,,x\nQ4?,A4.,"[""broken"\n'
    )
    dataset = parse_dataset(text, "c.csv", "csv")
    assert [[c.text for c in i.contexts] for i in dataset.items] == [["one", "two"], ["just one context"]]
    assert [(b.line, b.reason.split(":")[0]) for b in dataset.bad_rows] == [(4, "answer"), (5, "contexts")]


def test_a_golden_set_refuses_a_pipeline_name(fake, settings, db, tmp_path):
    golden = write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "What is RAG?"}])
    with pytest.raises(InputError, match="pipeline name .* goes with a dataset that carries answers"):
        run_evaluation(settings, db, load_dataset(golden), "g", pipeline="bot")


def test_resuming_with_other_answers_of_the_same_pipeline_is_refused(fake, settings, db, tmp_path):
    run_evaluation(settings, db, load_dataset(write_jsonl(tmp_path / "a.jsonl", ours())), "r", metrics=["faithfulness"])
    changed = load_dataset(write_jsonl(tmp_path / "a2.jsonl", ours(invent=True)))
    with pytest.raises(InputError, match="other answers of 'bot'|answers of 'a'"):
        run_evaluation(settings, db, changed, "r", pipeline="bot")


MANY = [
    (
        f"city-{n}",
        f"What is notable about city number {n}?",
        f"City number {n} has a famous harbour built in {1700 + n}.",
        f"City number {n} has a famous harbour built in {1700 + n}. Its old town is walkable.",
    )
    for n in range(12)
]


@pytest.mark.slow
def test_two_runs_of_one_pipeline_alert_when_the_answers_get_worse_and_not_when_equal(fake, settings, db, tmp_path):
    metrics = ["faithfulness"]
    first = load_dataset(write_jsonl(tmp_path / "week1.jsonl", ours(MANY)))
    run_evaluation(settings, db, first, "week1", metrics=metrics, pipeline="bot")
    same = load_dataset(write_jsonl(tmp_path / "week2.jsonl", ours(MANY)))
    outcome = run_evaluation(settings, db, same, "week2", metrics=metrics, pipeline="bot")
    assert outcome.regressions == []
    _, baseline, _ = regression.check(db, settings, "week2")
    assert baseline.name == "week1"  # same pipeline, same questions: the baseline
    worse = load_dataset(write_jsonl(tmp_path / "week3.jsonl", ours(MANY, invent=True)))
    outcome = run_evaluation(settings, db, worse, "week3", metrics=metrics, pipeline="bot")
    drops = outcome.regressions  # only drops: a floor breach is apart, in outcome.below_floor
    assert drops and drops[0].kind == "drop" and drops[0].metric == "faithfulness" and drops[0].delta < -0.3


@pytest.mark.slow
def test_another_pipeline_is_never_the_baseline_but_compare_and_gate_put_them_side_by_side(
    fake, settings, db, tmp_path
):
    metrics = ["faithfulness"]
    run_evaluation(settings, db, load_dataset(write_jsonl(tmp_path / "a.jsonl", ours(MANY))), "a", metrics=metrics)
    # the same questions and ids (the same dataset), answered by another pipeline: not compared with pipeline a
    same_questions = load_dataset(write_jsonl(tmp_path / "c.jsonl", ours(MANY, invent=True)))
    outcome = run_evaluation(settings, db, same_questions, "c", metrics=metrics)
    assert outcome.regressions == []  # its faithfulness (0.5) is below its floor: that is no regression
    assert [(c.metric, c.kind) for c in outcome.below_floor] == [("faithfulness", "floor")]
    assert regression.check(db, settings, "c")[1] is None
    # the other pipeline's file has no id column (ids made from its questions): items match by question
    b_rows = [{"user_input": q.upper(), "response": a + INVENTED, "retrieved_contexts": [c]} for _, q, a, c in MANY]
    run_evaluation(settings, db, load_dataset(write_jsonl(tmp_path / "b.jsonl", b_rows)), "b", metrics=metrics)
    assert evals.get_eval_run(db, "b").pipeline == "b"
    _, baseline, _ = regression.check(db, settings, "b")
    assert baseline is None  # pipeline a's run is not b's baseline
    comparison = compare_runs(settings, db, "a", "b")
    assert len(comparison.shared) == len(MANY) and not comparison.only_a and not comparison.only_b
    faith = next(t for t in comparison.tiles if t.metric == "faithfulness")
    assert faith.a_mean == 1.0 and faith.b_mean == pytest.approx(0.5) and faith.paired.regression
    _, _, gated = regression.check(db, settings, "b", "a")
    assert any(c.metric == "faithfulness" and c.regression and c.kind == "drop" for c in gated)


@pytest.mark.slow
def test_a_large_file_skips_bad_rows_resumes_after_kill_9_and_is_answered_from_the_cache(fake, settings, db, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    import duckdb
    from conftest import ROOT

    db.close()
    rows = [json.dumps(r) for r in ours(MANY)]
    rows.insert(4, "{not json")
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(rows) + "\n")
    dataset = load_dataset(path)
    assert [(b.line, b.reason.split(" (")[0]) for b in dataset.bad_rows] == [(5, "not valid JSON")]
    metrics = "faithfulness,answer_relevancy"
    command = [sys.executable, "-m", "pipeline", "eval", str(path), "--name", "big", "--pipeline", "bot"]
    log = tmp_path / "child.log"
    child = subprocess.Popen(
        [*command, "--concurrency", "1", "--metrics", metrics],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )

    def relevancy_asked(f) -> int:
        return len([r for r in f.requests if r["body"] and "Write three different questions" in json.dumps(r["body"])])

    # from the third item's answer relevancy on, no reply leaves the fake until the child is killed
    gate = fake.hold(match=lambda body: relevancy_asked(fake) >= 3, timeout_s=120)
    got_going = fake.wait_until(lambda f: gate.waiting >= 1 or child.poll() is not None, timeout_s=120)
    assert child.poll() is None, f"the child ended first: {log.read_text()[-2000:]}"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    gate.release()
    assert got_going, "the child never got going"
    con = duckdb.connect(settings.store_path)
    finished_before = con.execute("SELECT count(*) FROM eval_items WHERE status = 'done'").fetchone()[0]
    con.close()
    assert 1 <= finished_before < len(MANY)

    from store.db import get_database

    db = get_database(settings)
    outcome = run_evaluation(settings, db, dataset, "big", pipeline="bot")  # its metrics are the recorded ones
    assert outcome.progress.skipped == finished_before and outcome.progress.done == len(MANY)
    with db.cursor() as cur:
        items = cur.execute("SELECT count(*), count(DISTINCT item_id) FROM eval_items").fetchone()
        kinds = cur.execute("SELECT DISTINCT kind, pipeline FROM runs").fetchall()
    assert items == (len(MANY), len(MANY)) and kinds == [("imported", "bot")]
    # the same answers scored again under another name: every model reply comes from the response cache
    again = run_evaluation(
        settings, db, dataset, "big-again", pipeline="bot", metrics=["faithfulness", "answer_relevancy"]
    )
    with db.cursor() as cur:
        fresh = cur.execute(
            "SELECT count(*) FILTER (WHERE NOT cache_hit), count(*) FROM llm_calls "
            "WHERE eval_run_id = ? AND stage NOT LIKE 'embed%'",
            [again.eval_run_id],
        ).fetchone()
    assert fresh[0] == 0 and fresh[1] >= len(MANY)


@pytest.mark.slow
def test_the_cli_shows_the_mapping_and_gates_one_pipeline_against_another(fake, settings, db, tmp_path, capsys):
    from pipeline.cli.main import main

    db.close()
    a = write_jsonl(tmp_path / "a.jsonl", ours(MANY))
    b = write_csv(tmp_path / "b.csv", [{**r, "response": r["response"] + INVENTED} for r in ragas(MANY)])
    assert main(["eval", str(a), "--name", "a", "--metrics", "faithfulness", "--pipeline", "pipeline A"]) == 0
    assert main(["eval", str(b), "--name", "b", "--metrics", "faithfulness"]) == 0
    shown = capsys.readouterr().err
    assert "b.csv: Ragas columns, answers scored as given (no retrieval, no generation)" in shown
    assert "question  <- user_input" in shown and "contexts  <- retrieved_contexts" in shown
    assert "id        <- (none: each row's id is made from its question)" in shown
    # no baseline: another pipeline's run is not one; its floor still holds, below floor only (exit 3)
    assert main(["gate", "--run", "b", "--json"]) == 3
    alone = json.loads(capsys.readouterr().out)
    assert alone["baseline"] is None and all(c["kind"] == "floor" for c in alone["comparisons"])
    assert (alone["regression"], alone["below_floor"]) == (False, True)
    assert main(["gate", "--run", "b", "--baseline", "a", "--json"]) == 1  # side by side: b's answers are worse
    gated = json.loads(capsys.readouterr().out)
    drop = next(c for c in gated["comparisons"] if c["metric"] == "faithfulness" and c["kind"] != "floor")
    assert gated["regression"] and drop["n"] == len(MANY) and drop["delta"] == pytest.approx(-0.5)


def test_given_answers_are_scored_the_same_on_either_executor(fake, settings, db, tmp_path, executor):
    dataset = load_dataset(write_jsonl(tmp_path / "answers.jsonl", ours(invent=True)))
    outcome = run_evaluation(settings, db, dataset, "either", metrics=["faithfulness"], executor=executor)
    assert outcome.status == "finished" and outcome.progress.done == 3
    faith = next(m for m in report(settings, db, "either").metrics if m["metric"] == "faithfulness")
    assert faith["mean"] == pytest.approx(0.5)  # each answer: one supported claim, one invented
    with db.cursor() as cur:
        assert cur.execute("SELECT DISTINCT kind, pipeline FROM runs").fetchall() == [("imported", "answers")]


@pytest.mark.slow
def test_trends_draws_one_series_per_pipeline_over_the_same_dataset(db):
    from test_app import app
    from test_charts import frame_with
    from test_regression import store_run

    values = [0.9, 0.8, 1.0, 0.7, 0.9]
    for name, pipeline in (("a1", "bot-a"), ("a2", "bot-a"), ("b1", "bot-b"), ("own", None)):
        run_id = store_run(db, name, {"faithfulness": values})
        with db.cursor() as cur:
            cur.execute("UPDATE eval_runs SET pipeline = ? WHERE id = ?", [pipeline, run_id])
    at = app("pages/trends.py")
    points = frame_with(at.get("plotly_chart")[0], "mean_text")
    series = points["series"].str.split(" · ").str[0].value_counts().to_dict()
    assert series == {"bot-a": 2, "bot-b": 1, "this workbench": 1}


@pytest.mark.parametrize("slots, in_a_row", [(1, True), (4, False)])
def test_a_given_answer_on_one_slot_has_its_claims_checked_passage_by_passage(fake, settings, db, slots, in_a_row):
    """One answer checked at a time (pipeline.api, a received trace) on one slot: the verifier asks each context
    about every claim waiting on it in a row (the server's prompt cache then holds the context); with slots to spare
    the claims are checked side by side, each on its own. An evaluation checks answers side by side, so its calls
    interleave on the slot anyway: it checks each claim on its own (one_at_a_time=False)."""
    import dataclasses

    from test_faithfulness import minicheck_asked

    from pipeline.evaluation.given import check_given
    from pipeline.models.llm import LLM

    lean = dataclasses.replace(
        settings,
        ollama_slots_per_host=slots,
        precheck_enabled=False,
        cache_enabled=False,
        verify_concurrency=1,
        claim_granularity="atomic",  # every sentence's claims in one pass (auto: tests/test_sentences_first.py)
    )
    answer = "The Eiffel Tower is 330 metres tall. It was painted green in 1850. Owls nest in its lifts since 1901."
    question, contexts = "How tall is the Eiffel Tower?", [TOWER, BRIDGE, WALL]
    run = check_given(lean, LLM(lean, db), question, answer, contexts, "ours", one_at_a_time=True)
    verdicts = [c.verdict for c in run.result.attempts[0].claims]
    assert verdicts[0] == "supported" and "supported" not in verdicts[1:] and len(verdicts) >= 3
    asked = [doc for doc, _ in minicheck_asked(fake)]
    runs = [doc for doc, _ in groupby(asked)]
    assert (len(runs) == 3) is in_a_row  # TOWER, then BRIDGE and WALL each about both invented claims at once
