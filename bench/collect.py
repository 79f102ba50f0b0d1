"""Traces in: how fast `collect` acknowledges traces, and how fast the online worker verifies them.

Ingest: `python -m pipeline collect --no-evaluate`, a process of its own on a scratch store, receives 10,000
traces of 3 spans each (a root CHAIN, a RETRIEVER with two documents, an LLM span, in OpenInference's
conventions) from 4 client threads, each on a kept-alive connection as an exporter's HTTP session keeps one,
one trace per request (the worst case: an exporter batching 512 spans sends far fewer requests) and then again
100 traces per request. Each request is acknowledged only once its spans are in the store; concurrent requests
share a store transaction (pipeline/collect/ingest.py). The figures are spans per second, the time to
acknowledge one request (p50, p95), requests per store transaction, the receiver's CPU time per request (from
/proc: what the rate would need on a machine of its own) and the load average when it started.

Floor: the same clients against bench/collect_floor.py, uvicorn and Starlette as `collect` serves them, reading
each body and answering 200 with nothing else: what no receiver on this HTTP stack and machine can pass.

Worker: 40 received question-and-answer traces verified by the online worker against the fake Ollama with its
latency model (2 ms per generated token, 0.2 ms per prompt token, 4 slots), in this process, with the response
cache off (each trace's claims verified afresh).

    python -m bench collect            (BENCH_TRACES=2000 for a shorter run)
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import ROOT, Figure
from pipeline.collect.serve import drain
from pipeline.config import load_settings
from store.db import close_all, get_database
from store.traces import received_counts

sys.path.insert(0, str(ROOT / "tests"))
from fake_ollama import FakeOllama  # noqa: E402
from otlp_traces import BRIDGE, TOWER, protobuf_body, rag_trace  # noqa: E402

TRACES = int(os.environ.get("BENCH_TRACES", "10000"))
CLIENTS, WORKER_TRACES = 4, 40
DOCS = [(TOWER, "tower.md", 0.8), (BRIDGE, "bridge.md", 0.3)]


class _Client(threading.local):
    """One kept-alive connection per client thread, as an OTLP exporter's HTTP session keeps one."""

    def post(self, port: int, body: bytes) -> float:
        if getattr(self, "connection", None) is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        start = time.perf_counter()
        self.connection.request("POST", "/v1/traces", body, {"content-type": "application/x-protobuf"})
        reply = self.connection.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"collect answered {reply.status}")
        return time.perf_counter() - start


def _bodies(n_traces: int, per_request: int) -> list[bytes]:
    bodies = []
    for start in range(0, n_traces, per_request):
        spans = []
        for n in range(start, min(start + per_request, n_traces)):
            spans += rag_trace(f"How tall is the Eiffel Tower ({n})?", "It is 330 metres tall.", DOCS)
        bodies.append(protobuf_body(spans))
    return bodies


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"collect exited {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("collect did not start in 120 s")


