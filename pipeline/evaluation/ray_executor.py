"""Evaluation items as Ray tasks (`eval --executor ray`): on a local Ray started for the run, or on an existing
cluster (`--ray-address`).

Only the driver (this process) opens the store. It puts the knowledge base's chunks and embeddings into Ray's
object store once; each item is a task that gets the settings (the model host with them), that snapshot, the
item and the judge pin with the people's corrections, answers and scores the item with the same code as the
local executor (item.py), calling Ollama directly, and returns the run log and scores. The runner saves each finished
item as it arrives, exactly as it does for the local executor.

The workers do not read or fill the response cache: it lives in the store.

Ray is optional: nothing but this module imports it, and the runner imports this module only for
`--executor ray`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager

import ray
from ray import exceptions as ray_errors

import pipeline
import store
from pipeline.config import Settings
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation.dataset import GoldenItem
from pipeline.evaluation.item import InConversation, ItemOutcome, evaluate_item, timed_out
from pipeline.evaluation.kb_snapshot import KnowledgeSnapshot, take_snapshot
from pipeline.knowledge import similarity_scale
from store.db import Database

POLL_S = 0.1  # how often a waiting item looks at the cancel event
CONNECT_TIMEOUT_S = 5.0


@contextmanager
def session(settings: Settings, db: Database, address: str | None, concurrency: int) -> Iterator:
    """While Ray is up and holds the knowledge base: a function (pin, eval run id, metrics, cancel event) -> the
    runner of items. A Ray this process already runs (a test session, a notebook) is used and left running;
    otherwise one is started (or the cluster at `address`, else at RAY_ADDRESS, joined) for the evaluation and
    shut down after it."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    owned = not ray.is_initialized()
    if owned:
        start(address, num_cpus=max(os.cpu_count() or 1, concurrency))
    elif address and address != "auto" and address != ray.get_runtime_context().gcs_address:
        raise InputError(
            f"this process is already connected to the Ray cluster at {ray.get_runtime_context().gcs_address}, "
            f"not {address}",
            fix="leave out --ray-address to use that cluster, or run the evaluation in a new process",
        )
    try:
        scale = similarity_scale.current(settings, db, origin="evaluation")  # workers have no store to measure in
        snapshot = ray.put(take_snapshot(db, settings.embed_model, scale))
        yield lambda pin, eval_run_id, metrics, cancel, pipeline: RayItems(
            settings, snapshot, pin, eval_run_id, metrics, cancel, pipeline
        )
    finally:
        if owned:
            stop()


