"""`collect`: the receiver served by uvicorn, with the online worker in a thread beside it."""

from __future__ import annotations

import ipaddress
import socket
import threading
from dataclasses import asdict

import uvicorn

from pipeline.collect.conventions.mapping import load_mappings
from pipeline.collect.receiver import TRACES_PATH, create_app
from pipeline.collect.worker import OnlineWorker
from pipeline.config import Settings
from pipeline.errors import InputError

STOP_WAIT_S = 60  # how long Ctrl+C waits for the trace being verified (a model call may take that long)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def listen(host: str, port: int) -> socket.socket:
    """The receiver's socket, bound before anything is said, so that a port in use is a clear error."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        raise InputError(
            f"collect cannot listen on {host}:{port} ({exc.strerror or exc})",
            fix="another program (another collect?) may hold that port: stop it, or choose another with --port",
        ) from None
    return sock


def serve(settings: Settings, db, host: str, port: int, token: str | None, online: bool, say) -> None:
    """Receive until interrupted (Ctrl+C); `say` prints a line for the user."""
    load_mappings(settings.collect_mapping)  # a mistake in the mapping file stops collect before it listens
    listening = listen(host, port)
    worker = OnlineWorker(settings, db) if online else None
    thread = None
    app = create_app(
        db,
        int(settings.collect_max_body_mb * 1e6),
        token,
        settings.store_save_wait_s,
        status=(lambda: {"worker": asdict(worker.state)}) if worker else None,
    )
    say(f"Receiving OpenTelemetry traces on http://{host}:{port}{TRACES_PATH} (OTLP/HTTP, protobuf or JSON).")
    if not is_loopback(host):
        say(
            f"Listening on {host}, reachable from other machines"
            + ("; requests need the bearer token." if token else " without a token: set WORKBENCH_COLLECT_TOKEN.")
        )
    if worker:
        say(f"Online evaluation on: {settings.collect_sample_rate:g} of question-and-answer traces are verified.")
        thread = threading.Thread(target=worker.run_forever, name="online-worker", daemon=True)
        thread.start()
    else:
        say("Online evaluation off (--no-evaluate): traces are kept; `collect --drain` evaluates them later.")
    try:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        uvicorn.Server(config).run(sockets=[listening])
    except KeyboardInterrupt:  # Ctrl+C: uvicorn has stopped serving and raises it again; a normal end here
        pass
    finally:
        if thread is not None:  # let the trace in hand be stored: a thread inside DuckDB at exit aborts the process
            worker.stopping.set()
            say("Stopping: the online worker finishes the trace in hand…")
            thread.join(STOP_WAIT_S)


def drain(settings: Settings, db) -> OnlineWorker:
    """Turn every trace waiting in the store into its run, then return (the worker holds the counts)."""
    worker = OnlineWorker(settings, db, settle_s=0)
    while worker.run_once():
        pass
    return worker
