"""The store at scale, timed through the functions the pages call: logging one run (the engine's save path),
a run's drilldown as the Runs page loads it, the Runs page's filter choices and queries, and the Trends
page's series. `python -m bench scale --runs N` (default 1,000,000); the synthetic store
(bench/scale_data.py) is built once into .bench/, one file per size and generator version."""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from datetime import datetime, timedelta, timezone

from bench.common import ROOT, Figure
from bench.scale_data import CALLS_PER_RUN, CHAT_STAGES, N_RUNS, VERSION, eval_runs_for, fill
from pipeline.history.runs import RunFilter, filter_choices, find_runs, load_run
from pipeline.regression.alerts import clean_runs, list_alerts, metric_series, pinned_baseline
from store.db import Database
from store.journal import save_run
from store.llm_log import cache_get
from store.records import (
    AttemptRecord,
    CacheEntry,
    ClaimRecord,
    GradeRecord,
    LLMCallRecord,
    RetrievalRecord,
    RunLog,
    RunRecord,
    SpanRecord,
)

T0 = datetime(2025, 1, 1)
FILTERS = {
    "no filter, page 1": (RunFilter(), 1),
    "no filter, page 2,000": (RunFilter(), 2000),
    "status flagged": (RunFilter(statuses=["flagged"]), 1),
    "kind chat + model qwen2.5 + faithfulness 0.2-0.4": (
        RunFilter(kinds=["chat"], models=["qwen2.5"], faithfulness_min=0.2, faithfulness_max=0.4),
        3,
    ),
    "date range of one week": (RunFilter(since=T0 + timedelta(days=10), until=T0 + timedelta(days=17)), 1),
    "tag multi-hop": (RunFilter(tags=["multi-hop"]), 1),
}
TEXT_FILTERS = {
    "text 'retrieval'": (RunFilter(text="retrieval"), 1),
    "text 'hallucination' + status accepted": (RunFilter(text="hallucination", statuses=["accepted"]), 1),
    "text that matches nothing": (RunFilter(text="zzzyzzx"), 1),
}


def parse_runs(args: list[str]) -> tuple[list[str], int]:
    """(args without `--runs N`, N): the store size `python -m bench scale --runs N` asks for."""
    if "--runs" not in args:
        return args, N_RUNS
    at = args.index("--runs")
    value = args[at + 1] if at + 1 < len(args) else ""
    if not value.replace("_", "").isdigit() or int(value) < 1000:
        raise SystemExit(f"--runs takes a whole number of runs, at least 1000 (got {value!r}): --runs 100000")
    return args[:at] + args[at + 2 :], int(value)


def store_path(n_runs: int):
    return ROOT / ".bench" / f"scale-{n_runs}-v{VERSION}.duckdb"


def ready_store(n_runs: int) -> tuple[Database, dict]:
    """The filled store of this size, built first when there is none; with what building it took."""
    path = store_path(n_runs)
    info_path = path.with_suffix(".json")
    if not path.exists() or not info_path.exists():
        path.parent.mkdir(exist_ok=True)
        for stale in path.parent.glob(f"scale-{n_runs}-v*"):  # an unfinished build or an older layout
            stale.unlink()
        print(f"building the {n_runs:,}-run store in {path} (once)…", flush=True)
        building = Database(str(path), 10, 3600)
        start = time.perf_counter()
        fill(building, n_runs, log=lambda line: print(line, flush=True))
        building.close()
        info_path.write_text(json.dumps({"build_s": time.perf_counter() - start}))
    return Database(str(path), 10, 3600), json.loads(info_path.read_text())


def timed(fn, args: list) -> tuple[float, float]:
    """(median, p95) in ms of fn over args, one call each, after one warm-up call."""
    fn(args[0])
    samples = []
    for arg in args:
        start = time.perf_counter()
        fn(arg)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), statistics.quantiles(samples, n=20)[18]


def words(rng: random.Random, n: int) -> str:
    vocabulary = ["retrieval", "chunk", "passage", "answer", "claim", "model", "score", "context", "index", "query"]
    return " ".join(rng.choices(vocabulary, k=n))


def sample_log(i: int) -> RunLog:
    """A chat run as the engine logs it: 5 retrievals, a grade, an attempt with 8 claims, 15 model calls with
    their texts (prompts as big as the real ones, with five passages; the verifier's verdicts repeat texts
    already stored) and 20 spans."""
    rng = random.Random(i)
    now = datetime.now(timezone.utc)
    question = f"Question {i}: how does {words(rng, 8)} work?"
    answer = " ".join(f"Sentence {k} about {words(rng, 12)}." for k in range(8))
    passages = "\n\n".join(f"[{k}] {words(rng, 250)}" for k in range(1, 6))
    run = RunRecord(
        kind="chat",
        question=question,
        status="accepted",
        started_at=now,
        answer=answer,
        faithfulness=1.0,
        n_claims=8,
        n_supported=8,
        n_attempts=1,
        final_attempt=1,
        generator_model="llama3.2",
    )
    run.config, run.finished_at, run.latency_ms = {"top_k": 5, "model": "llama3.2"}, now, 4200.0
    claims = [ClaimRecord(1, c, f"Claim {c}: {words(rng, 14)}.", "supported", "bespoke-minicheck", 1, 0, 90, "")
              for c in range(1, 9)]  # fmt: skip
    prompts = {
        "embed_query": question,
        "grade_context": f"Grade these passages for: {question}\n\n{passages}",
        "generate": f"Answer from these passages: {question}\n\n{passages}",
        "extract_claims": f"Split into claims: {answer}",
        "verify": "Does the passage support the claim?",
    }
    spans = [SpanRecord(f"span-{i}-{k}", None if k == 0 else f"span-{i}-{(k - 1) // 3}", f"step {k}", now, 12.5,
                        attributes={"step": k}) for k in range(20)]  # fmt: skip
    calls = []
    for c, stage in enumerate(CHAT_STAGES[:CALLS_PER_RUN]):
        prompt = prompts[stage] + (f"\n\nClaim: {claims[c % 8].text}\n\n{passages[:1200]}" if stage == "verify" else "")
        completion = '{"verdict": "supported", "confidence": 0.00}' if stage == "verify" else words(rng, 60)
        calls.append(
            LLMCallRecord(stage, "llama3.2", "sha256:0123", f"{i:08x}{c:08x}", 900, 120, 350.0, False, None, now,
                          "chat", "ollama", prompt, completion, spans[2 + c].span_id)
        )  # fmt: skip
    return RunLog(
        run,
        grades=[GradeRecord(1, question, True, "relevant")],
        retrievals=[RetrievalRecord(1, question, k, k, 0.9 - k / 10, k == 1) for k in range(1, 6)],
        attempts=[AttemptRecord(1, False, answer, "verified", 1.0, 8, 8)],
        claims=claims,
        calls=calls,
        cache_entries=[CacheEntry(f"key-{i}-{k}", "llama3.2", "sha256:0123", {"message": "x"}) for k in range(4)],
        spans=spans,
    )