def ingest(per_request: int, floor: bool = False) -> dict:
    """`collect` receiving TRACES traces, per_request in each request; with `floor`, the bare server of
    bench/collect_floor.py instead (nothing is stored)."""
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as folder:
        store = str(Path(folder) / "bench.duckdb")
        port = _free_port()
        env = {**os.environ, "WORKBENCH_DB": store, "WORKBENCH_CONFIG": "", "OLLAMA_HOST": "http://127.0.0.1:9"}
        server = (
            ["bench.collect_floor", str(port)]
            if floor
            else ["pipeline", "collect", "--no-evaluate", "--port", str(port)]
        )
        process = subprocess.Popen([sys.executable, "-m", *server], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        try:
            _wait_up(port, process)
            bodies, client = _bodies(TRACES, per_request), _Client()
            cpu_before, load = _cpu_s(process.pid), os.getloadavg()[0]
            start = time.perf_counter()
            with ThreadPoolExecutor(CLIENTS) as pool:
                waits = list(pool.map(lambda body: client.post(port, body), bodies))
            wall = time.perf_counter() - start
            cpu = _cpu_s(process.pid) - cpu_before
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as reply:
                grouped = json.loads(reply.read())["ingest"]
        finally:
            process.terminate()
            process.wait(60)
        if floor:
            return _figures(waits, wall, len(bodies), cpu, load, grouped)
        os.environ["WORKBENCH_DB"] = store
        close_all()
        counts = received_counts(get_database(load_settings(environ={"WORKBENCH_DB": store, "WORKBENCH_CONFIG": ""})))
        close_all()
    if counts["spans"] != 3 * TRACES:
        raise RuntimeError(f"{counts['spans']} spans stored of {3 * TRACES} acknowledged")
    return _figures(waits, wall, len(bodies), cpu, load, grouped)


def _figures(waits: list[float], wall: float, requests: int, cpu: float, load: float, grouped: dict) -> dict:
    waits.sort()
    return {
        "spans_per_s": 3 * TRACES / wall,
        "p50_ms": 1000 * statistics.median(waits),
        "p95_ms": 1000 * waits[int(0.95 * (len(waits) - 1))],
        "wall_s": wall,
        "requests_per_transaction": grouped["requests"] / max(1, grouped["transactions"]),
        "server_cpu_ms_per_request": 1000 * cpu / requests,
        "load": load,
    }


def _cpu_s(pid: int) -> float:
    """The process's CPU time so far (user and system), from /proc; 0 where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker() -> dict:
    with (
        tempfile.TemporaryDirectory(prefix="workbench-bench-") as folder,
        FakeOllama(seconds_per_token=0.002, seconds_per_prompt_token=0.0002, slots=4) as fake,
    ):
        env = {
            "WORKBENCH_DB": str(Path(folder) / "bench.duckdb"),
            "WORKBENCH_CONFIG": "",
            "OLLAMA_HOST": fake.url,
            "WORKBENCH_CACHE_ENABLED": "false",  # every trace's claims verified afresh, as distinct answers would be
        }
        settings = load_settings(environ=env)
        db = get_database(settings)
        from starlette.testclient import TestClient

        from pipeline.collect.receiver import create_app

        client = TestClient(create_app(db, 16_000_000))
        for n in range(WORKER_TRACES):
            answer = (  # paraphrased claims and one invented: verified by the models, not matched word for word
                f"The tower in Paris rises 330 metres. Builders finished it in 1889. Visitor {n} painted it green."
            )
            body = protobuf_body(rag_trace(f"How tall is the Eiffel Tower ({n})?", answer, DOCS))
            client.post("/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
        start = time.perf_counter()
        state = drain(settings, db).state
        wall = time.perf_counter() - start
        calls = sum(r["path"] in ("/api/chat", "/api/generate") for r in fake.requests)
        close_all()
    return {"traces_per_min": 60 * state.evaluated / wall, "s_per_trace": wall / state.evaluated, "calls": calls}


def run() -> list[Figure]:
    floor, single, batched, online = ingest(1, floor=True), ingest(1), ingest(100), worker()
    note = f"{TRACES:,} traces × 3 spans, {CLIENTS} clients, kept-alive connections"

    def grouped(result: dict) -> str:
        return (
            f"{note}; {result['requests_per_transaction']:.1f} requests per store transaction, server CPU "
            f"{result['server_cpu_ms_per_request']:.2f} ms per request; load average {result['load']:.1f} at the start"
        )

    return [
        Figure(
            "floor: bare server, 1 trace/request",
            floor["spans_per_s"],
            "spans/s",
            None,
            False,
            f"{note}; uvicorn and Starlette reading the body and answering 200 (bench/collect_floor.py), server CPU "
            f"{floor['server_cpu_ms_per_request']:.2f} ms per request, p50 {floor['p50_ms']:.1f} ms; "
            f"load average {floor['load']:.1f} at the start",
        ),
        Figure("collect ingest, 1 trace/request", single["spans_per_s"], "spans/s", 2000, False, grouped(single)),
        Figure(
            "collect ack p95, 1 trace/request", single["p95_ms"], "ms", None, True, f"p50 {single['p50_ms']:.1f} ms"
        ),
        Figure("collect ingest, 100 traces/request", batched["spans_per_s"], "spans/s", None, False, grouped(batched)),
        Figure(
            "collect ack p95, 100 traces/request",
            batched["p95_ms"],
            "ms",
            None,
            True,
            f"p50 {batched['p50_ms']:.1f} ms",
        ),
        Figure(
            "online worker throughput",
            online["traces_per_min"],
            "traces/min",
            None,
            False,
            f"{WORKER_TRACES} traces, {online['s_per_trace']:.2f} s each, {online['calls']} model calls, no cache; "
            "fake latency model",
        ),
    ]


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
