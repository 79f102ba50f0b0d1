"""The trace explorer (issue 51): a model call attaches to the innermost span that made it, a retriever span shows
its documents with text, score and source, and spans are searched by name, kind, duration and failure, within a
run and across runs; for our own runs and received traces alike."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from otlp_traces import TOWER, protobuf_body, rag_trace, span

from pipeline.collect.assemble import assemble
from pipeline.collect.otlp import PROTOBUF, decode
from pipeline.errors import WorkbenchError
from pipeline.history.span_search import SpanQuery, search_spans, span_kind
from pipeline.history.trace_view import calls_below, shown_attributes, span_documents, trace_rows
from pipeline.tracing import DOCUMENTS, SPAN_KIND, innermost_span, recording, step
from store.records import SpanRecord
from store.spans import insert_spans

QUESTION = "How many passages did the RAG index hold?"
ANSWER = "The RAG index held 21 million passages [1]."
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def engine_run(kb_db, settings, fake):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result
    from pipeline.history.runs import load_run

    fake.enqueue(ANSWER, model="llama3.2", match=lambda body: not body.get("format"))
    run_id = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION)).run_id
    return load_run(kb_db, run_id)


def by_id(stored) -> dict:
    return {s.span_id: s for s in stored.spans}


@pytest.mark.slow
def test_each_model_call_of_a_run_attaches_to_the_innermost_span_that_made_it(engine_run):
    spans = by_id(engine_run)
    made_by = {}
    for call in engine_run.calls:
        if not call["cache_hit"]:  # a replay reached no model: it stays on the step that asked
            made_by[call["stage"]] = spans[call["span_id"]]
    generate = made_by["generate"]
    assert generate.name == "Ollama.stream_chat" and spans[generate.parent_id].name == "generate"
    assert made_by["grade_context"].name == "Ollama.chat"
    assert spans[made_by["grade_context"].parent_id].name == "grade context"
    assert made_by["verify"].name == "Ollama.chat" and made_by["verify"].attributes["model"] == "bespoke-minicheck"
    assert made_by["embed_query"].name == "OllamaEmbedding._get_query_embedding"  # inside get_query_embedding
    assert {s.attributes.get(SPAN_KIND) for s in made_by.values()} >= {"llm", "embedding"}
    # the steps that asked made no call themselves; the tree counts the calls where they were made
    rows = trace_rows(engine_run.spans, engine_run.calls)
    step_row = next(r for r in rows if r.name == "generate")
    assert step_row.calls == 0 and calls_below(step_row, rows, engine_run.calls) == 1
    assert next(r for r in rows if r.span_id == generate.span_id).calls == 1


def test_innermost_span_takes_the_last_leaf_a_block_opened():
    found = []
    with recording("question") as trace:
        with step("generate"):
            with innermost_span(found.append):
                with step("Ollama.chat"):  # a failed attempt
                    pass
                with step("Ollama.chat") as retried:
                    with step("Ollama._chat") as inner:
                        pass
            with innermost_span(found.append):
                pass  # a cache hit: no span opened, nothing handed over
    assert found == [inner]
    assert {r.span_id for r in trace.records()} >= {retried, inner}


@pytest.mark.slow
def test_a_runs_retrieve_span_shows_its_documents_with_text_score_and_source(engine_run):
    rows = trace_rows(engine_run.spans, engine_run.calls)
    retrieve = next(r for r in rows if r.name == "retrieve")
    assert retrieve.kind == "retriever"
    documents = span_documents(retrieve, engine_run.retrievals)
    chunks = sorted(engine_run.retrievals, key=lambda r: r["rank"])
    assert [d.rank for d in documents] == [1, 2, 3, 4, 5]
    assert [(d.text, d.score, d.source) for d in documents] == [(c["text"], c["score"], c["source"]) for c in chunks]
    assert "21 million passages" in documents[0].text and documents[0].source.endswith("rag.md")
    others = [r for r in rows if r.name != "retrieve"]
    assert all(span_documents(r, engine_run.retrievals) == [] for r in others)


def test_a_received_retriever_span_keeps_its_documents_and_its_llm_span_its_call():
    request = assemble(decode(protobuf_body(rag_trace(QUESTION, ANSWER, [(TOWER, "tower.md", 0.8)])), PROTOBUF))
    rows = trace_rows(request.spans, [c.__dict__ for c in request.calls])
    retriever = next(r for r in rows if r.name == "VectorIndexRetriever.retrieve")
    assert retriever.kind == "retriever" and retriever.attributes["documents"] == 1
    (document,) = span_documents(retriever, [])
    assert (document.rank, document.text, document.score, document.source) == (1, TOWER, 0.8, "tower.md")
    assert DOCUMENTS in retriever.attributes and SPAN_KIND in retriever.attributes
    assert DOCUMENTS not in shown_attributes(retriever) and SPAN_KIND not in shown_attributes(retriever)
    llm = next(r for r in rows if r.name == "Ollama.chat")
    assert llm.kind == "llm" and llm.calls == 1 and request.calls[0].completion_text == ANSWER


def test_a_received_model_call_attaches_to_the_innermost_llm_span():
    trace_id = b"\x01" * 16
    outer = span(trace_id, "LLMChain", "LLM", {"llm.model_name": "m"}, start=1_000)
    inner = span(
        trace_id,
        "ChatOllama",
        "LLM",
        {"llm.model_name": "m", "llm.output_messages.0.message.content": "hi"},
        outer,
        start=2_000,
    )
    request = assemble(decode(protobuf_body([outer, inner]), PROTOBUF))
    (call,) = request.calls
    assert call.span_id == inner.span_id.hex() and call.completion_text == "hi"


def stored_span(span_id, name, ms, parent=None, error=None, attributes=None, at=0) -> SpanRecord:
    return SpanRecord(span_id, parent, name, T0 + timedelta(milliseconds=at), ms, error, attributes or {})


@pytest.fixture
def three_runs(db):
    runs = {
        1: [
            stored_span("q1", "question", 1800.0),
            stored_span("r1", "retrieve", 1200.0, "q1", attributes={SPAN_KIND: "retriever"}),
            stored_span("c1", "Ollama.chat", 300.0, "q1", attributes={SPAN_KIND: "llm"}),
        ],
        2: [
            stored_span("q2", "question", 600.0),
            stored_span("r2", "retrieve", 400.0, "q2", attributes={SPAN_KIND: "retriever"}),
            stored_span("c2", "Ollama.chat", 90.0, "q2", error="TimeoutError: slow", attributes={SPAN_KIND: "llm"}),
        ],
        3: [  # stored before spans had a kind: read from the name, or from the convention's kind
            stored_span("q3", "question", 2500.0),
            stored_span("r3", "retrieve", 1500.0, "q3"),
            stored_span("c3", "OpenAILike.stream_chat", 50.0, "q3", error="ReadError"),
            stored_span("x3", "VectorIndexRetriever.retrieve", 1100.0, "q3", attributes={"convention": "x"}),
            stored_span("g3", "chat llama3.2", 70.0, "q3", attributes={"convention": "otel_genai", "kind": "chat"}),
        ],
    }
    with db.transaction() as cur:
        for run_id, spans in runs.items():
            insert_spans(cur, spans, run_id)
        insert_spans(cur, [stored_span("e1", "retrieve", 5000.0)], None, eval_run_id=7)  # no run: not listed
    return db


def found(db, **conditions) -> list[tuple[int, str]]:
    return [(s["run_id"], s["span_id"]) for s in search_spans(db, SpanQuery(**conditions)).spans]


def test_runs_whose_retrieval_took_over_a_second_across_runs(three_runs):
    hits = search_spans(three_runs, SpanQuery(kind="retriever", min_ms=1000))
    assert [(s["run_id"], s["span_id"]) for s in hits.spans] == [(3, "r3"), (1, "r1")]  # the slowest first
    assert (hits.total, hits.runs) == (2, 2)
    assert [s["kind"] for s in hits.spans] == ["retriever", "retriever"]


def test_llm_spans_with_errors_across_runs(three_runs):
    assert found(three_runs, kind="llm", errors=True) == [(2, "c2"), (3, "c3")]
    assert found(three_runs, kind="llm") == [(1, "c1"), (2, "c2"), (3, "g3"), (3, "c3")]


def test_spans_by_part_of_a_name_duration_bounds_and_within_one_run(three_runs):
    assert found(three_runs, name="RETRIEVE") == [(3, "r3"), (1, "r1"), (3, "x3"), (2, "r2")]
    assert found(three_runs, name="retrieve", run_id=3) == [(3, "r3"), (3, "x3")]
    assert found(three_runs, min_ms=90, max_ms=400) == [(2, "r2"), (1, "c1"), (2, "c2")]
    assert found(three_runs, name="chat", errors=True, limit=1) == [(2, "c2")]
    assert search_spans(three_runs, SpanQuery(name="chat", errors=True, limit=1)).total == 2
    assert found(three_runs, name="no such span") == []


def test_a_received_span_without_a_kind_is_kinded_by_its_convention_not_its_name(three_runs):
    assert ("other") == span_kind("VectorIndexRetriever.retrieve", {"convention": "x"})
    assert (3, "x3") not in found(three_runs, kind="retriever")
    assert span_kind("chat llama3.2", {"convention": "otel_genai", "kind": "chat"}) == "llm"
    assert span_kind("OpenAILike.stream_chat", {}) == "llm" and span_kind("question", {}) == "other"


def test_a_query_that_cannot_be_asked_says_what_to_fix():
    with pytest.raises(WorkbenchError, match="unknown span kind 'LLM': use one of llm, retriever"):
        SpanQuery(kind="LLM")
    with pytest.raises(WorkbenchError, match=r"shortest duration \(500 ms\) is longer than the longest \(100 ms\)"):
        SpanQuery(min_ms=500, max_ms=100)
    with pytest.raises(WorkbenchError, match="must be 0 ms or more"):
        SpanQuery(min_ms=-1)


def test_within_a_run_a_span_matches_as_the_store_would_match_it():
    query = SpanQuery(name="chat", kind="llm", min_ms=50, errors=True)
    assert query.matches("Ollama.chat", "llm", 90.0, "TimeoutError")
    assert not query.matches("Ollama.chat", "llm", 90.0, None)
    assert not query.matches("Ollama.chat", "llm", 10.0, "TimeoutError")
    assert not query.matches("Ollama.chat", "llm", None, "TimeoutError")  # a span that never closed has no duration
    assert not query.matches("retrieve", "retriever", 90.0, "x")
    assert SpanQuery().asks is False and SpanQuery(errors=True).asks is True
