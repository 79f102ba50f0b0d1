"""`collect`: the receiver served by uvicorn, with the online worker in a thread beside it."""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import asdict

import uvicorn

from pipeline.collect.receiver import TRACES_PATH, create_app
from pipeline.collect.worker import OnlineWorker
from pipeline.config import Settings


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve(settings: Settings, db, host: str, port: int, token: str | None, online: bool, say) -> None:
    """Receive until interrupted (Ctrl+C); `say` prints a line for the user."""
    worker = OnlineWorker(settings, db) if online else None
    stop = threading.Event()
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
        threading.Thread(target=worker.run_forever, args=(stop,), name="online-worker", daemon=True).start()
    else:
        say("Online evaluation off (--no-evaluate): traces are kept; `collect --drain` evaluates them later.")
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)).run()
    finally:
        stop.set()


def drain(settings: Settings, db) -> OnlineWorker:
    """Turn every trace waiting in the store into its run, then return (the worker holds the counts)."""
    worker = OnlineWorker(settings, db, settle_s=0)
    while worker.run_once():
        pass
    return worker
