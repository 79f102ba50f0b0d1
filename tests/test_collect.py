"""Traces in: the OTLP receiver keeps what it acknowledges and refuses what it cannot read; the online worker
turns each ended trace into one traced run, verified or kept with the reason, never twice."""

from __future__ import annotations

import gzip
import json
import threading
import time

import pytest
from otlp_traces import BRIDGE, TOWER, json_body, protobuf_body, rag_trace, span
from starlette.testclient import TestClient

from pipeline.collect.assemble import assemble
from pipeline.collect.otlp import JSON, PROTOBUF, BadRequest, decode
from pipeline.collect.receiver import create_app
from pipeline.collect.worker import OnlineWorker, sampled
from pipeline.config import load_settings
from pipeline.history.runs import load_result, load_run
from store import db as store_db
from store.history import RunFilter, find_runs
from store.journal import pending, save_run
from store.traces import received_counts, trace_spans

QUESTION = "How tall is the Eiffel Tower?"
ANSWER = "The Eiffel Tower is 330 metres tall. It was painted green by a circus from Lisbon."
DOCS = [(TOWER, "tower.md", 0.82), (BRIDGE, "bridge.md", 0.31)]
NO_DOCUMENTS = "no span carries retrieved documents"


def client(db, token=None, limit=1_000_000):
    return TestClient(create_app(db, limit, token, lock_timeout_s=0.5))


def post(c, body, content_type=PROTOBUF, **headers):
    return c.post("/v1/traces", content=body, headers={"content-type": content_type, **headers})


def traced_runs(db):
    return find_runs(db, RunFilter(kinds=["traced"])).rows


def test_protobuf_and_json_bodies_decode_to_the_same_spans():
    spans = rag_trace(QUESTION, ANSWER, DOCS)
    from_protobuf = decode(protobuf_body(spans), PROTOBUF)
    from_json = decode(json_body(spans), JSON)
    assert from_protobuf == from_json
    root, retriever, llm = from_protobuf
    assert root.parent_id is None and retriever.parent_id == llm.parent_id == root.span_id
    assert root.trace_id == spans[0].trace_id.hex() and len(root.span_id) == 16
    assert (root.service, root.span_kind, retriever.span_kind, llm.span_kind) == (
        "tower-app",
        "CHAIN",
        "RETRIEVER",
        "LLM",
    )
    assert root.attributes["input.value"] == QUESTION and llm.attributes["llm.token_count.prompt"] == 120
    assert (root.ended_at - root.started_at).total_seconds() == pytest.approx(0.040, abs=1e-6)


def test_a_trace_reads_as_question_answer_contexts_and_calls():
    request = assemble(decode(protobuf_body(rag_trace(QUESTION, ANSWER, DOCS)), PROTOBUF))
    assert (request.question, request.answer, request.not_evaluated) == (QUESTION, ANSWER, None)
    assert [(c.text, c.source, c.score) for c in request.contexts] == DOCS
    (call,) = request.calls
    assert (call.model, call.prompt_tokens, call.completion_tokens, call.origin) == ("llama3.2", 120, 20, "traced")
    assert call.latency_ms == 25.0 and ANSWER in call.completion_text  # exact: times are read as whole numbers
    assert request.model == "llama3.2" and request.latency_ms == pytest.approx(40)
    assert [s.name for s in request.spans] == [
        "RetrieverQueryEngine.query",
        "VectorIndexRetriever.retrieve",
        "Ollama.chat",
    ]
    assert request.spans[1].attributes["documents"] == 2


def test_json_inputs_and_outputs_are_read_as_text():
    spans = rag_trace('{"question": "How tall is the Eiffel Tower?"}', '{"answer": "It is 330 metres tall."}', DOCS)
    request = assemble(decode(protobuf_body(spans), PROTOBUF))
    assert (request.question, request.answer) == (QUESTION, "It is 330 metres tall.")


