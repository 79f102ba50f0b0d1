"""Traces in from real clients: a LlamaIndex query engine and a LangChain chain, each instrumented with
OpenInference and exporting with the OpenTelemetry SDK's OTLP/HTTP exporter to `python -m pipeline collect`,
answer questions against one fake Ollama; the collector, a process of its own, verifies them against another.
The stored runs are checked against what the application did: its questions, answers, retrieved contexts and
model calls. And kill -9 of the collector during a load loses no acknowledged span."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager

import pytest
from conftest import ROOT, TEST_ENV
from fake_ollama import FakeOllama
from otlp_traces import BRIDGE, TOWER, protobuf_body, rag_trace

from pipeline.history.runs import load_run
from store.history import RunFilter, find_runs

pytest.importorskip("openinference.instrumentation.llama_index")
SERVICE_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as reply:
        return json.loads(reply.read())


@contextmanager
def collector(settings, *args: str):
    """`python -m pipeline collect` on a free port for the test's store, verifying against the test's fake."""
    port = free_port()
    env = {**os.environ, **TEST_ENV, "WORKBENCH_DB": settings.store_path, "OLLAMA_HOST": settings.ollama_host}
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "collect", "--port", str(port), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _up(port, process), "the collector to listen")
        yield process, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # Ctrl+C: a clean stop, exit 0 (not 134: no thread left in DuckDB)
            try:
                assert process.wait(90) == 0, process.stderr.read()
            finally:
                if process.poll() is None:
                    process.kill()
        process.stderr.close()


def _up(port: int, process) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"collect exited {process.returncode}: {process.stderr.read()}")
    try:
        return status(port)["receiver"] == "ok"
    except OSError:
        return False


def wait_for(condition, what: str, timeout_s: float = SERVICE_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout_s} s for {what}")


def wait_for_runs(port: int, n: int) -> dict:
    return wait_for(lambda: (s := status(port)).get("runs", 0) >= n and s, f"{n} traced runs")


@contextmanager
def exporting(instrumentor, port: int, service: str):
    """The application's OpenTelemetry SDK set-up, as its own code would have it; spans flushed at the end."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        provider.force_flush()
        instrumentor.uninstrument()
        provider.shutdown()


def answer_traced(app_fake, port: int, instrumentor, service: str, ask, questions: list[str]):
    """The application answers each question with its spans exported to collect, which makes them runs:
    ({question: what ask returned}, how many model calls the application made)."""
    before = chat_requests(app_fake)
    with exporting(instrumentor, port, service):
        answers = {q: ask(q) for q in questions}
    calls = chat_requests(app_fake) - before
    wait_for_runs(port, len(questions))
    return answers, calls


def chat_requests(fake) -> int:
    return sum(r["path"] in ("/api/chat", "/api/generate") for r in fake.requests)


def traced(db, service: str) -> list:
    rows = find_runs(db, RunFilter(kinds=["traced"])).rows
    runs = [load_run(db, r["id"]) for r in rows]
    return sorted((r for r in runs if r.result.pipeline == service), key=lambda r: r.result.question)


def assert_run_is_what_the_app_did(stored, question: str, answer: str, contexts: list[str]) -> None:
    result = stored.result
    assert (result.kind, result.question, result.answer) == ("traced", question, answer)
    assert [p.text for p in result.passages] == contexts
    assert result.status in ("accepted", "flagged") and result.final_claims
    assert any(c.verdict == "supported" for c in result.final_claims)
    assert len(stored.spans) > 3 and result.trace_id


@pytest.mark.slow
def test_a_llamaindex_query_engine_is_traced_to_collect_and_its_answers_verified(fake, settings, db):
    from llama_index.core import Document, PromptTemplate, VectorStoreIndex
    from llama_index.embeddings.ollama import OllamaEmbedding
    from llama_index.llms.ollama import Ollama
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    questions = ["How tall is the Eiffel Tower?", "When did the Golden Gate Bridge open?"]
    with FakeOllama() as app_fake, collector(settings) as (_, port):
        documents = [
            Document(text=TOWER, metadata={"file_name": "tower.md"}),
            Document(text=BRIDGE, metadata={"file_name": "bridge.md"}),
        ]
        embed = OllamaEmbedding(model_name="nomic-embed-text", base_url=app_fake.url)
        llm = Ollama(model="llama3.2", base_url=app_fake.url, request_timeout=30, context_window=4096)
        template = PromptTemplate(
            "Answer from the context only.\nContext:\n{context_str}\nQuestion: {query_str}\nAnswer:"
        )
        engine = VectorStoreIndex.from_documents(documents, embed_model=embed).as_query_engine(
            llm=llm, similarity_top_k=1, text_qa_template=template
        )
        responses, app_calls = answer_traced(
            app_fake, port, LlamaIndexInstrumentor(), "tower-app", engine.query, questions
        )
    runs = traced(db, "tower-app")
    assert [r.result.question for r in runs] == sorted(questions)
    for stored in runs:
        response = responses[stored.result.question]
        contexts = [n.node.get_content() for n in response.source_nodes]
        assert_run_is_what_the_app_did(stored, stored.result.question, str(response).strip(), contexts)
        assert [round(p.score, 6) for p in stored.result.passages] == [round(n.score, 6) for n in response.source_nodes]
    app_side = [c for r in runs for c in r.calls if c["origin"] == "traced"]
    assert len(app_side) == app_calls == len(questions)  # one chat per question, each a stored call
    assert {c["model"] for c in app_side} == {"llama3.2"}


