"""Conversations in evaluation: a golden conversation row is one item per turn, answered in order with the history
the evaluation produced, scored per turn (with judge_question_rewrite where a question was rewritten) and reported
per turn and per conversation; a resume continues a conversation with its stored turns; a file of another
pipeline's answers may name each row's conversation and turn."""

from __future__ import annotations

import json
import threading

import pytest
from test_app import fresh_streamlit_caches  # noqa: F401 - the fixture clears Streamlit's caches

from pipeline.cli.main import main
from pipeline.evaluation.dataset import load_dataset, parse_dataset
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.history.conversations import conversation_runs
from store import evals
from store.runs import get_run

CONVERSATION = {
    "id": "transformer",
    "turns": [
        {"question": "Who introduced the Transformer?", "reference": "Ashish Vaswani and co-authors at Google."},
        {"question": "When was it published?", "reference": "It was published in 2017 at NIPS."},
        {"question": "What is its core operation?", "reference": "Scaled dot-product attention."},
    ],
    "tags": ["talk"],
}
SINGLES = [
    {"id": "bpe-origin", "question": "Who first described byte-pair encoding?", "reference": "Philip Gage in 1994."},
    {"id": "rag-index", "question": "What did the RAG model retrieve from?", "reference": "A Wikipedia index."},
]
TURN_IDS = ["transformer#1", "transformer#2", "transformer#3"]