@pytest.mark.parametrize(
    ("spans", "reason"),
    [
        (
            lambda t: [span(t, "agent", "AGENT", {"input.value": "hi", "output.value": "hello"})],
            NO_DOCUMENTS,
        ),
        (lambda t: rag_trace(QUESTION, None, DOCS, trace_id=t), "no output"),
        (lambda t: rag_trace(QUESTION, ANSWER, DOCS, trace_id=t, error="timeout from Ollama"), "timeout from Ollama"),
    ],
)
def test_a_trace_that_is_no_question_and_answer_says_why(spans, reason):
    request = assemble(decode(protobuf_body(spans(b"\x01" * 16)), PROTOBUF))
    assert reason in request.not_evaluated


def test_what_is_acknowledged_is_in_the_store_before_the_answer(fake, settings, db):
    c = client(db)
    first, second = rag_trace(QUESTION, ANSWER, DOCS), rag_trace("When did the bridge open?", "In 1937.", DOCS)
    r1 = post(c, protobuf_body(first))
    assert r1.status_code == 200 and r1.headers["content-type"] == PROTOBUF
    assert received_counts(db)["spans"] == 3  # read as soon as the answer came
    r2 = post(c, json_body(second), JSON)
    assert r2.status_code == 200 and r2.json() == {}
    assert received_counts(db) == {"spans": 6, "traces": 2, "ended": 2, "runs": 0}
    assert post(c, protobuf_body(first)).status_code == 200  # an exporter's retry: stored once
    assert received_counts(db)["spans"] == 6
    gzipped = post(c, gzip.compress(protobuf_body(rag_trace("Q3?", "A.", DOCS))), **{"content-encoding": "gzip"})
    assert gzipped.status_code == 200 and received_counts(db)["spans"] == 9


