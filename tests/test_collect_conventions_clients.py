"""Traces in from real instrumentations other than OpenInference, each exporting with the OpenTelemetry SDK's
OTLP/HTTP exporter to `python -m pipeline collect` (a process of its own, verifying against the fake Ollama):
- a LlamaIndex query engine instrumented by OpenLLMetry (opentelemetry-instrumentation-llamaindex);
- an app calling an OpenAI-compatible server with the `openai` client, instrumented by OpenTelemetry's
  opentelemetry-instrumentation-openai-v2, whose retrieval is a vector-store query span the app writes itself in
  OpenTelemetry's database conventions;
- a LlamaIndex query engine instrumented by OpenInference whose Ollama client is instrumented by OpenLLMetry
  (opentelemetry-instrumentation-ollama): one trace, two conventions.
Each stored run is checked against what the application did: its questions, answers, contexts and model calls."""

from __future__ import annotations

import json

import pytest
from fake_ollama import FakeOllama
from fake_openai import FakeOpenAI
from otlp_traces import BRIDGE, TOWER
from test_collect_clients import (
    answer_traced,
    assert_run_is_what_the_app_did,
    collector,
    exporting,
    traced,
    wait_for_runs,
)

QUESTIONS = ["How tall is the Eiffel Tower?", "When did the Golden Gate Bridge open?"]

pytestmark = pytest.mark.slow  # real instrumented apps, each started against the fake: the whole tier's slowest


def query_engine(app_fake):
    from llama_index.core import Document, PromptTemplate, VectorStoreIndex
    from llama_index.embeddings.ollama import OllamaEmbedding
    from llama_index.llms.ollama import Ollama

    documents = [
        Document(text=TOWER, metadata={"file_name": "tower.md"}),
        Document(text=BRIDGE, metadata={"file_name": "bridge.md"}),
    ]
    embed = OllamaEmbedding(model_name="nomic-embed-text", base_url=app_fake.url)
    llm = Ollama(model="llama3.2", base_url=app_fake.url, request_timeout=30, context_window=4096)
    template = PromptTemplate("Answer from the context only.\nContext:\n{context_str}\nQuestion: {query_str}\nAnswer:")
    return VectorStoreIndex.from_documents(documents, embed_model=embed).as_query_engine(
        llm=llm, similarity_top_k=1, text_qa_template=template
    )


class OpenLLMetryLlamaIndex:
    """OpenLLMetry's LlamaIndex instrumentor; its uninstrument leaves its handlers in LlamaIndex's dispatcher, so
    they are taken out here (later tests in this process would otherwise trace into a closed provider)."""

    def __init__(self):
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

        self.instrumentor = LlamaIndexInstrumentor()

    def instrument(self, tracer_provider):
        self.instrumentor.instrument(tracer_provider=tracer_provider)

    def uninstrument(self):
        from llama_index.core.instrumentation import get_dispatcher
        from opentelemetry.instrumentation.llamaindex.dispatcher_wrapper import (
            OpenLLMetryEventHandler,
            OpenLLMetrySpanHandler,
        )

        self.instrumentor.uninstrument()
        dispatcher = get_dispatcher()
        dispatcher.span_handlers[:] = [h for h in dispatcher.span_handlers if not isinstance(h, OpenLLMetrySpanHandler)]
        dispatcher.event_handlers[:] = [
            h for h in dispatcher.event_handlers if not isinstance(h, OpenLLMetryEventHandler)
        ]


def test_an_openllmetry_instrumented_llamaindex_app_is_verified(fake, settings, db):
    pytest.importorskip("opentelemetry.instrumentation.llamaindex")
    with FakeOllama() as app_fake, collector(settings) as (_, port):
        engine = query_engine(app_fake)
        responses, app_calls = answer_traced(
            app_fake, port, OpenLLMetryLlamaIndex(), "openllmetry-app", engine.query, QUESTIONS
        )
        state = wait_for_runs(port, len(QUESTIONS))
    runs = traced(db, "openllmetry-app")
    assert [r.result.question for r in runs] == sorted(QUESTIONS)
    for stored in runs:
        response = responses[stored.result.question]
        contexts = [n.node.get_content() for n in response.source_nodes]
        assert_run_is_what_the_app_did(stored, stored.result.question, str(response).strip(), contexts)
        assert [p.source for p in stored.result.passages] == [
            n.node.metadata["file_name"] for n in response.source_nodes
        ]
        assert [round(p.score, 6) for p in stored.result.passages] == [round(n.score, 6) for n in response.source_nodes]
        assert stored.result.trace_convention == "openllmetry"
    app_side = [c for r in runs for c in r.calls if c["origin"] == "traced"]
    assert len(app_side) == app_calls == len(QUESTIONS)  # LlamaIndex's predict around its chat: one call each
    assert {c["model"] for c in app_side} == {"llama3.2"} and all(c["prompt_tokens"] for c in app_side)
    assert state["worker"]["evaluated"] == len(QUESTIONS)