@pytest.mark.slow
def test_a_langchain_chain_is_traced_to_collect_and_its_answers_verified(fake, settings, db):
    pytest.importorskip("openinference.instrumentation.langchain")
    from langchain_core.documents import Document
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import PromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough
    from langchain_ollama import ChatOllama
    from openinference.instrumentation.langchain import LangChainInstrumentor

    library = [
        Document(page_content=TOWER, metadata={"source": "tower.md"}),
        Document(page_content=BRIDGE, metadata={"source": "bridge.md"}),
    ]

    class KeywordRetriever(BaseRetriever):
        """The document sharing most words with the question."""

        def _get_relevant_documents(self, query, *, run_manager=None):
            words = set(query.lower().split())
            return [max(library, key=lambda d: len(words & set(d.page_content.lower().split())))]

    def joined(documents):
        return "\n\n".join(d.page_content for d in documents)

    questions = ["How tall is the Eiffel Tower?", "When did the Golden Gate Bridge open?"]
    with FakeOllama() as app_fake, collector(settings) as (_, port):
        prompt = PromptTemplate.from_template(
            "Answer from the context only.\nContext:\n{context}\nQuestion: {question}\nAnswer:"
        )
        model = ChatOllama(model="llama3.2", base_url=app_fake.url)
        chain = (
            {"context": KeywordRetriever() | joined, "question": RunnablePassthrough()}
            | prompt
            | model
            | StrOutputParser()
        )
        answers, app_calls = answer_traced(
            app_fake, port, LangChainInstrumentor(), "langchain-app", chain.invoke, questions
        )
    runs = traced(db, "langchain-app")
    assert [r.result.question for r in runs] == sorted(questions)
    for stored in runs:
        question = stored.result.question
        expected = KeywordRetriever().invoke(question)
        assert_run_is_what_the_app_did(stored, question, answers[question].strip(), [d.page_content for d in expected])
        assert [p.source for p in stored.result.passages] == [d.metadata["source"] for d in expected]
    app_side = [c for r in runs for c in r.calls if c["origin"] == "traced"]
    assert len(app_side) == app_calls == len(questions)


@pytest.mark.slow
def test_kill_9_of_the_collector_under_load_loses_no_acknowledged_span(fake, settings, db):
    """A client sends traces one request at a time while the collector is killed; every span of every request
    answered 200 is in the store afterwards, and a restarted collector evaluates what was left, none twice."""
    acknowledged: list[str] = []
    stop = threading.Event()

    def load(port: int) -> None:
        while not stop.is_set():
            spans = rag_trace("How tall is the Eiffel Tower?", "It is 330 metres tall.", [(TOWER, "tower.md", 0.8)])
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/traces",
                data=protobuf_body(spans),
                headers={"content-type": "application/x-protobuf"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as reply:
                    if reply.status == 200:
                        acknowledged.append(spans[0].trace_id.hex())
            except OSError:
                return  # the collector is gone: what it answered is all that counts

    with collector(settings, "--no-evaluate") as (process, port):
        sender = threading.Thread(target=load, args=(port,))
        sender.start()
        wait_for(lambda: len(acknowledged) >= 30, "30 acknowledged requests")
        process.kill()  # SIGKILL, mid-stream
        process.wait(30)
        stop.set()
        sender.join(60)
    assert len(acknowledged) >= 30
    with collector(settings) as (_, port):  # restarted: replays any journal, then evaluates what is waiting
        state = wait_for_runs(port, len(acknowledged))
        assert state["spans"] >= 3 * len(acknowledged)
    rows = find_runs(db, RunFilter(kinds=["traced"]), page_size=10_000).rows
    trace_ids = [load_run(db, r["id"]).result.trace_id for r in rows]
    assert set(acknowledged) <= set(trace_ids)
    assert len(trace_ids) == len(set(trace_ids))  # none twice


@pytest.mark.slow
def test_kill_9_of_the_collector_mid_verification_then_a_restart_verifies_each_trace_once(fake, settings, db):
    """The collector is killed while its worker waits on the model for the first trace: nothing of it is stored
    half-way; the restarted worker verifies all five, and no trace has two runs."""
    from store.journal import pending

    traces = [
        rag_trace(f"How tall is the Eiffel Tower, part {n}?", "It is 330 metres tall.", [(TOWER, "tower.md", 0.8)])
        for n in range(5)
    ]
    with collector(settings) as (process, port):
        held = fake.hold()  # every model reply waits from now on
        for spans in traces:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/traces",
                data=protobuf_body(spans),
                headers={"content-type": "application/x-protobuf"},
            )
            assert urllib.request.urlopen(request, timeout=30).status == 200
        assert fake.wait_until(lambda f: held.waiting >= 1, timeout_s=SERVICE_TIMEOUT_S)
        process.kill()  # SIGKILL while a verification is in flight
        process.wait(30)
        held.release()
    stopped_with = len(find_runs(db, RunFilter(kinds=["traced"])).rows)
    assert stopped_with == 0 and not pending(db.path)  # the one in flight was not stored half-way
    with collector(settings) as (_, port):
        wait_for_runs(port, len(traces))
    rows = find_runs(db, RunFilter(kinds=["traced"]), page_size=100).rows
    trace_ids = [load_run(db, r["id"]).result.trace_id for r in rows]
    assert sorted(trace_ids) == sorted(s[0].trace_id.hex() for s in traces)  # each once
    assert all(r["status"] in ("accepted", "flagged") for r in rows)