def first_save(db: Database, log: RunLog, size: str, cmd: str) -> list[Figure]:
    """The first save in a process also reads which call texts the store holds, the first cache lookup which
    cache keys it holds (store/key_index.py)."""
    start = time.perf_counter()
    save_run(db, log)
    saved = time.perf_counter() - start
    start = time.perf_counter()
    cache_get(db, "a key never stored")
    looked_up = time.perf_counter() - start
    texts, cache = db.indexes.texts, db.indexes.cache
    return [
        Figure(f"first run logged in a process (loads the text index), {size}", saved, "s",
               note=f"{len(texts):,} texts in memory, {texts.nbytes / 2**20:.0f} MiB; {cmd}"),
        Figure(f"first cache lookup in a process (loads the cache-key index), {size}", looked_up, "s",
               note=f"{len(cache):,} cache keys in memory, {cache.nbytes / 2**20:.0f} MiB; {cmd}"),
    ]  # fmt: skip


def trends_reads(db: Database) -> None:
    """What the Trends page reads to draw: the series, which runs may be a baseline, the pin, the open alerts."""
    series = metric_series(db)
    clean_runs(db, sorted({row["eval_run_id"] for row in series}))
    pinned_baseline(db, "golden.jsonl")
    list_alerts(db, "open")


def run(n_runs: int = N_RUNS) -> list[Figure]:
    db, info = ready_store(n_runs)
    cmd = f"python -m bench scale --runs {n_runs}"
    size = f"{n_runs:,} runs"
    figures = [Figure(f"store build time, {size}", info["build_s"] / 60, "min", note=f"{cmd} (built once)")]
    rng = random.Random(5)
    ids = rng.sample(range(1, n_runs + 1), 40)
    # new questions each time the benchmark runs (their prompts are new texts), built before the clock starts
    first = random.randrange(10**9)
    logs = [sample_log(first + k) for k in range(41)]
    figures += first_save(db, logs.pop(), size, cmd)
    pairs = {
        f"logging one run, {size} (median)": timed(lambda log: save_run(db, log), logs),
        f"drilldown of one run as the Runs page loads it, {size} (median)": timed(lambda i: load_run(db, i), ids),
        f"Runs page filter choices, {size} (median)": timed(lambda _: filter_choices(db), [0] * 20),
        f"Trends page series and baseline reads, {size} (median)": timed(lambda _: trends_reads(db), [0] * 20),
    }
    notes = [
        "store.journal.save_run (the engine's save): run, grade, 5 retrievals, attempt, 8 claims, "
        "15 calls with texts, 20 spans",
        "pipeline.history.runs.load_run on 40 random runs",
        "pipeline.history.runs.filter_choices: kinds, statuses, models, tags",
        f"metric_series + clean_runs + pinned + open alerts over {eval_runs_for(n_runs)} evaluation runs",
    ]
    for (name, (median, p95)), target, note in zip(pairs.items(), (10, 20, 100, 100), notes, strict=True):
        figures.append(Figure(name, median, "ms", target, note=f"p95 {p95:.1f} ms; {note}; {cmd}"))
    figures += runs_page_figures(db, size, cmd)
    db.close()
    path = store_path(n_runs)
    on_disk = sum(os.path.getsize(f"{path}{s}") for s in ("", ".wal") if os.path.exists(f"{path}{s}"))
    figures.append(Figure(f"store size on disk, {size}", on_disk / 2**30, "GiB", note=cmd))
    return figures


def runs_page_figures(db: Database, size: str, cmd: str) -> list[Figure]:
    def worst(filters: dict, repeat: int) -> tuple[str, float, list[float]]:
        medians = {
            name: timed(lambda fp: find_runs(db, *fp, 50), [(f, p)] * repeat)[0] for name, (f, p) in filters.items()
        }
        name = max(medians, key=medians.get)
        return name, medians[name], list(medians.values())

    figures = []
    for label, filters, target, repeat in (
        ("without", FILTERS, 100, 9),
        ("with", TEXT_FILTERS, 500, 5),
    ):
        name, value, values = worst(filters, repeat)
        note = f"worst: {name}; all: {', '.join(f'{v:.0f}' for v in values)}; {cmd}"
        figures.append(Figure(f"Runs page query {label} text search, {size} (worst filter, median)", value, "ms",
                              target, note=note))  # fmt: skip
    return figures


if __name__ == "__main__":
    import sys

    from bench.common import print_table

    print_table(run(parse_runs(sys.argv[1:])[1]))