def golden(tmp_path, rows=None, name="conversations.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows or [CONVERSATION, *SINGLES]))
    return path


def stored_runs(db, eval_run_id):
    """item id -> its stored run (a dict: id, question, answer, standalone_question, conversation_id, turn_no)."""
    with db.cursor() as cur:
        rows = cur.execute("SELECT item_id, run_id FROM eval_items WHERE eval_run_id = ?", [eval_run_id]).fetchall()
    return {item_id: get_run(db, run_id) for item_id, run_id in rows}


def scores_of(db, eval_run_id):
    """(item id, metric) -> (value, status, explanation)."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT item_id, metric, value, status, explanation FROM scores WHERE eval_run_id = ?", [eval_run_id]
        ).fetchall()
    return {(i, m): (v, s, e) for i, m, v, s, e in rows}


def test_a_conversation_row_is_one_item_per_turn_beside_single_rows(tmp_path):
    dataset = load_dataset(golden(tmp_path))
    assert [i.id for i in dataset.items] == [*TURN_IDS, "bpe-origin", "rag-index"]
    turns = dataset.items[:3]
    assert [(i.conversation, i.turn) for i in turns] == [("transformer", 1), ("transformer", 2), ("transformer", 3)]
    assert [i.question for i in turns] == [t["question"] for t in CONVERSATION["turns"]]
    assert turns[2].reference == "Scaled dot-product attention." and all(i.tags == ["talk"] for i in turns)
    assert all(i.conversation is None and i.turn is None for i in dataset.items[3:])
    assert not dataset.bad_rows


def test_bad_conversation_rows_are_reported_by_line_and_the_rest_is_read():
    rows = [
        {"id": "empty", "turns": []},
        CONVERSATION,
        {"id": "blank", "turns": [{"question": "Who introduced BERT?"}, {"question": "   "}]},
        {"id": "not-a-list", "turns": "Who introduced BERT?"},
        SINGLES[0],
    ]
    dataset = parse_dataset("".join(json.dumps(r) + "\n" for r in rows), "bad.jsonl", "jsonl")
    assert [i.id for i in dataset.items] == [*TURN_IDS, "bpe-origin"]
    assert [(b.line, b.reason) for b in dataset.bad_rows] == [
        (1, "turns: no turns (a conversation needs at least one)"),
        (3, "turns[2].question: missing or empty (every turn needs a question)"),
        (4, "turns: must be a list of turns {question, reference?}, not str"),
    ]


@pytest.mark.slow
def test_a_three_turn_conversation_evaluates_turn_by_turn_with_the_history_it_produced(fake, settings, kb_db, tmp_path):
    outcome = run_evaluation(settings, kb_db, load_dataset(golden(tmp_path)), "talk", concurrency=3)
    assert outcome.status == "finished" and outcome.progress.done == 5
    assert evals.item_statuses(kb_db, outcome.eval_run_id) == dict.fromkeys(
        [*TURN_IDS, "bpe-origin", "rag-index"], "done"
    )
    runs = stored_runs(kb_db, outcome.eval_run_id)
    # every turn is a run of the evaluation's conversation, in order
    assert [(runs[i]["conversation_id"], runs[i]["turn_no"]) for i in TURN_IDS] == [
        ("eval:talk:transformer", 1),
        ("eval:talk:transformer", 2),
        ("eval:talk:transformer", 3),
    ]
    assert [r["id"] for r in conversation_runs(kb_db, "eval:talk:transformer")] == [runs[i]["id"] for i in TURN_IDS]
    assert runs["bpe-origin"]["conversation_id"] is None and runs["bpe-origin"]["turn_no"] is None
    # turns 2 and 3 were retrieved for standalone questions naming turn 1's subject
    assert runs["transformer#2"]["standalone_question"] == "When was the Transformer published?"
    assert "the Transformer" in runs["transformer#3"]["standalone_question"]
    assert runs["transformer#1"]["standalone_question"] == "Who introduced the Transformer?"

    scores = scores_of(kb_db, outcome.eval_run_id)
    for item in [*TURN_IDS, "bpe-origin", "rag-index"]:  # every turn has the usual metrics
        assert scores[(item, "faithfulness")][1] in ("ok", "not_applicable")
        assert scores[(item, "judge_correctness")][1] == "ok"
    rewrite = {i: scores[(i, "judge_question_rewrite")] for i in [*TURN_IDS, "bpe-origin"]}
    assert rewrite["transformer#1"][:2] == (None, "not_applicable") and "no earlier turn" in rewrite["transformer#1"][2]
    assert rewrite["bpe-origin"][:2] == (None, "not_applicable")
    # the fake judge: 5 when the standalone question keeps the question and names the earlier subject
    assert rewrite["transformer#2"][:2] == (5.0, "ok") and "the Transformer" in rewrite["transformer#2"][2]
    assert rewrite["transformer#3"][:2] == (5.0, "ok")
    with kb_db.cursor() as cur:
        version = cur.execute(
            "SELECT DISTINCT prompt_version FROM scores WHERE eval_run_id = ? AND metric = 'judge_question_rewrite' "
            "AND status = 'ok'",
            [outcome.eval_run_id],
        ).fetchall()
    assert version == [("judge-question-rewrite-v1",)]
    run = evals.get_eval_run(kb_db, "talk")
    assert run.config["judge_prompt_versions"]["question_rewrite"] == "judge-question-rewrite-v1"
    assert run.config["prompts"]["judge_question_rewrite"] == "judge-question-rewrite-v1"


@pytest.mark.slow
def test_a_rewrite_judged_invalid_is_stored_invalid_with_its_reason(fake, settings, kb_db, tmp_path):
    fake.enqueue("not json at all", match=lambda body: "Standalone question:" in json.dumps(body), times=10)
    outcome = run_evaluation(settings, kb_db, load_dataset(golden(tmp_path, [CONVERSATION])), "bad-judge")
    scores = scores_of(kb_db, outcome.eval_run_id)
    value, status, why = scores[("transformer#2", "judge_question_rewrite")]
    assert (value, status) == (None, "invalid") and why
    assert scores[("transformer#1", "judge_question_rewrite")][1] == "not_applicable"


@pytest.mark.slow
def test_per_turn_and_per_conversation_figures_match_the_stored_scores(fake, settings, kb_db, tmp_path):
    other = {
        "id": "bpe",
        "turns": [{"question": "Who adapted byte-pair encoding for translation?"}, {"question": "When?"}],
    }
    outcome = run_evaluation(settings, kb_db, load_dataset(golden(tmp_path, [CONVERSATION, other, *SINGLES])), "fig")
    scores = scores_of(kb_db, outcome.eval_run_id)
    figures = report(settings, kb_db, "fig").conversations
    assert figures is not None
    by_turn = {(row["turn"], row["metric"]): row for row in figures.by_turn}

    def mean(ids, metric):
        values = [scores[(i, metric)][0] for i in ids if scores[(i, metric)][1] == "ok"]
        return sum(values) / len(values) if values else None

    for turn, ids in ((1, ["transformer#1", "bpe#1"]), (2, ["transformer#2", "bpe#2"]), (3, ["transformer#3"])):
        for metric in ("faithfulness", "judge_correctness", "judge_question_rewrite"):
            expected = mean(ids, metric)
            got = by_turn[(turn, metric)]["mean"]
            assert got is None if expected is None else got == pytest.approx(expected)
        assert by_turn[(turn, "judge_correctness")]["n"] == len(ids)
    assert by_turn[(1, "judge_question_rewrite")] == {
        "turn": 1,
        "metric": "judge_question_rewrite",
        "mean": None,
        "n": 0,
    }
    assert by_turn[(2, "judge_question_rewrite")]["n"] == 2
    assert not any(row["turn"] is None for row in figures.by_turn)  # single questions are no turn
    each = {row["conversation"]: row for row in figures.conversations}
    assert set(each) == {"transformer", "bpe"}
    faith = {
        c: [scores[(f"{c}#{n}", "faithfulness")] for n in range(1, t + 1)] for c, t in (("transformer", 3), ("bpe", 2))
    }
    assert any(s == "ok" for rows in faith.values() for _, s, _ in rows)
    for c, rows in faith.items():
        values = [v for v, s, _ in rows if s == "ok"]
        assert each[c]["turns"] == len(rows)
        if not values:
            assert each[c]["mean_faithfulness"] is None and each[c]["worst_turn"] is None
        else:
            assert each[c]["mean_faithfulness"] == pytest.approx(sum(values) / len(values))
            worst = min((n for n in range(len(rows)) if rows[n][1] == "ok"), key=lambda n: rows[n][0])
            assert each[c]["worst_turn"] == worst + 1 and each[c]["worst_faithfulness"] == pytest.approx(rows[worst][0])
        # faithful: no faithfulness below the accept threshold (an abstention, not applicable, states nothing)
        assert each[c]["all_faithful"] == all(s != "ok" or v >= settings.faithfulness_threshold for v, s, _ in rows)
    assert figures.all_faithful_share == pytest.approx(sum(r["all_faithful"] for r in each.values()) / 2)


@pytest.mark.slow
def test_the_cli_report_and_json_show_per_turn_and_per_conversation_figures(fake, settings, kb_db, tmp_path, capsys):
    path = golden(tmp_path)
    assert main(["eval", str(path), "--name", "cli-talk"]) == 0
    text = capsys.readouterr().out
    assert "Per turn" in text and "Per conversation" in text and "transformer" in text
    assert main(["eval", str(path), "--name", "cli-talk", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    turns = body["conversations"]["by_turn"]
    assert sorted({row["turn"] for row in turns}) == [1, 2, 3]
    assert [c["conversation"] for c in body["conversations"]["conversations"]] == ["transformer"]


@pytest.mark.slow
def test_an_evaluation_without_conversations_reports_none(fake, settings, kb_db, tmp_path):
    run_evaluation(settings, kb_db, load_dataset(golden(tmp_path, SINGLES)), "plain")
    assert report(settings, kb_db, "plain").conversations is None


@pytest.mark.slow
def test_a_resume_after_a_stop_mid_conversation_continues_with_the_stored_history(fake, settings, kb_db, tmp_path):
    dataset = load_dataset(golden(tmp_path))
    cancel = threading.Event()

    def stop_after_first(progress):
        if progress.finished >= 1:
            cancel.set()

    first = run_evaluation(
        settings, kb_db, dataset, "resume-talk", concurrency=1, on_progress=stop_after_first, cancel=cancel
    )
    assert first.status == "cancelled"
    assert evals.item_statuses(kb_db, first.eval_run_id) == {"transformer#1": "done"}
    turn_one = stored_runs(kb_db, first.eval_run_id)["transformer#1"]["id"]

    # the rewrite of turn 2 must read turn 1's stored answer: its history comes from the store, not from memory
    rewrites_before = len([r for r in fake.requests if "standalone" in json.dumps((r["body"] or {}).get("format"))])
    second = run_evaluation(settings, kb_db, dataset, "resume-talk", concurrency=2)
    assert second.status == "finished" and second.progress.skipped == 1 and second.progress.done == 5
    runs = stored_runs(kb_db, second.eval_run_id)
    assert runs["transformer#1"]["id"] == turn_one  # not run again
    assert runs["transformer#2"]["standalone_question"] == "When was the Transformer published?"
    assert "the Transformer" in runs["transformer#3"]["standalone_question"]
    rewrites = [
        r for r in fake.requests[rewrites_before:] if "standalone" in json.dumps((r["body"] or {}).get("format"))
    ]
    first_answer = runs["transformer#1"]["answer"]
    assert rewrites and any(first_answer.split("[")[0][:40] in json.dumps(r["body"]) for r in rewrites)
    assert [r["turn_no"] for r in conversation_runs(kb_db, "eval:resume-talk:transformer")] == [1, 2, 3]


def test_given_answers_with_conversation_and_turn_columns_store_them_on_the_runs(fake, settings, kb_db, tmp_path):
    path = tmp_path / "other-bot.csv"
    path.write_text(
        "session_id,turn_no,question,answer,contexts\n"
        "s1,1,Who introduced the Transformer?,Vaswani and others introduced it.,"
        '"[""The Transformer was introduced by Ashish Vaswani and others.""]"\n'
        "s1,2,When was it published?,It was published in 2017.,"
        '"[""Attention Is All You Need was published in 2017.""]"\n'
        "s2,1,What is BPE?,A compression algorithm.,\n"
    )
    dataset = load_dataset(path)
    assert [(i.conversation, i.turn) for i in dataset.items] == [("s1", 1), ("s1", 2), ("s2", 1)]
    assert dataset.mapping.columns["conversation"] == "session_id" and dataset.mapping.columns["turn"] == "turn_no"
    outcome = run_evaluation(settings, kb_db, dataset, "imported-talk")
    assert outcome.progress.done == 3
    with kb_db.cursor() as cur:
        rows = cur.execute(
            "SELECT i.question, r.kind, r.conversation_id, r.turn_no FROM eval_items i JOIN runs r ON r.id = i.run_id "
            "WHERE i.eval_run_id = ? ORDER BY r.conversation_id, r.turn_no",
            [outcome.eval_run_id],
        ).fetchall()
    assert rows == [
        ("Who introduced the Transformer?", "imported", "eval:imported-talk:s1", 1),
        ("When was it published?", "imported", "eval:imported-talk:s1", 2),
        ("What is BPE?", "imported", "eval:imported-talk:s2", 1),
    ]
    scores = scores_of(kb_db, outcome.eval_run_id)
    assert all(scores[(i.id, "judge_question_rewrite")][1] == "not_applicable" for i in dataset.items)


@pytest.mark.slow
def test_the_evaluate_page_shows_the_conversation_section_only_for_an_evaluation_with_conversations(
    fake, settings, kb_db, tmp_path
):
    from test_app_evaluate_flow import evaluate_page

    run_evaluation(settings, kb_db, load_dataset(golden(tmp_path, SINGLES)), "plain")
    at = evaluate_page("plain")
    assert "Conversations" not in [h.value for h in at.subheader]
    assert "judge rewrite" not in [m.label for m in at.metric]  # applied to no item: no tile
    run_evaluation(settings, kb_db, load_dataset(golden(tmp_path)), "talk")
    at = evaluate_page("talk")
    assert "Conversations" in [h.value for h in at.subheader]
    assert "judge rewrite" in [m.label for m in at.metric]  # the follow-ups were judged
    per_turn = next(t.value for t in at.table if "turn 3" in t.value.columns)
    assert list(per_turn.columns) == ["turn 1", "turn 2", "turn 3"]
    assert per_turn.loc["judge rewrite", "turn 1"] == "n/a (n=0)"
    assert per_turn.loc["judge rewrite", "turn 2"] == "5.00 /5 (n=1)"
    caption = " ".join(c.value for c in at.caption)
    assert "1 conversations" in caption.replace("1 of 1 conversations", "1 conversations")
