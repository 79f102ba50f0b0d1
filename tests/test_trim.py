"""Repair by dropping (setting repair): a flagged answer without its sentences whose every claim failed, made
without a model call; auto drops on the sequential schedule (one slot) and regenerates on the overlapped one."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.answering.events import Token
from pipeline.answering.status import made_how
from pipeline.answering.trim import without_unsupported
from pipeline.cli.main import main
from pipeline.text import sentences
from pipeline.verification.claims import CheckedClaim
from store.runs import get_run

RAG_QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"
SUPPORTED_SENTENCE = "The RAG index held 21 million passages [1]."
INVENTED_SENTENCE = "The RAG paper won the best paper award at ICML 2019 [1]."
INVENTED = f"{SUPPORTED_SENTENCE} {INVENTED_SENTENCE}"


def claim(answer: str, n: int, sentence_no: int, verdict: str, text: str = "") -> CheckedClaim:
    s = sentences(answer)[sentence_no]
    return CheckedClaim(n, text or s.text, verdict, "test", answer_span=(s.start, s.end))


# -- the trim itself --------------------------------------------------------------------------------
def test_drops_the_sentences_whose_every_claim_failed_and_moves_the_rest():
    answer = "Paris is in France [1]. It has the Louvre [2]. The moon is cheese. It is made of brie."
    claims = [
        claim(answer, 1, 0, "supported"),
        claim(answer, 2, 1, "supported"),
        claim(answer, 3, 2, "unsupported"),
        claim(answer, 4, 3, "contradicted"),
    ]
    trimmed = without_unsupported(answer, claims)
    assert trimmed.answer == "Paris is in France [1]. It has the Louvre [2]."
    assert trimmed.dropped == ["The moon is cheese.", "It is made of brie."]
    assert [c.claim_no for c in trimmed.claims] == [1, 2]
    assert [trimmed.answer[slice(*c.answer_span)] for c in trimmed.claims] == [c.text for c in claims[:2]]


def test_a_dropped_sentence_in_the_middle_moves_the_ones_after_it():
    answer = "Paris is in France [1]. The moon is cheese. It has the Louvre [2]."
    claims = [claim(answer, 1, 0, "supported"), claim(answer, 2, 1, "unsupported"), claim(answer, 3, 2, "supported")]
    trimmed = without_unsupported(answer, claims)
    assert trimmed.answer == "Paris is in France [1]. It has the Louvre [2]."
    assert trimmed.answer[slice(*trimmed.claims[1].answer_span)] == "It has the Louvre [2]."


def test_a_list_item_goes_with_its_marker_and_the_layout_stays():
    answer = "Facts:\n- Paris is in France [1].\n- The moon is cheese.\n- It has the Louvre [2]."
    claims = [claim(answer, 1, 1, "supported"), claim(answer, 2, 2, "unsupported"), claim(answer, 3, 3, "supported")]
    trimmed = without_unsupported(answer, claims)
    assert trimmed.answer == "Facts:\n- Paris is in France [1].\n- It has the Louvre [2]."
    assert [trimmed.answer[slice(*c.answer_span)] for c in trimmed.claims] == [
        "Paris is in France [1].",
        "It has the Louvre [2].",
    ]


def test_no_trim_where_dropping_cannot_repair_the_answer():
    answer = "Paris is in France and on the moon [1]. It has the Louvre [2]."
    mixed = [
        claim(answer, 1, 0, "supported", "Paris is in France."),
        claim(answer, 2, 0, "unsupported", "Paris is on the moon."),
        claim(answer, 3, 1, "supported"),
    ]
    assert without_unsupported(answer, mixed) is None  # a sentence with a supported and a failed claim
    also_droppable = f"{answer} The moon is cheese."
    mixed_and_one_to_drop = [*mixed, claim(also_droppable, 4, 2, "unsupported")]
    assert without_unsupported(also_droppable, mixed_and_one_to_drop) is None  # dropping leaves a failed claim
    unplaced = [
        claim(answer, 1, 1, "supported"),
        dataclasses.replace(claim(answer, 2, 0, "unsupported"), answer_span=None),
    ]
    assert without_unsupported(answer, unplaced) is None  # a failed claim on no sentence
    nothing_left = [claim(answer, 1, 0, "unsupported"), claim(answer, 2, 1, "contradicted")]
    assert without_unsupported(answer, nothing_left) is None  # no supported claim would be left
    undecided = [
        claim(answer, 1, 0, "unverified"),
        claim(answer, 2, 0, "unsupported"),
        claim(answer, 3, 1, "supported"),
    ]
    assert without_unsupported(answer, undecided) is None  # an unverified claim is not a failed one: not dropped
    assert without_unsupported(answer, [claim(answer, 1, 0, "supported")]) is None  # nothing failed


# -- in a run ------------------------------------------------------------------------------------------------
def is_generation(body):
    return not body.get("format")


def generations(fake):
    return [
        r
        for r in fake.requests
        if r["path"] == "/api/chat" and not r["body"].get("format") and r["model"] == "llama3.2:latest"
    ]


def ask(kb_db, settings):
    events = list(VerifiedQueryEngine(settings=settings, db=kb_db).stream(RAG_QUESTION))
    return events, events[-1].result


@pytest.mark.slow
def test_one_slot_drops_the_unsupported_sentence_instead_of_regenerating(fake, settings, kb_db):
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1))
    assert len(generations(fake)) == 1  # no second generation
    kinds = [e.kind for e in events]
    assert "trim" in kinds and "retry" not in kinds
    trim = next(e for e in events if e.kind == "trim")
    assert trim.dropped == [INVENTED_SENTENCE] and trim.answer == SUPPORTED_SENTENCE
    first, second = result.attempts
    assert first.record.status == "flagged" and first.record.faithfulness == 0.5
    assert second.record.trimmed_from == 1 and second.record.dropped == [INVENTED_SENTENCE]
    assert (result.status, result.final_attempt, result.faithfulness) == ("accepted", 2, 1.0)
    assert result.answer == SUPPORTED_SENTENCE
    assert [c.verdict for c in result.final_claims] == ["supported"]
    assert result.config["repair"] == "auto"
    stored = get_run(kb_db, result.run_id)
    assert [(a["attempt_no"], a["trimmed_from"]) for a in stored["attempts"]] == [(1, None), (2, 1)]
    assert [c["attempt_no"] for c in stored["claims"]] == [1, 1, 2]
    assert made_how(second.record) == "attempt 1 without its 1 unsupported sentence"


@pytest.mark.slow
def test_four_slots_regenerate_and_repair_drop_trims_there_too(fake, settings, kb_db):
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=4))
    assert len(generations(fake)) == 2 and "trim" not in [e.kind for e in events]
    assert result.attempts[1].record.strict and result.attempts[1].record.trimmed_from is None
    fake.requests.clear()
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    events, result = ask(
        kb_db, dataclasses.replace(settings, ollama_slots_per_host=4, repair="drop", cache_enabled=False)
    )
    assert len(generations(fake)) == 1 and result.answer == SUPPORTED_SENTENCE


def test_repair_regenerate_regenerates_on_one_slot(fake, settings, kb_db):
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1, repair="regenerate"))
    assert len(generations(fake)) == 2 and "trim" not in [e.kind for e in events]
    assert result.final_attempt == 2 and result.attempts[1].record.strict


def test_retries_off_repair_nothing_on_one_slot(fake, settings, kb_db):
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    off = dataclasses.replace(settings, ollama_slots_per_host=1, max_retries=0, when_unverified="show_best")
    events, result = ask(kb_db, off)
    assert "trim" not in [e.kind for e in events] and len(result.attempts) == 1
    assert result.answer == INVENTED and result.status == "flagged"


def test_a_run_with_nothing_to_keep_regenerates_on_one_slot(fake, settings, kb_db):
    fake.enqueue(INVENTED_SENTENCE, model="llama3.2", match=is_generation)
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1))
    assert len(generations(fake)) == 2 and "trim" not in [e.kind for e in events]
    retry = next(e for e in events if e.kind == "retry")
    assert retry.attempt == 2


@pytest.mark.slow
def test_the_chat_shows_the_trimmed_attempt_and_show_names_it(fake, settings, kb_db, capsys):
    from pages.views.answer import LiveAnswer

    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1))
    live = LiveAnswer()
    for event in events:
        live.take(event)
    shown = live.markdown()
    assert "attempt 1 without its unsupported sentences" in shown
    assert "21 million" in shown and "ICML" not in shown
    live.take(Token(attempt=3, delta="Again."))
    assert "without its unsupported" not in live.markdown()
    assert main(["show", str(result.run_id)]) == 0
    out = capsys.readouterr().out
    assert "attempt 2 (attempt 1 without its 1 unsupported sentence): accepted" in out
    assert "dropped: The RAG paper won the best paper award at ICML 2019 [1]." in out


@pytest.mark.slow
def test_the_drilldown_names_the_trimmed_attempt_and_its_dropped_sentence(fake, settings, kb_db):
    from test_app import open_runs_page

    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    _, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1))
    at = open_runs_page(str(result.run_id))
    labels = [e.label for e in at.expander]
    assert any(label.startswith("Attempt 2 (attempt 1 without its 1 unsupported sentence)") for label in labels)
    assert any(label.startswith("Attempt 1 · faithfulness") for label in labels)
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Dropped, as no source supports them: The RAG paper won the best paper") for c in captions)