def start(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join the Ray cluster at `address`, or start a local one bound to 127.0.0.1 without a dashboard, with
    `num_cpus` logical CPUs (an item mostly waits on the model server, so a local Ray may run more items than
    there are cores). The workers get this checkout's `pipeline` and `store` packages with the job; the rest
    (requirements.txt) must be installed where they run."""
    local = {}
    if address is None:
        _loopback_only()
        # a folder of its own: in Ray's shared one (/tmp/ray), ray.init() without an address would join the
        # cluster the last `ray start` on this machine recorded there, even one long gone
        _own_folders.append(tempfile.mkdtemp(prefix="workbench-ray-"))
        local = {"num_cpus": num_cpus, "_temp_dir": _own_folders[-1]}
    else:
        _reachable(address)
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            runtime_env={"py_modules": [pipeline, store]},
            **local,
        )
    except (ConnectionError, TimeoutError, ValueError, RuntimeError) as exc:
        if address is None:
            raise WorkbenchError(
                f"could not start a local Ray: {_first_line(exc)}",
                fix=f"see Ray's logs in {_own_folders[-1]}/session_latest/logs, or run with --executor local",
            ) from exc
        raise WorkbenchError(
            f"could not join the Ray cluster at {address}: {_first_line(exc)}",
            fix="check --ray-address (HOST:6379 for a head started with `ray start --head`); a cluster with token "
            "authentication (Ray's default) also needs RAY_AUTH_MODE=token here and its token (~/.ray/auth_token "
            "from the head, or RAY_AUTH_TOKEN)",
        ) from exc


def stop() -> None:
    """Shut Ray down in this process, and remove the folder of a local Ray that start() started."""
    ray.shutdown()
    while _own_folders:
        shutil.rmtree(_own_folders.pop(), ignore_errors=True)


_own_folders: list[str] = []


def _reachable(address: str) -> None:
    """Refuse at once a host:port nobody listens on (ray.init would keep retrying it for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # "auto", "ray://...": Ray resolves and checks those itself
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise WorkbenchError(
            f"no Ray cluster answers at {address}: {exc.strerror or exc}",
            fix="start its head with `ray start --head` and give its address (host:6379 by default), "
            "or leave out --ray-address to start a local Ray",
        ) from exc


def _loopback_only() -> None:
    """Make a local Ray listen on 127.0.0.1 only. Ray binds its servers to the node's address, which on Linux
    it takes from the network interface (even when 127.0.0.1 is asked for); with clusters marked unsupported,
    as on macOS and Windows, it uses the loopback address. Set for the Ray processes this one starts (they
    read the environment) and for this one (it read the variable when ray was imported)."""
    from ray._private import ray_constants

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local Ray for one run has nothing to report
    ray_constants.ENABLE_RAY_CLUSTER = False


class RayItems:
    """The items of one evaluation, each a Ray task. An item's timeout counts from when its task starts on a
    worker (not while it waits for one), and a timed-out item is abandoned there as the local executor abandons
    its thread. A task still running when the evaluation is cancelled or interrupted is cancelled (its worker is
    stopped) and nothing of it is kept: it runs again on resume."""

    def __init__(self, settings: Settings, snapshot, pin, eval_run_id: int, metrics: list[str], cancel, pipeline=None):
        self.settings, self.snapshot, self.pin = settings, snapshot, pin
        self.eval_run_id, self.metrics, self.cancel, self.pipeline = eval_run_id, metrics, cancel, pipeline

    async def run(
        self, item: GoldenItem, timeout: float, pool: ThreadPoolExecutor, conversation: InConversation | None = None
    ) -> ItemOutcome | None:
        """The item's outcome; None when it was cancelled while running; WorkbenchError when Ray could not
        run it. `conversation`: a turn's conversation and the turns before it (the runner runs its turns in order)."""
        # the snapshot's ref goes inside a list so that the task gets the ref, and each worker fetches it once
        call = (
            self.settings,
            [self.snapshot],
            item,
            self.pin,
            self.eval_run_id,
            self.metrics,
            timeout,
            self.pipeline,
            conversation,
        )
        ref = _evaluate.remote(*call)
        try:
            return await self._outcome(ref)
        except BaseException:  # the evaluation was interrupted (Ctrl-C): stop the task where it is
            ray.cancel(ref, force=True)
            raise

    async def _outcome(self, ref) -> ItemOutcome | None:
        future = asyncio.wrap_future(ref.future())
        while not future.done():
            if self.cancel.is_set():
                ray.cancel(ref, force=True)
                return None
            await asyncio.wait({future}, timeout=POLL_S)
        try:
            return future.result()
        except ray_errors.RayTaskError:
            raise  # the item's code raised (not a WorkbenchError: the task returns those), as with the local executor
        except ray_errors.RayError as exc:  # the worker or its node died, the object was lost...
            raise WorkbenchError(
                f"Ray could not run the item: {type(exc).__name__}: {_first_line(exc)}",
                fix="see Ray's logs (session_latest/logs in its temp folder on the node); it runs again on resume",
            ) from exc


@ray.remote
def _evaluate(
    settings: Settings,
    snapshot_box: list,
    item: GoldenItem,
    pin,
    eval_run_id: int,
    metrics,
    timeout: float,
    pipeline,
    conversation=None,
):
    """One item on a Ray worker, against the snapshot of the knowledge base (no store here): the item's outcome,
    recorded as the local executor records it."""
    knowledge = _knowledge(snapshot_box[0])
    abandon = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval")
    future = pool.submit(
        evaluate_item, settings, None, item, pin, abandon, eval_run_id, metrics, knowledge, pipeline, conversation
    )
    try:
        return future.result(timeout)
    except FutureTimeout:
        abandon.set()  # its thread stops at its next step
        return timed_out(timeout)
    except WorkbenchError as exc:
        return "failed", None, [], str(exc)
    finally:
        pool.shutdown(wait=False)


_held: dict[str, KnowledgeSnapshot] = {}  # a worker's snapshot, fetched once for all the items it runs


def _knowledge(ref) -> KnowledgeSnapshot:
    key = ref.hex()
    if key not in _held:
        _held.clear()
        _held[key] = ray.get(ref)
    return _held[key]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
