"""Traces in, in any convention: OpenTelemetry's GenAI attributes and span events, OpenLLMetry's entities, a
vector store's query as a database span, a trace mixing conventions, and an in-house instrumentation read through
the collect_mapping setting; a trace no convention explains says why, with what was found."""

from __future__ import annotations

import json
import time

import pytest
from otlp_traces import BRIDGE, TOWER, new_trace_id, plain_span, protobuf_body, span
from starlette.testclient import TestClient

from pipeline.collect.assemble import assemble
from pipeline.collect.conventions.mapping import load_mappings
from pipeline.collect.otlp import PROTOBUF, decode
from pipeline.collect.receiver import create_app
from pipeline.collect.worker import OnlineWorker
from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.history.runs import load_result
from store.history import RunFilter, find_runs

QUESTION = "How tall is the Eiffel Tower?"
ANSWER = "The Eiffel Tower is 330 metres tall."


def read(spans, mappings=None):
    return assemble(decode(protobuf_body(spans, service="tower-app"), PROTOBUF), mappings)


def genai_chat(trace_id, parent, attributes, events=(), start=None):
    base = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "llama3.2", "gen_ai.provider.name": "ollama"}
    return plain_span(trace_id, "chat llama3.2", {**base, **attributes}, parent, start, 20, events)


def test_current_genai_messages_and_a_genai_retrieval_span_make_a_question_and_answer():
    t, t0 = new_trace_id(), time.time_ns()
    root = plain_span(t, "answer", {}, start=t0, duration_ms=50)
    documents = json.dumps([{"id": "tower.md", "score": 0.9, "content": TOWER}, {"id": "b", "score": 0.2}])
    retrieval = plain_span(
        t,
        "retrieval",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": QUESTION,
            "gen_ai.retrieval.documents": documents,
        },
        root,
        t0 + 1_000_000,
    )
    messages = [{"role": "user", "parts": [{"type": "text", "content": f"Context: {TOWER}\nQuestion: {QUESTION}"}]}]
    reply = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
    chat = genai_chat(
        t,
        root,
        {
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(reply),
            "gen_ai.usage.input_tokens": 40,
            "gen_ai.usage.output_tokens": 8,
        },
        start=t0 + 5_000_000,
    )
    request = read([root, retrieval, chat])
    assert (request.question, request.answer, request.not_evaluated) == (QUESTION, ANSWER, None)
    assert [(c.text, c.source, c.score) for c in request.contexts] == [(TOWER, "tower.md", 0.9)]  # no text: left out
    (call,) = request.calls
    assert (call.model, call.backend, call.prompt_tokens, call.completion_tokens) == ("llama3.2", "ollama", 40, 8)
    assert QUESTION in call.prompt_text and call.completion_text == ANSWER
    assert request.convention == "otel_genai" and request.model == "llama3.2"