LIBRARY = [
    {"id": "tower.md", "text": TOWER, "answer": "The Eiffel Tower is 330 metres tall."},
    {"id": "bridge.md", "text": BRIDGE, "answer": "The Golden Gate Bridge opened in 1937."},
]


def openai_app(base_url: str):
    """An application of its own: a keyword search it records as a vector-store query span (OpenTelemetry's
    database conventions, results as db.query.result events), then a chat completion with the openai client."""
    import openai
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    client = openai.OpenAI(base_url=base_url, api_key="not-needed")
    tracer = trace.get_tracer("support-bot")

    def search(question: str) -> list[dict]:
        words = set(question.lower().split())
        best = max(LIBRARY, key=lambda d: len(words & set(d["text"].lower().split())))
        attributes = {
            "db.system.name": "chroma",
            "db.operation.name": "query",
            "db.collection.name": "landmarks",
            "db.query.text": question,
        }
        with tracer.start_as_current_span("query landmarks", kind=SpanKind.CLIENT, attributes=attributes) as span:
            span.add_event(
                "db.query.result",
                {
                    "db.query.result.id": best["id"],
                    "db.query.result.document": best["text"],
                    "db.query.result.score": 0.75,
                    "db.query.result.metadata": json.dumps({"source": best["id"]}),
                },
            )
        return [best]

    def ask(question: str) -> tuple[str, list[dict]]:
        with tracer.start_as_current_span("answer question"):
            found = search(question)
            context = "\n".join(d["text"] for d in found)
            reply = client.chat.completions.create(
                model="llama3.2",
                messages=[
                    {"role": "system", "content": "Answer from the context only."},
                    {"role": "user", "content": f"Context:\n{context}\nQuestion: {question}"},
                ],
            )
            return reply.choices[0].message.content, found

    return ask


def test_an_openai_client_app_with_its_own_vector_store_span_is_verified(fake, settings, db, monkeypatch):
    pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    from opentelemetry import trace
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")  # messages on the span
    with FakeOpenAI() as model_server, collector(settings) as (_, port):
        for document in LIBRARY:  # the model server's replies, in the order the questions are asked
            model_server.enqueue(document["answer"])
        ask = openai_app(model_server.base_url)
        instrumentor = OpenAIInstrumentor()
        original = trace._TRACER_PROVIDER  # the app's own spans go to the same provider as the client's

        class Both:
            def instrument(self, tracer_provider):
                trace._TRACER_PROVIDER = tracer_provider
                instrumentor.instrument(tracer_provider=tracer_provider)

            def uninstrument(self):
                instrumentor.uninstrument()
                trace._TRACER_PROVIDER = original

        with exporting(Both(), port, "support-bot"):
            answers = {question: ask(question) for question in QUESTIONS}
        wait_for_runs(port, len(QUESTIONS))
    runs = traced(db, "support-bot")
    assert [r.result.question for r in runs] == sorted(QUESTIONS)
    for stored in runs:
        answer, found = answers[stored.result.question]
        assert_run_is_what_the_app_did(stored, stored.result.question, answer, [d["text"] for d in found])
        assert [(p.source, p.score) for p in stored.result.passages] == [(d["id"], 0.75) for d in found]
        assert stored.result.trace_convention == "otel_genai"
        (call,) = [c for c in stored.calls if c["origin"] == "traced"]
        assert (call["model"], call["backend"]) == ("llama3.2", "openai") and call["completion_text"] == answer
        assert call["prompt_tokens"] > 0 and stored.result.question in call["prompt_text"]
    assert len(model_server.chat_requests()) == len(QUESTIONS)


def test_an_openinference_app_whose_model_client_openllmetry_instruments_is_read_span_by_span(fake, settings, db):
    pytest.importorskip("opentelemetry.instrumentation.ollama")
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.instrumentation.ollama import OllamaInstrumentor

    class Both:
        def __init__(self):
            self.app, self.client = LlamaIndexInstrumentor(), OllamaInstrumentor()

        def instrument(self, tracer_provider):
            self.app.instrument(tracer_provider=tracer_provider)
            self.client.instrument(tracer_provider=tracer_provider)

        def uninstrument(self):
            self.client.uninstrument()
            self.app.uninstrument()

    with FakeOllama() as app_fake, collector(settings) as (_, port):
        engine = query_engine(app_fake)
        responses, app_calls = answer_traced(app_fake, port, Both(), "mixed-app", engine.query, QUESTIONS)
    runs = traced(db, "mixed-app")
    assert [r.result.question for r in runs] == sorted(QUESTIONS)
    for stored in runs:
        response = responses[stored.result.question]
        contexts = [n.node.get_content() for n in response.source_nodes]
        assert_run_is_what_the_app_did(stored, stored.result.question, str(response).strip(), contexts)
        assert stored.result.trace_convention == "openinference+otel_genai"
        (call,) = [c for c in stored.calls if c["origin"] == "traced"]  # the client's span inside the LLM span
        client_spans = [s for s in stored.spans if s.span_id == call["span_id"]]
        assert client_spans and client_spans[0].attributes["convention"] == "otel_genai"
    assert app_calls == len(QUESTIONS)
