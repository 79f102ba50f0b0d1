"""Throughput with several model hosts (issue 17): the same evaluation on 1, 2 and 4 simulated Ollama hosts.

    python -m bench hosts                      # 100 items on 1, 2 and 4 hosts (part of `make bench`)
    python -m bench.hosts --items 20           # fewer items
    python -m bench.hosts --hosts 1,2          # other host counts

Each host is a fake Ollama (tests/fake_ollama/) served by threads of this process: 4 parallel slots,
25 ms per output token, 0.5 ms per prompt token (embeddings are instant). The evaluation is the product's
own runner (pipeline.evaluation.runner.run_evaluation) over the golden set's items, cycled to the
requested number, at concurrency 4 × hosts, with `ollama_hosts` listing the servers and
`ollama_slots_per_host` 4. The response cache is off and every host count gets a fresh copy of one
ingested store, so no call is a cache hit and every count does the same work.

The fake servers' CPU time is measured (each request's handler thread, time.thread_time) and reported
with the process's: the servers simulate model time with sleeps, and their own CPU must stay small for
the wall times to measure the routing rather than this machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass

from bench.common import ROOT, FakeOllama, Figure, bench_environment, print_table
from pipeline.config import load_settings
from pipeline.evaluation import runner
from pipeline.evaluation.dataset import Dataset, GoldenItem, load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models import hosts as model_hosts
from pipeline.models.llm import LLM
from store.db import close_all, get_database

SECONDS_PER_TOKEN, SECONDS_PER_PROMPT_TOKEN, SLOTS = 0.025, 0.0005, 4
HOST_COUNTS, N_ITEMS = (1, 2, 4), 100
TWO_HOST_TARGET = 0.6
fake_ollama = sys.modules[FakeOllama.__module__]  # tests/fake_ollama/server.py, on the path bench.common sets


@dataclass
class Round:
    hosts: int
    items: int
    wall_s: float
    cpu_s: float  # this process, over the round
    fake_cpu_s: float  # the fake servers' request handlers
    requests: list[int]  # chat/generate requests served, per host
    failed: int


class HandlerClock:
    """CPU seconds spent in the fake servers' request handlers (patched in for the bench's lifetime)."""

    def __init__(self):
        self.seconds = 0.0
        self._serve = fake_ollama._Handler._serve

    def __enter__(self):
        clock = self

        def timed(handler):
            start = time.thread_time()
            try:
                return clock._serve(handler)
            finally:
                clock.seconds += time.thread_time() - start  # a float += under the GIL: no lost updates worth a lock

        for verb in ("do_GET", "do_HEAD", "do_POST", "do_DELETE"):
            setattr(fake_ollama._Handler, verb, timed)
        return self

    def __exit__(self, *exc):
        for verb in ("do_GET", "do_HEAD", "do_POST", "do_DELETE"):
            setattr(fake_ollama._Handler, verb, self._serve)


def golden_items(n: int) -> list[GoldenItem]:
    """The shipped golden set's items, cycled to n (ids made unique; questions unchanged)."""
    golden = load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items
    return [
        GoldenItem(
            id=f"{golden[i % len(golden)].id}#{i // len(golden)}",
            question=golden[i % len(golden)].question,
            reference=golden[i % len(golden)].reference,
            tags=golden[i % len(golden)].tags,
        )
        for i in range(n)
    ]


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(n_items: int = N_ITEMS, host_counts=HOST_COUNTS) -> list[Round]:
    items = golden_items(n_items)
    rounds = []
    with bench_environment(WORKBENCH_CACHE_ENABLED="false") as (first, folder), ExitStack() as stack:
        template = folder / "template.duckdb"
        os.environ["WORKBENCH_DB"] = str(template)
        settings = load_settings()
        db = get_database(settings)
        ingest([str(ROOT / "data" / "kb")], settings, db, LLM(settings, db))
        close_all()
        fakes = [first] + [stack.enter_context(FakeOllama()) for _ in range(max(host_counts) - 1)]
        clock = stack.enter_context(HandlerClock())
        for fake in fakes:
            fake.set_latency(SECONDS_PER_TOKEN, SLOTS, SECONDS_PER_PROMPT_TOKEN)
        for count in host_counts:
            rounds.append(one_round(folder, template, fakes[:count], items, clock))
    return rounds


def one_round(folder, template, fakes, items, clock: HandlerClock) -> Round:
    store = folder / f"hosts-{len(fakes)}.duckdb"
    shutil.copy(template, store)
    os.environ.update(
        WORKBENCH_DB=str(store),
        WORKBENCH_OLLAMA_HOSTS=",".join(f.url for f in fakes),
        WORKBENCH_OLLAMA_SLOTS_PER_HOST=str(SLOTS),
    )
    settings = load_settings()
    db = get_database(settings)
    model_hosts.forget_hosts()
    for fake in fakes:
        fake.clear()
    cpu, fake_cpu, start = process_cpu(), clock.seconds, time.perf_counter()
    outcome = runner.run_evaluation(
        settings, db, Dataset("golden", items), f"hosts-{len(fakes)}", concurrency=SLOTS * len(fakes)
    )
    wall = time.perf_counter() - start
    close_all()
    assert outcome.progress.done == len(items), outcome.progress
    served = [sum(r["path"] in fake_ollama.GENERATION_PATHS for r in fake.requests) for fake in fakes]
    return Round(
        len(fakes),
        len(items),
        wall,
        process_cpu() - cpu,
        clock.seconds - fake_cpu,
        served,
        outcome.progress.failed,
    )


def figures(rounds: list[Round]) -> list[Figure]:
    one = next((r for r in rounds if r.hosts == 1), None)
    out = []
    for r in rounds:
        note = (
            f"{r.items} items, concurrency {SLOTS * r.hosts}, {r.failed} failed; requests per host "
            f"{'/'.join(map(str, r.requests))}; CPU {r.cpu_s:.0f} s in {r.wall_s:.0f} s "
            f"({r.cpu_s / r.wall_s:.2f} cores), fake servers {r.fake_cpu_s:.1f} s of it"
        )
        out.append(Figure(f"evaluation on {r.hosts} host(s): wall time", r.wall_s, "s", note=note))
        if one is not None and r.hosts != 1:
            out.append(
                Figure(
                    f"evaluation on {r.hosts} hosts / on 1 host, wall time",
                    r.wall_s / one.wall_s,
                    "×",
                    TWO_HOST_TARGET if r.hosts == 2 else None,
                    note=f"{r.wall_s:.1f} s vs {one.wall_s:.1f} s",
                )
            )
    return out


def run(n_items: int = N_ITEMS, host_counts=HOST_COUNTS) -> list[Figure]:
    return figures(measure(n_items, host_counts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=N_ITEMS, help=f"evaluation items (default {N_ITEMS})")
    parser.add_argument("--hosts", default="1,2,4", help="host counts, comma-separated (default 1,2,4)")
    args = parser.parse_args(argv)
    counts = tuple(int(c) for c in args.hosts.split(","))
    if args.items < 1 or not counts or min(counts) < 1:
        parser.error("--items and every host count must be at least 1")
    print_table(run(args.items, counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