@pytest.mark.parametrize(
    ("attributes", "events"),
    [
        (  # the older indexed attributes
            {
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": "Answer from the context.",
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": QUESTION,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": ANSWER,
                "gen_ai.usage.prompt_tokens": 12,
                "gen_ai.usage.completion_tokens": 8,
            },
            (),
        ),
        (  # OpenLIT's span events
            {"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 8},
            [
                ("gen_ai.content.prompt", {"gen_ai.prompt": QUESTION}),
                ("gen_ai.content.completion", {"gen_ai.completion": ANSWER}),
            ],
        ),
        (  # the message events, sent as span events
            {"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 8},
            [
                ("gen_ai.system.message", {"content": "Answer from the context."}),
                ("gen_ai.user.message", {"content": QUESTION}),
                ("gen_ai.choice", {"message": json.dumps({"role": "assistant", "content": ANSWER}), "index": 0}),
            ],
        ),
    ],
)
def test_older_genai_content_in_indexed_attributes_or_span_events_is_read(attributes, events):
    t = new_trace_id()
    (call,) = read([genai_chat(t, None, attributes, events)]).calls
    assert QUESTION in call.prompt_text and call.completion_text == ANSWER
    assert (call.prompt_tokens, call.completion_tokens) == (12, 8)


def vector_store_query(trace_id, parent, question, documents, start=None):
    """A vector-store query in OpenTelemetry's database conventions, its results as OpenLLMetry's vector-database
    instrumentations send them: db.query.result span events."""
    events = [
        (
            "db.query.result",
            {
                "db.query.result.id": source,
                "db.query.result.document": text,
                "db.query.result.score": score,
                "db.query.result.metadata": json.dumps({"source": source}),
            },
        )
        for text, source, score in documents
    ]
    attributes = {
        "db.system.name": "chroma",
        "db.operation.name": "query",
        "db.collection.name": "landmarks",
        "db.query.text": question,
    }
    return plain_span(trace_id, "query landmarks", attributes, parent, start, 3, events)


def test_a_vector_store_query_span_gives_the_contexts_and_the_last_model_call_the_answer():
    t, t0 = new_trace_id(), time.time_ns()
    root = plain_span(t, "POST /ask", {"http.route": "/ask"}, start=t0, duration_ms=50)
    query = vector_store_query(t, root, QUESTION, [(TOWER, "tower.md", 0.8), (BRIDGE, "bridge.md", 0.3)], t0 + 1000)
    chat = genai_chat(t, root, {"gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}])})
    request = read([root, query, chat])
    assert (request.question, request.answer, request.not_evaluated) == (QUESTION, ANSWER, None)
    assert [(c.text, c.source, c.score) for c in request.contexts] == [
        (TOWER, "tower.md", 0.8),
        (BRIDGE, "bridge.md", 0.3),
    ]
    kinds = {s.name: s.attributes.get("kind") for s in request.spans}
    assert kinds == {"POST /ask": None, "query landmarks": "chroma query", "chat llama3.2": "chat"}


def test_a_trace_mixing_conventions_is_read_span_by_span():
    """An OpenInference app whose model client is instrumented in OTel GenAI's conventions: the question, answer
    and documents from OpenInference's spans, the model call from the client's span inside its LLM span."""
    t, t0 = new_trace_id(), time.time_ns()
    root = span(t, "RetrieverQueryEngine.query", "CHAIN", {"input.value": QUESTION, "output.value": ANSWER}, start=t0)
    retriever = span(
        t,
        "VectorIndexRetriever.retrieve",
        "RETRIEVER",
        {"retrieval.documents.0.document.content": TOWER, "retrieval.documents.0.document.score": 0.7},
        root,
        t0 + 1000,
    )
    llm = span(t, "Ollama.chat", "LLM", {"llm.model_name": "llama3.2"}, root, t0 + 2000)
    client = genai_chat(
        t,
        llm,
        {
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
            "gen_ai.usage.output_tokens": 8,
        },
        start=t0 + 3000,
    )
    request = read([root, retriever, llm, client])
    assert (request.question, request.answer, [c.text for c in request.contexts]) == (QUESTION, ANSWER, [TOWER])
    (call,) = request.calls  # the client's span inside the LLM span: one call
    assert (call.span_id, call.completion_tokens) == (client.span_id.hex(), 8)
    assert request.convention == "openinference+otel_genai"
    conventions = {s.name: s.attributes["convention"] for s in request.spans}
    assert conventions["chat llama3.2"] == "otel_genai" and conventions["Ollama.chat"] == "openinference"


def in_house_trace(question=QUESTION, answer=ANSWER):
    """An in-house instrumentation: the app's own attribute names, its hits as JSON."""
    t, t0 = new_trace_id(), time.time_ns()
    root = plain_span(t, "handle_question", {"app.request": json.dumps({"user": {"question": question}})}, start=t0)
    hits = json.dumps([{"passage": TOWER, "relevance": 0.9, "doc_id": "tower.md"}])
    search = plain_span(t, "search", {"app.search.hits": hits}, root, t0 + 1000)
    reply = plain_span(t, "generate", {"app.reply": answer, "app.model": "llama3.2"}, root, t0 + 2000)
    return [root, search, reply]


def test_a_trace_of_an_unknown_shape_says_what_was_found():
    request = read(in_house_trace())
    assert request.not_evaluated == (
        "no span carries retrieved documents; spans seen: 3, kinds: unmarked 3 (no known convention); "
        "attributes that look like documents: search: app.search.hits"
    )
    assert request.convention is None and request.question is None


def test_documents_put_in_a_prompt_without_a_retrieval_span_are_named():
    t = new_trace_id()
    root = plain_span(t, "answer", {}, duration_ms=30)
    prompt = [{"role": "user", "content": f"Context:\n{TOWER}\n{BRIDGE}\n{TOWER}\nQuestion: {QUESTION}"}]
    chat = genai_chat(
        t,
        root,
        {"gen_ai.input.messages": json.dumps(prompt), "gen_ai.output.messages": json.dumps([{"content": ANSWER}])},
    )
    why = read([root, chat]).not_evaluated
    assert why.startswith("no span carries retrieved documents; spans seen: 2, kinds: unmarked 1, chat 1")
    assert "The application called llama3.2 with a prompt of 3" in why
    assert "its documents may be inside the prompt" in why and "collect_mapping" in why


def write_mapping(tmp_path, text: str) -> str:
    path = tmp_path / "mapping.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


MAPPING = """
[tower-app]
question = "app.request#user.question"
answer = "app.reply"
documents = "app.search.hits"

[tower-app.document]
text = "passage"
score = "relevance"
source = "doc_id"
"""


def test_the_mapping_turns_an_in_house_trace_into_a_verified_run(fake, monkeypatch, tmp_path, db):
    monkeypatch.setenv("WORKBENCH_COLLECT_MAPPING", write_mapping(tmp_path, MAPPING))
    settings = load_settings()
    request = read(in_house_trace(), load_mappings(settings.collect_mapping))
    assert (request.question, request.answer, request.not_evaluated) == (QUESTION, ANSWER, None)
    assert [(c.text, c.source, c.score) for c in request.contexts] == [(TOWER, "tower.md", 0.9)]
    client = TestClient(create_app(db, 1_000_000))
    body = protobuf_body(in_house_trace(), service="tower-app")
    assert client.post("/v1/traces", content=body, headers={"content-type": PROTOBUF}).status_code == 200
    assert OnlineWorker(settings, db, settle_s=0).run_once() == 1
    (row,) = find_runs(db, RunFilter(kinds=["traced"])).rows
    run = load_result(db, row["id"])
    assert (run.question, run.answer, run.trace_convention) == (QUESTION, ANSWER, "mapping")
    assert run.status == "accepted" and [c.verdict for c in run.final_claims] == ["supported"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[tower-app\nquestion = 1", "is not valid TOML"),
        ('[tower-app]\nquestion = "q"\nanwser = "a"', "unknown keys: anwser"),
        ('[tower-app]\nquestion = "app.request#user..question"', "the path after '#' is not like"),
        ('[tower-app]\nquestion = ""', "give an attribute name"),
        ('[tower-app]\ndocument = {text = "t"}', "names none of question, answer, documents"),
        ('[tower-app]\ndocuments = "hits"\ndocument = {body = "t"}', "may name only text, score, source"),
    ],
)
def test_a_mistake_in_the_mapping_stops_collect_at_the_start_with_what_to_fix(text, said, tmp_path):
    with pytest.raises(ConfigError, match="collect_mapping") as refused:
        load_mappings(write_mapping(tmp_path, text))
    assert said in refused.value.message and "docs/traces-in.md" in refused.value.fix


def test_collect_with_a_broken_mapping_stops_before_it_listens(fake, monkeypatch, tmp_path, capsys):
    from test_collect_clients import free_port

    from pipeline.cli.main import main

    monkeypatch.setenv("WORKBENCH_COLLECT_MAPPING", str(tmp_path / "missing.toml"))
    assert main(["collect", "--port", str(free_port())]) == 1  # a settings error
    err = capsys.readouterr().err
    assert "collect_mapping names" in err and "which is not a file" in err and "Receiving" not in err


def test_span_events_are_received_and_kept_in_the_store(fake, settings, db):
    from otlp_traces import json_body

    from pipeline.collect.otlp import JSON
    from store.traces import trace_spans

    t = new_trace_id()
    query = vector_store_query(t, None, QUESTION, [(TOWER, "tower.md", 0.8)])
    client = TestClient(create_app(db, 1_000_000))
    assert client.post("/v1/traces", content=json_body([query]), headers={"content-type": JSON}).status_code == 200
    (received,) = trace_spans(db, t.hex())
    assert received == decode(json_body([query]), JSON)[0]
    assert received.events == [
        {
            "name": "db.query.result",
            "attributes": {
                "db.query.result.id": "tower.md",
                "db.query.result.document": TOWER,
                "db.query.result.score": 0.8,
                "db.query.result.metadata": '{"source": "tower.md"}',
            },
        }
    ]
    assert received.span_kind == "CHROMA QUERY"


def test_collects_summary_says_how_traces_were_read_and_why_some_were_not_evaluated(fake, settings, db):
    client = TestClient(create_app(db, 1_000_000))
    unknown = in_house_trace()
    for spans in (unknown, in_house_trace("When did the bridge open?")):
        body = protobuf_body(spans, service="tower-app")
        assert client.post("/v1/traces", content=body, headers={"content-type": PROTOBUF}).status_code == 200
    assert OnlineWorker(settings, db, settle_s=0).run_once() == 2
    summary = client.get("/").json()
    assert summary["traced_runs"]["conventions"] == {"none": 2}
    assert summary["traced_runs"]["not_evaluated"]["by_reason"] == {"no span carries retrieved documents": 2}
    latest = summary["traced_runs"]["not_evaluated"]["latest"]
    assert len(latest) == 2 and unknown[0].trace_id.hex() in {r["trace_id"] for r in latest}
    assert all(r["reason"].endswith("attributes that look like documents: search: app.search.hits") for r in latest)
    assert summary["ingest"] == {"requests": 2, "transactions": 2}  # one after the other: a transaction each
