"""Typed events: every kind the engine emits is a class, and the Chat page and `ask` each say what they do with
every one of them (they dispatch on the class, never on a name). And the event stream the steps emit into: the work
pauses at each event until the listener asks for the next, as a generator would."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from io import StringIO

import pytest
from rich.console import Console

from pages.views import answer as answer_view
from pipeline.answering import events as ev
from pipeline.answering.budget import Cut
from pipeline.answering.event_stream import Stopped, pulled
from pipeline.cli.output import follow_answer
from pipeline.verification.faithfulness import CheckedClaim, Passage

PASSAGE = Passage(1, 7, "rag.md", "The index held 21 million passages.", 0.8)
CLAIM = CheckedClaim(1, "The index held 21 million passages.", "supported", "precheck", passage=PASSAGE)
RESULT = ev.AnswerResult(kind="chat", question="q", status="accepted", started_at=datetime.now(timezone.utc))

# One event of every class, as the engine emits it.
SAMPLES = {
    ev.StandaloneQuestion: ev.StandaloneQuestion(
        question="And it?",
        standalone="And RAG?",
        method="model",
        why="it",
        turns=1,
        dropped=0,
        skipped=0,
        history_tokens=20,
    ),
    ev.Retrieved: ev.Retrieved(round=1, query="q", passages=[PASSAGE]),
    ev.Planned: ev.Planned(schedule="overlapped", why="4 slots"),
    ev.Graded: ev.Graded(round=1, relevant=True, reason="it says so", kept=frozenset({1})),
    ev.Budgeted: ev.Budgeted(budget=600, cuts=[Cut(1, "rag.md", 10, 10, "whole")]),
    ev.Token: ev.Token(attempt=1, delta="The index"),
    ev.Generated: ev.Generated(attempt=1, strict=False, answer="The index held 21 million passages. [1]"),
    ev.SentenceChecked: ev.SentenceChecked(attempt=1, index=0, span=(0, 36), cited=[1], claims=[CLAIM], error=None),
    ev.Discarded: ev.Discarded(attempt=1),
    ev.ClaimsUnextracted: ev.ClaimsUnextracted(attempt=1, error="unreadable reply"),
    ev.Scored: ev.Scored(attempt=1, faithfulness=1.0, status="accepted"),
    ev.OnTopicChecked: ev.OnTopicChecked(
        attempt=1, on_topic=True, score=0.9, method="embedding", reason="close", missing_terms=[]
    ),
    ev.Trimmed: ev.Trimmed(attempt=2, from_attempt=1, dropped=["Made up."], answer="The index.", claims=[CLAIM]),
    ev.Retrying: ev.Retrying(attempt=2, failed_claims=["x"], off_topic=False, missing_terms=[], gap=""),
    ev.Rewritten: ev.Rewritten(query="RAG index size"),
    ev.VerdictSettled: ev.VerdictSettled(attempt=1, claim=CLAIM),
    ev.Decided: ev.Decided(status="accepted"),
    ev.Abstained: ev.Abstained(reason="not covered"),
    ev.RunFailed: ev.RunFailed(error="the model server is down", fix="start it"),
    ev.Finished: ev.Finished(result=RESULT),
}


def event_classes(cls=ev.Event) -> set[type]:
    return {c for sub in cls.__subclasses__() for c in (sub, *event_classes(sub))}


def test_every_event_class_has_a_sample_and_a_name_of_its_own():
    assert set(SAMPLES) == event_classes(), "add a sample of the new event class to SAMPLES"
    names = [cls.kind for cls in event_classes()]
    assert len(set(names)) == len(names)


class Steps:
    """The Chat page's steps box (st.status), as follow_live uses it."""

    def __init__(self):
        self.lines: list[str] = []

    def write(self, line):
        self.lines.append(line)

    def update(self, **_):
        pass


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda cls: cls.__name__)
def test_the_chat_page_handles_every_event_class(cls):
    steps = Steps()
    result = answer_view.follow_live(iter([SAMPLES[ev.Token], SAMPLES[cls], SAMPLES[ev.Finished]]), steps)
    assert result is RESULT
    if cls not in (ev.Token, ev.Finished):  # every other event is a step, by its message
        assert steps.lines == [answer_view.step_line(SAMPLES[cls])]


@pytest.mark.parametrize("streaming", [False, True], ids=["alone", "while the answer streams"])
@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda cls: cls.__name__)
def test_ask_prints_every_event_class(cls, streaming):
    err = Console(file=StringIO(), width=200)
    before = [SAMPLES[ev.Token]] if streaming else []
    result = follow_answer(iter([*before, SAMPLES[cls], SAMPLES[ev.Finished]]), err)
    assert result is RESULT
    shown = err.file.getvalue()
    if cls is ev.SentenceChecked:
        assert "claim 1: supported" in shown
    elif cls not in (ev.Token, ev.Finished):
        assert f"· {SAMPLES[cls].message}" in shown


def test_a_listener_that_meets_an_event_class_it_does_not_name_says_so():
    class Unknown:  # not an Event subclass: one defined here would stay among Event.__subclasses__()
        kind, message = "unknown", "new"

    with pytest.raises(ev.UnhandledEvent, match="does not handle Unknown events"):
        follow_answer(iter([Unknown()]), Console(file=StringIO()))
    with pytest.raises(ev.UnhandledEvent, match="the Chat page does not handle Unknown"):
        answer_view.follow_live(iter([Unknown()]), Steps())


# -- the stream the steps emit into ------------------------------------------------------------------------------


def test_the_work_goes_on_only_while_the_listener_waits_for_an_event():
    done: list[int] = []

    def work(emit):
        for n in range(3):
            done.append(n)
            emit(ev.Decided(status=str(n)))

    stream = pulled(work)
    assert done == []  # nothing runs before the first event is asked for
    first = next(stream)
    assert first.status == "0" and done == [0]
    threading.Event().wait(0.05)  # were the work running on, it would be past its next emit by now
    assert done == [0]
    assert [e.status for e in stream] == ["1", "2"] and done == [0, 1, 2]


def test_a_listener_that_stops_listening_stops_the_work_at_its_next_event_and_its_clean_up_runs():
    seen: list[str] = []

    def work(emit):
        try:
            emit(ev.Decided(status="first"))
            seen.append("went on")
        except GeneratorExit as exc:
            seen.append(type(exc).__name__)
            raise
        finally:
            seen.append("cleaned up")

    stream = pulled(work)
    next(stream)
    stream.close()
    assert seen == ["Stopped", "cleaned up"]
    assert issubclass(Stopped, GeneratorExit)  # tracing's "stopped before it finished" reads it as a close


def test_an_error_in_the_work_is_raised_to_the_listener_after_the_events_before_it():
    def work(emit):
        emit(ev.Decided(status="first"))
        raise ValueError("broken step")

    stream = pulled(work)
    assert next(stream).status == "first"
    with pytest.raises(ValueError, match="broken step"):
        next(stream)
