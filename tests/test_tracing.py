"""Run traces through LlamaIndex's instrumentation: our steps and LlamaIndex's own spans in one tree."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from llama_index.core.instrumentation import get_dispatcher

from pipeline import tracing

library = get_dispatcher("tests.library")


class Library:
    """Stands for a LlamaIndex class whose methods are spans (as Ollama.chat and BaseRetriever.retrieve are)."""

    model = "llama3.2"

    @library.span
    def chat(self, text: str) -> str:
        return text.upper()


def by_name(spans):
    return {s.name: s for s in spans}


def test_steps_and_library_spans_form_one_tree():
    with tracing.recording("question", kind="chat") as trace:
        with tracing.step("retrieve", top_k=5):
            pass
        with tracing.step("verify claim 1") as verify_id:
            assert tracing.current_span_id() == verify_id
            Library().chat("hi")
            tracing.annotate(verdict="supported")
    spans = by_name(trace.records())
    assert set(spans) == {"question", "retrieve", "verify claim 1", "Library.chat"}
    root = spans["question"]
    assert root.parent_id is None and root.attributes == {"kind": "chat"}
    assert spans["retrieve"].parent_id == root.span_id and spans["retrieve"].attributes == {"top_k": 5}
    assert spans["verify claim 1"].attributes == {"verdict": "supported"}
    assert spans["Library.chat"].parent_id == spans["verify claim 1"].span_id
    assert spans["Library.chat"].attributes == {"model": "llama3.2"}
    assert all(s.latency_ms is not None and s.error is None for s in spans.values())


def test_spans_outside_a_recording_are_ignored_and_nothing_is_kept():
    Library().chat("outside")
    with tracing.step("lonely"):
        assert tracing.current_span_id() is None
    assert tracing._handler._trace_of == {} and tracing._handler._roots == {}


def test_a_failing_step_is_kept_with_its_error():
    with pytest.raises(ValueError):
        with tracing.recording("question") as trace:
            with tracing.step("generate"):
                raise ValueError("model fell over")
    spans = by_name(trace.records())
    assert spans["generate"].error == "ValueError: model fell over"
    assert spans["question"].error == "ValueError: model fell over"


def test_work_in_a_thread_pool_joins_the_trace():
    with tracing.recording("question") as trace:
        with tracing.step("verify") as verify_id:
            with ThreadPoolExecutor(max_workers=3) as pool:
                futures = [tracing.submit(pool, _verify_one, n) for n in range(1, 4)]
                assert [f.result() for f in futures] == ["CLAIM 1", "CLAIM 2", "CLAIM 3"]
    spans = trace.records()
    claims = [s for s in spans if s.name.startswith("claim ")]
    assert len(claims) == 3 and {s.parent_id for s in claims} == {verify_id}
    calls = [s for s in spans if s.name == "Library.chat"]
    assert {c.parent_id for c in calls} == {s.span_id for s in claims}


def _verify_one(n: int) -> str:
    with tracing.step(f"claim {n}"):
        return Library().chat(f"claim {n}")


def test_a_nested_recording_is_a_step_of_the_outer_trace():
    with tracing.recording("evaluate item") as outer:
        with tracing.recording("question") as inner:
            assert inner is outer
    spans = by_name(outer.records())
    assert spans["question"].parent_id == spans["evaluate item"].span_id


def test_a_generator_closed_part_way_leaves_its_span_marked_and_the_context_clean():
    def steps():
        with tracing.recording("question"):
            with tracing.step("generate"):
                yield 1
                yield 2

    stream = steps()
    assert next(stream) == 1
    stream.close()
    assert tracing.current_span_id() is None
    assert tracing._handler._roots == {}


def test_traces_export_over_opentelemetry_with_the_same_tree():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from pipeline.trace_export import export_traces

    exporter = InMemorySpanExporter()
    assert export_traces("", exporter) is True
    assert export_traces("", exporter) is False
    try:
        with tracing.recording("question", kind="chat"):
            with tracing.step("verify claim 1"):
                Library().chat("hi")
        exported = {s.name: s for s in exporter.get_finished_spans()}
        assert {"question", "verify claim 1"} <= set(exported)
        assert exported["verify claim 1"].parent.span_id == exported["question"].context.span_id
        assert exported["question"].attributes["openinference.span.kind"] == "CHAIN"
    finally:
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().uninstrument()
        import pipeline.trace_export as module

        module._exporting.clear()


def test_the_tree_orders_spans_depth_first():
    with tracing.recording("question") as trace:
        with tracing.step("retrieve"):
            pass
        with tracing.step("verify"):
            with tracing.step("claim 1"):
                pass
        with tracing.step("decide"):
            pass
    assert [(depth, s.name) for depth, s in tracing.tree(trace.records())] == [
        (0, "question"),
        (1, "retrieve"),
        (1, "verify"),
        (2, "claim 1"),
        (1, "decide"),
    ]


def test_a_model_call_is_recorded_on_the_model_span_its_request_opened_under_the_step(settings, db):
    from pipeline.models.llm import LLM

    llm = LLM(settings, db)
    with tracing.recording("question") as trace:
        with tracing.step("generate") as generate_id:
            llm.chat("generate", "llama3.2", [{"role": "user", "content": "Question: hi\n\nContext:\n[1] a.md\nhi"}])
    llm.chat("generate", "llama3.2", [{"role": "user", "content": "outside any run"}])
    inside, outside = llm.take_calls()
    chat_span = next(s for s in trace.records() if s.parent_id == generate_id)
    assert chat_span.name == "Ollama.chat" and chat_span.attributes["model"] == "llama3.2"
    assert inside.span_id == chat_span.span_id and outside.span_id is None  # the innermost span, not the step


RAG_QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"


def test_a_stored_run_has_its_trace_and_every_call_sits_on_a_step_of_it(fake, settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result
    from pipeline.history.runs import load_run

    fake.enqueue("The RAG index held 21 million passages [1].", match=lambda body: not body.get("format"))

    engine = VerifiedQueryEngine(settings=settings, db=kb_db)
    result = final_result(engine.stream(RAG_QUESTION))
    stored = load_run(kb_db, result.run_id)
    rows = [(depth, span.name) for depth, span in tracing.tree(stored.spans)]
    names = [name for _, name in rows]
    assert rows[0] == (0, "question")
    assert {"retrieve", "grade context", "attempt 1", "generate", "verify sentences"} <= set(names)
    assert (1, "attempt 1") in rows and (2, "generate") in rows and (2, "check sentence 1") in rows
    # the supported sentence is checked as it stands (claim_granularity auto): one verifier call, no extraction
    assert (3, "verify sentences") in rows and (4, "verify sentences against their documents") in rows
    assert "extract claims" not in names
    assert "DuckDBRetriever.retrieve" in names and "Ollama.chat" in names
    span_ids = {s.span_id for s in stored.spans}
    assert stored.calls and all(c["span_id"] in span_ids for c in stored.calls)
    by_id = {s.span_id: s for s in stored.spans}
    generate_call = next(c for c in stored.calls if c["stage"] == "generate")
    answered_in = by_id[generate_call["span_id"]]  # the streamed chat's own span, under the generate step
    assert answered_in.name == "Ollama.stream_chat" and by_id[answered_in.parent_id].name == "generate"
    assert all(s.latency_ms is not None and s.latency_ms >= 0 for s in stored.spans)


@pytest.mark.slow
def test_cached_calls_are_recorded_with_their_text_and_span(settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result
    from pipeline.history.runs import load_run

    engine = VerifiedQueryEngine(settings=settings, db=kb_db)
    final_result(engine.stream(RAG_QUESTION))
    again = load_run(kb_db, final_result(engine.stream(RAG_QUESTION)).run_id)
    cached = [c for c in again.calls if c["cache_hit"]]
    assert cached and all(c["prompt_text"] and c["completion_text"] and c["span_id"] for c in cached)


@pytest.mark.slow
def test_an_evaluation_item_traces_its_question_and_every_metric_and_its_calls_name_the_evaluation(settings, kb_db):
    from pipeline.evaluation.dataset import Dataset, GoldenItem
    from pipeline.evaluation.registry import metric_names
    from pipeline.evaluation.runner import run_evaluation
    from pipeline.history.evaluations import run_ids_of
    from pipeline.history.runs import load_run

    item = GoldenItem(id="rag-size", question=RAG_QUESTION, reference="21 million passages", tags=["numeric"])
    outcome = run_evaluation(settings, kb_db, Dataset("t.jsonl", [item], [], "h"), "traced", concurrency=1)
    stored = load_run(kb_db, run_ids_of(kb_db, outcome.eval_run_id)[0])
    rows = [(depth, span.name) for depth, span in tracing.tree(stored.spans)]
    assert rows[0] == (0, "evaluate item") and (1, "question") in rows
    assert {(1, f"metric {name}") for name in metric_names()} <= set(rows)
    assert {c["origin"] for c in stored.calls} == {"evaluation"}
    assert {c["eval_run_id"] for c in stored.calls} == {outcome.eval_run_id}
    span_ids = {s.span_id for s in stored.spans}
    assert all(c["span_id"] in span_ids for c in stored.calls)


def test_setting_an_otlp_endpoint_turns_the_export_on(settings, monkeypatch):
    import dataclasses

    import pipeline.session as session

    seen = []
    monkeypatch.setattr(session, "export_traces", seen.append)
    session.open_workbench(settings)
    assert seen == []
    session.open_workbench(dataclasses.replace(settings, otlp_endpoint="http://127.0.0.1:6006"))
    assert seen == ["http://127.0.0.1:6006"]
