"""Answers written elsewhere are checked sentences first, as the engine checks its own (claim_granularity auto):
`eval` over another pipeline's rows and a trace received by `collect` decompose only the sentences that fail, and
an evaluation with at least as many answers side by side as the verifier has slots checks each answer's calls one
after another (the server's prompt cache then holds its context across them)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from otlp_traces import BRIDGE, TOWER, protobuf_body, rag_trace

from pipeline.collect.assemble import assemble
from pipeline.collect.otlp import PROTOBUF, decode
from pipeline.collect.worker import OnlineWorker
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.given import in_sequence
from pipeline.evaluation.runner import run_evaluation
from pipeline.history.runs import load_result
from store import evals

HELD = "The Eiffel Tower is 330 metres tall."
FAILS = "It was painted green in 1850."
ANSWER = f"{HELD} {FAILS}"
WALL = "The Great Wall of China is more than 21,000 kilometres long. Most of it was built during the Ming dynasty."


def lean(settings, **changes):
    """No pre-check (bespoke-minicheck decides every sentence), no response cache."""
    return dataclasses.replace(settings, cache_enabled=False, precheck_enabled=False, **changes)


def extracted_answers(fake) -> list[str]:
    """The text under "Answer:" of every claim extraction the fake was asked for."""
    asked = [r for r in fake.requests if r.get("prompt") == "extract_claims"]
    return [r["body"]["messages"][-1]["content"].split("Answer:\n", 1)[1] for r in asked]


def check_only_the_failing_sentence_was_decomposed(fake, claims):
    """`claims` as stored (text, verdict, evidence), in claim order."""
    assert extracted_answers(fake) == [FAILS]  # never the supported sentence, never the whole answer
    (held, *failed) = claims
    assert held == (HELD, "supported", HELD)  # the supported sentence is one claim with its evidence
    assert failed and all(verdict != "supported" for _, verdict, _ in failed)
    assert all(text != HELD for text, _, _ in failed)


def test_eval_over_another_pipelines_rows_decomposes_only_the_sentence_that_fails(fake, settings, db, tmp_path):
    rows = tmp_path / "bot.jsonl"
    rows.write_text(json.dumps({"question": "How tall is the Eiffel Tower?", "answer": ANSWER, "contexts": [TOWER]}))
    checked = lean(settings)
    assert checked.claim_granularity == "auto"  # the default
    outcome = run_evaluation(checked, db, load_dataset(rows), "bot", concurrency=1, metrics=["faithfulness"])
    assert outcome.status == "finished"
    (run_id,) = evals.run_ids_of(db, outcome.eval_run_id)
    claims = load_result(db, run_id).attempts[0].claims
    check_only_the_failing_sentence_was_decomposed(fake, [(c.text, c.verdict, c.evidence) for c in claims])
    assert load_result(db, run_id).faithfulness == pytest.approx(1 / len(claims))


def test_a_received_trace_decomposes_only_the_sentence_that_fails(fake, settings, db):
    request = assemble(decode(protobuf_body(rag_trace(HELD, ANSWER, [(TOWER, "tower.md", 0.8)])), PROTOBUF))
    run = OnlineWorker(lean(settings), db, settle_s=0).run_of(request)
    assert run is not None and run.log.run.kind == "traced"
    claims = sorted(run.log.claims, key=lambda c: c.claim_no)
    check_only_the_failing_sentence_was_decomposed(fake, [(c.text, c.verdict, c.evidence) for c in claims])


def test_answers_side_by_side_filling_the_slots_check_their_calls_one_after_another(settings):
    four = dataclasses.replace(settings, ollama_slots_per_host=4)
    assert in_sequence(four, 4) and in_sequence(four, 8)
    assert not in_sequence(four, 2)  # slots to spare: an answer's sentences fill them side by side
    assert not in_sequence(four, 1)
    one = dataclasses.replace(settings, ollama_slots_per_host=1)
    assert not in_sequence(one, 4)  # answers side by side on one slot interleave there anyway
    assert in_sequence(one, 1, one_at_a_time=True)  # one answer on one slot (pipeline.api, collect)


def calls_by_answer(fake, contexts):
    """Each context's verifier calls (the fake's records), keyed by the context's first word."""
    out = {c.split()[1]: [] for c in contexts}
    for record in fake.requests:
        if record.get("prompt") == "verifier model":
            text = record["body"]["messages"][-1]["content"]
            out[next(key for key, c in zip(out, contexts, strict=True) if c in text)].append(record)
    return out


def overlapping(records) -> bool:
    spans = sorted((r["started"], r["done"]) for r in records)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


@pytest.mark.parametrize("concurrency, one_after_another", [(2, True), (1, False)])
def test_an_evaluation_filling_the_slots_checks_each_answers_sentences_one_after_another(
    fake, settings, db, tmp_path, concurrency, one_after_another
):
    """Two slots: two answers side by side each ask the verifier one sentence at a time; one answer alone asks
    about its sentences side by side, on both slots."""
    fake.set_latency(0.2, slots=2)  # a Yes or No takes 0.2 s: calls sent together overlap
    contexts = [TOWER, BRIDGE]
    answers = [TOWER, BRIDGE]  # each sentence verbatim in its context: one call a sentence, no decomposition
    rows = tmp_path / "bot.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"question": "Tell me.", "answer": a, "contexts": [c, WALL]}) + "\n"
            for a, c in zip(answers, contexts, strict=True)
        )
    )
    checked = lean(settings, ollama_slots_per_host=2, verify_concurrency=2)
    outcome = run_evaluation(checked, db, load_dataset(rows), "bot", concurrency=concurrency, metrics=["faithfulness"])
    assert outcome.status == "finished"
    by_answer = calls_by_answer(fake, contexts)
    assert all(len(records) == 2 for records in by_answer.values())  # each of its two sentences once
    assert all(overlapping(records) is not one_after_another for records in by_answer.values())
    assert extracted_answers(fake) == []