def test_bad_requests_get_a_bounded_answer_and_store_nothing(fake, settings, db):
    c = client(db, limit=4_000)
    good = protobuf_body(rag_trace(QUESTION, ANSWER, DOCS))
    cases = [
        (post(c, b"\xff\xfe not protobuf"), 400, "not an OTLP ExportTraceServiceRequest"),
        (post(c, b"{not json", JSON), 400, "not JSON"),
        (
            post(c, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', JSON),
            400,
            "not hexadecimal",
        ),
        (post(c, b'{"resourceSpans": 3}', JSON), 400, "not an OTLP/JSON trace request"),
        (post(c, protobuf_body([span(b"\x00" * 16, "x", "CHAIN", {})])), 400, "no valid trace id"),
        (post(c, good, "text/plain"), 415, "application/x-protobuf"),
        (post(c, good, PROTOBUF, **{"content-encoding": "br"}), 415, "content encoding"),
        (post(c, b"x" * 5_000), 413, "larger than 0.004 MB"),
        (post(c, gzip.compress(b"\x00" * 50_000), PROTOBUF, **{"content-encoding": "gzip"}), 413, "decompressed"),
        (post(c, b"\x1f\x8b garbage", PROTOBUF, **{"content-encoding": "gzip"}), 400, "not valid gzip"),
    ]
    for response, code, why in cases:
        assert (response.status_code, why in response.text) == (code, True), response.text
    assert received_counts(db)["spans"] == 0 and not pending(db.path)


def test_a_bearer_token_guards_the_receiver(fake, settings, db):
    c = client(db, token="s3cret")
    body = protobuf_body(rag_trace(QUESTION, ANSWER, DOCS))
    assert post(c, body).status_code == 401
    assert post(c, body, PROTOBUF, authorization="Bearer wrong").status_code == 401
    assert received_counts(db)["spans"] == 0
    assert post(c, body, PROTOBUF, authorization="Bearer s3cret").status_code == 200
    assert received_counts(db)["spans"] == 3


@pytest.mark.slow
def test_spans_arriving_while_the_store_is_held_are_journaled_and_acknowledged(fake, settings, db, tmp_path):
    from test_faults import holding  # another process holds the store's lock

    c = client(db)
    received_counts(db)  # the store exists before the other process takes it
    with holding(settings.store_path):
        assert post(c, protobuf_body(rag_trace(QUESTION, ANSWER, DOCS))).status_code == 200
        assert len(pending(db.path)) == 1
    OnlineWorker(settings, db, settle_s=0).run_once()  # any save replays the journal first
    assert not pending(db.path) and received_counts(db)["spans"] == 3


def test_a_trace_sent_in_two_batches_is_evaluated_once_its_root_has_ended(fake, settings, db):
    c = client(db)
    root, retriever, llm = rag_trace(QUESTION, ANSWER, DOCS)
    open_root = span(root.trace_id, root.name, "CHAIN", {}, ended=False)
    open_root.span_id = root.span_id
    assert post(c, protobuf_body([retriever, llm])).status_code == 200
    worker = OnlineWorker(settings, db, settle_s=0)
    assert worker.run_once() == 0  # no root yet
    assert post(c, protobuf_body([root])).status_code == 200
    assert worker.run_once() == 1 and worker.run_once() == 0
    (row,) = traced_runs(db)
    run = load_result(db, row["id"])
    assert (run.kind, run.pipeline, run.question, run.answer) == ("traced", "tower-app", QUESTION, ANSWER)
    assert run.status == "flagged" and run.faithfulness == 0.5  # the circus claim has no support
    assert [c.verdict for c in run.final_claims][0] == "supported"
    assert [p.text for p in run.passages] == [TOWER, BRIDGE]
    stored = load_run(db, row["id"])
    origins = [c["origin"] for c in stored.calls]
    assert origins.count("traced") == 1 and origins.count("online") >= 2  # the app's call, then the check's
    assert {"RetrieverQueryEngine.query", "Ollama.chat", "traced answer"} <= {s.name for s in stored.spans}


def test_the_worker_keeps_what_it_cannot_check_and_never_takes_a_trace_twice(fake, settings, db):
    c = client(db)
    agent = span(b"\x02" * 16, "agent", "AGENT", {"input.value": "hi", "output.value": "hello"})
    for spans in (rag_trace(QUESTION, ANSWER, DOCS), [agent]):
        assert post(c, protobuf_body(spans)).status_code == 200
    assert OnlineWorker(settings, db, settle_s=0).run_once() == 2
    assert OnlineWorker(settings, db, settle_s=0).run_once() == 0  # a restarted worker: nothing left
    kept = [load_result(db, r["id"]) for r in traced_runs(db) if r["status"] == "not_evaluated"]
    assert len(kept) == 1 and NO_DOCUMENTS in kept[0].abstain_reason and kept[0].faithfulness is None
    assert len(traced_runs(db)) == 2


def test_a_model_outage_leaves_traces_waiting_and_stores_no_failed_run(fake, settings, db):
    c = client(db)
    assert post(c, protobuf_body(rag_trace(QUESTION, ANSWER, DOCS))).status_code == 200
    fake.stop()
    worker = OnlineWorker(settings, db, settle_s=0)
    assert worker.run_once() == 0 and worker.state.last_error
    assert traced_runs(db) == []


@pytest.mark.slow
def test_sampling_chooses_by_trace_id_and_keeps_the_rest_unevaluated(fake, monkeypatch, db):
    monkeypatch.setenv("WORKBENCH_COLLECT_SAMPLE_RATE", "0.5")
    settings = load_settings()
    ids = [f"{n:032x}" for n in range(400)]
    share = sum(sampled(i, 0.5) for i in ids) / len(ids)
    assert 0.4 < share < 0.6 and [sampled(i, 0.5) for i in ids] == [sampled(i, 0.5) for i in ids]
    c = client(db)
    traces = [rag_trace(QUESTION, ANSWER, DOCS) for _ in range(6)]
    for spans in traces:
        post(c, protobuf_body(spans))
    OnlineWorker(settings, db, settle_s=0).run_once()
    runs = traced_runs(db)
    expected = {s[0].trace_id.hex() for s in traces if sampled(s[0].trace_id.hex(), 0.5)}
    evaluated = {load_result(db, r["id"]).trace_id for r in runs if r["status"] != "not_evaluated"}
    assert len(runs) == 6 and evaluated == expected
    assert all("not sampled" in load_result(db, r["id"]).abstain_reason for r in runs if r["status"] == "not_evaluated")


def test_received_spans_are_read_back_whole(fake, settings, db):
    c = client(db)
    spans = rag_trace(QUESTION, ANSWER, DOCS)
    post(c, protobuf_body(spans))
    back = trace_spans(db, spans[0].trace_id.hex())
    assert [s.name for s in back] == ["RetrieverQueryEngine.query", "VectorIndexRetriever.retrieve", "Ollama.chat"]
    assert back[1].attributes["retrieval.documents.0.document.content"] == TOWER


def test_two_receivers_on_one_store_keep_every_span(fake, settings, db):
    other = store_db.Database(settings.store_path, 2, 0)
    clients = [client(db), client(other)]
    traces = [rag_trace(f"Q{n}?", "A.", DOCS) for n in range(10)]

    def send(n):
        assert post(clients[n % 2], protobuf_body(traces[n])).status_code == 200

    threads = [threading.Thread(target=send, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    OnlineWorker(settings, db, settle_s=0).run_once(limit=0)  # replays anything journaled
    assert received_counts(db)["spans"] == 30


def test_bad_spans_never_raise_out_of_decode():
    with pytest.raises(BadRequest):
        decode(b"\x0a\x05garbage", PROTOBUF)


def test_a_traced_run_saved_twice_is_stored_once(fake, settings, db):
    """The journal may replay a traced run that another worker also wrote: the trace keeps one run."""
    from pipeline.collect.worker import kept_run
    from store.journal import save_run

    request = assemble(decode(protobuf_body(rag_trace(QUESTION, ANSWER, DOCS)), PROTOBUF))
    first, _ = save_run(db, kept_run(settings, request, "test"))
    again, _ = save_run(db, kept_run(settings, request, "test"))
    assert first == again and len(traced_runs(db)) == 1


@pytest.mark.slow
def test_chosen_metrics_are_scored_online_with_the_run_and_kept_through_the_journal(fake, monkeypatch, db):
    from test_faults import holding

    monkeypatch.setenv("WORKBENCH_COLLECT_METRICS", "judge_faithfulness, judge_topicality")
    settings = load_settings()
    c = client(db)
    assert post(c, protobuf_body(rag_trace(QUESTION, ANSWER, DOCS))).status_code == 200
    worker = OnlineWorker(settings, db, settle_s=0)
    assert worker.run_once() == 1
    bridge = rag_trace("When did the bridge open?", "It opened in 1937.", DOCS)
    assert post(c, protobuf_body(bridge)).status_code == 200
    run = worker.run_of(assemble(trace_spans(db, bridge[0].trace_id.hex())))
    with holding(settings.store_path):  # the store is taken as the run is saved: run and scores wait in the journal
        run_id, kept = save_run(db, run.log, 0.2, run.scores)
        assert run_id is None and kept is not None
    assert worker.run_once() == 0 and not pending(db.path)  # replayed, and the trace not verified again
    for row in traced_runs(db):
        scores = {s["metric"]: s for s in load_run(db, row["id"]).scores}
        assert set(scores) == {"judge_faithfulness", "judge_topicality"}
        assert set(row["judge"]) == {"faithfulness", "topicality"}  # the Runs page's judge columns
        assert all(s["status"] == "ok" and 1 <= s["value"] <= 5 and s["evaluation"] is None for s in scores.values())
        assert "judge_faithfulness" in json.dumps(load_result(db, row["id"]).config["metrics"])


def test_an_unknown_online_metric_is_refused_with_the_names_to_choose_from(fake, monkeypatch, db):
    from pipeline.errors import InputError

    monkeypatch.setenv("WORKBENCH_COLLECT_METRICS", "judge_vibes")
    with pytest.raises(
        InputError, match="collect_metrics names .judge_vibes., which is not a registered metric"
    ) as refused:
        OnlineWorker(load_settings(), db)
    assert "judge_faithfulness" in refused.value.fix


def test_collect_on_a_port_in_use_says_so_and_exits_2(fake, settings, db, capsys):
    import socket

    from pipeline.cli.main import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["collect", "--port", str(taken.getsockname()[1])]) == 2
    err = capsys.readouterr().err
    assert "collect cannot listen on 127.0.0.1" in err and "--port" in err and "Receiving" not in err


def test_the_workbenchs_own_traces_are_kept_not_verified_again(fake, settings, db):
    """With otlp_endpoint pointing at collect, every check the worker made would come back as a trace to check."""
    c = client(db)
    assert post(c, protobuf_body(rag_trace(QUESTION, ANSWER, DOCS), service="rag-quality-workbench")).status_code == 200
    assert OnlineWorker(settings, db, settle_s=0).run_once() == 1
    (row,) = traced_runs(db)
    run = load_result(db, row["id"])
    assert run.status == "not_evaluated" and "the workbench's own trace" in run.abstain_reason
    assert not any(c["origin"] == "online" for c in load_run(db, row["id"]).calls)


def test_concurrent_requests_share_a_transaction_and_each_is_answered_once_its_spans_are_stored(fake, settings, db):
    """Grouped ingest: while one write is in the store, the requests arriving meanwhile wait and are written
    together; none is answered before its spans are in the store."""
    from pipeline.collect import ingest

    writer = ingest.GroupWriter(db, 1.0)
    started, release, original = threading.Event(), threading.Event(), ingest.save_received

    def slow_first_write(*args):
        if not started.is_set():
            started.set()
            release.wait(10)  # the first transaction is held until the others are queued
        return original(*args)

    traces = [rag_trace(f"Q{n}?", "A.", DOCS) for n in range(6)]
    answered = []

    def send(n):
        writer.save(decode(protobuf_body(traces[n]), PROTOBUF))
        answered.append((n, received_counts(db)["spans"]))

    ingest.save_received = slow_first_write
    try:
        first = threading.Thread(target=send, args=(0,))
        first.start()
        assert started.wait(10)
        rest = [threading.Thread(target=send, args=(n,)) for n in range(1, 6)]
        for t in rest:
            t.start()
        deadline = time.monotonic() + 10
        while len(writer.queue) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert answered == [] and len(writer.queue) == 5  # none answered while the first write is held
        release.set()
        for t in (first, *rest):
            t.join(10)
    finally:
        ingest.save_received = original
    assert (writer.requests, writer.groups) == (6, 2)  # the five that waited: one transaction
    assert received_counts(db)["spans"] == 18
    assert all(spans_then >= 3 * (1 if n == 0 else 6) for n, spans_then in answered)


def test_a_write_mixing_stored_new_and_repeated_spans_keeps_each_span_once(fake, settings, db):
    """Spans are written with a plain INSERT (no conflict check); one already stored, or sent twice in one group
    (two exporters' retries), makes the write run again with the check: nothing new is lost, nothing doubled."""
    from datetime import datetime, timezone

    from store.journal import save_received

    stored, new = rag_trace(QUESTION, ANSWER, DOCS), rag_trace("When did the bridge open?", "In 1937.", DOCS)
    assert post(client(db), protobuf_body(stored)).status_code == 200
    group = decode(protobuf_body(stored), PROTOBUF) + decode(protobuf_body(new), PROTOBUF)
    twice = decode(protobuf_body(new[:1]), PROTOBUF)
    twice[0].name = "sent again"
    assert save_received(db, group + twice, datetime.now(timezone.utc), 0.5) == (None, None)  # stored, not journaled
    assert received_counts(db) == {"spans": 6, "traces": 2, "ended": 2, "runs": 0}
    assert trace_spans(db, new[0].trace_id.hex())[0].name == new[0].name  # the first of the two kept


def test_a_lone_request_waits_for_others_no_longer_than_the_gathering_bound(fake, settings, db, monkeypatch):
    """After a transaction of several requests, the next write waits a moment for as many to join; a request
    that stays alone is written once that bound has passed, not held for company that never comes. The gathering
    loop's clock is virtual: each of its naps moves it on, so what is counted is how long it waited, not how long
    this machine took."""
    from pipeline.collect import ingest

    now, naps = [0.0], []

    def nap(seconds):
        naps.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(ingest, "GATHER_S", 0.3)
    monkeypatch.setattr(ingest, "monotonic", lambda: now[0])
    monkeypatch.setattr(ingest, "sleep", nap)
    writer = ingest.GroupWriter(db, 1.0)
    writer.last_group = 4  # the last transaction carried four requests
    writer.save(decode(protobuf_body(rag_trace(QUESTION, ANSWER, DOCS)), PROTOBUF))
    assert naps, "a lone request was written without waiting for company"
    assert 0.3 <= sum(naps) <= 0.3 + 0.3 / 8 + 1e-9  # it waited for company up to the bound, then was written alone
    assert (writer.requests, writer.groups, writer.last_group) == (1, 1, 1)
    assert received_counts(db)["spans"] == 3
