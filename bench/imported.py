"""Scoring answers written elsewhere: the workbench against Ragas's Faithfulness, on the same rows and server.

`python -m bench.imported` (default 1,000 rows; `--rows 50` for a quick run) builds rows (question, answer,
contexts) from the RAGTruth development sets in ../shared/datasets (QA, then summaries, then data-to-text, each
in file order, until there are enough; a context is split into passages at blank lines, a long paragraph into
runs of sentences), writes them as JSONL to a temporary folder and scores them twice on one fake Ollama with its
latency model on, one side after the other:

- Ragas: `Faithfulness` (statements from the answer, then a verdict per statement) through Ragas's LangChain
  wrapper around `ChatOllama`, at RunConfig(max_workers=4). Ragas's pins clash with the workbench's, so it runs
  from its own virtual environment (`python3 -m venv .venv-ragas && .venv-ragas/bin/pip install -r
  requirements-bench.txt`; RAGAS_PYTHON names another interpreter) in a subprocess;
- the workbench: the same rows loaded by `load_dataset` and scored by the evaluation runner with only the
  faithfulness metric at concurrency 4, the given answers checked without retrieval or generation, the cache off.

Both sides are counted the same way, from the fake's request log: model calls (chat and generate requests) and
their prompt tokens (whitespace words of the prompt), per row; wall time is the scoring alone (Ragas's import
and the store's set-up are outside it). The latency model is "gpu" (as `bench/answer_vs_seed.py` and
`bench/hosts.py`: 25 ms per output token, 0.5 ms per prompt token, 4 slots) or "fast" (as `bench/evaluation.py`:
2 ms per output token, no prompt cost, 4 slots), printed with the figures.

Targets (issue 48): the workbench's wall time ≤ 0.5× Ragas's, its prompt tokens ≤ 1.0× Ragas's. Beside the
workbench's wall time, the floor: one read of every row (its question, contexts and answer as one prompt, a
one-word reply) on the same latency model, the rows spread evenly over the slots; no checker that reads each row
can finish sooner.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, Figure, bench_environment, print_table

DATASETS = ROOT.parent / "shared" / "datasets"
SOURCES = ("ragtruth_qa_dev.jsonl", "ragtruth_summary_dev.jsonl", "ragtruth_data2txt_dev.jsonl")
ROWS = 1000
CONCURRENCY = 4
MODEL = "llama3.2"
# name: (seconds per output token, seconds per prompt token, slots, what it is)
LATENCIES = {
    "gpu": (0.025, 0.0005, 4, "GPU-like, as bench/answer_vs_seed.py: 25 ms/output token, 0.5 ms/prompt token, 4 slots"),
    "fast": (0.002, 0.0, 4, "fast, as bench/evaluation.py: 2 ms/output token, no prompt cost, 4 slots"),
}
RAGAS_VENV = ROOT / ".venv-ragas"
PASSAGE_WORDS = 120  # a paragraph longer than this is cut into runs of sentences of about this many words
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
GENERATION_PATHS = ("/api/chat", "/api/generate")
WALL_TARGET, TOKEN_TARGET = 0.5, 1.0  # workbench / Ragas


# ---------------------------------------------------------------- rows


def split_context(context: str, max_words: int = PASSAGE_WORDS) -> list[str]:
    """A context as passages: its paragraphs (blank-line separated), a paragraph over `max_words` words cut into
    runs of whole sentences of at most about that many words. Every word of the context is in one passage."""
    passages = []
    for paragraph in re.split(r"\n\s*\n", context):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph.split()) <= max_words:
            passages.append(paragraph)
            continue
        run: list[str] = []
        for sentence in _SENTENCE_END.split(paragraph):
            if run and len(" ".join(run + [sentence]).split()) > max_words:
                passages.append(" ".join(run))
                run = []
            run.append(sentence)
        if run:
            passages.append(" ".join(run))
    return passages


def build_rows(n: int, datasets: Path = DATASETS) -> list[dict]:
    """The first `n` rows {id, question, answer, contexts} of SOURCES, in order (rows without an answer or a
    context are passed over)."""
    rows: list[dict] = []
    for name in SOURCES:
        with open(datasets / name, encoding="utf-8") as lines:
            for line in lines:
                if len(rows) >= n:
                    return rows
                record = json.loads(line)
                contexts = split_context(record.get("context") or "")
                answer = (record.get("answer") or "").strip()
                if not contexts or not answer:
                    continue
                rows.append(
                    {"id": record["id"], "question": record["question"], "answer": answer, "contexts": contexts}
                )
    if len(rows) < n:
        raise SystemExit(f"only {len(rows)} rows in {', '.join(SOURCES)} under {datasets}; asked for {n}")
    return rows


def write_rows(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


# ---------------------------------------------------------------- counting


@dataclass
class Side:
    name: str
    rows: int
    wall_s: float
    calls: int
    prompt_tokens: int
    by_model: dict[str, int]
    scored: int  # rows with a score
    mean: float  # mean faithfulness over the scored rows
    note: str = ""
    processed_tokens: int | None = None  # prompt tokens the server processed (not held by its prompt cache)

    @property
    def calls_per_row(self) -> float:
        return self.calls / self.rows

    @property
    def tokens_per_row(self) -> float:
        return self.prompt_tokens / self.rows

    @property
    def processed(self) -> int:
        """Prompt tokens the server processed: all of them without a prompt cache."""
        return self.prompt_tokens if self.processed_tokens is None else self.processed_tokens


def count_calls(records: list[dict]) -> tuple[int, int, dict[str, int]]:
    """(model calls, prompt tokens, calls by model) over the fake's request records: its chat and generate
    requests, each with the prompt_tokens the fake counted (0 for one that failed before it was answered)."""
    calls = [r for r in records if r.get("path") in GENERATION_PATHS]
    by_model: dict[str, int] = {}
    for record in calls:
        by_model[record.get("model") or "?"] = by_model.get(record.get("model") or "?", 0) + 1
    return len(calls), sum(r.get("prompt_tokens") or 0 for r in calls), dict(sorted(by_model.items()))


def processed_tokens(records: list[dict]) -> int:
    """Prompt tokens the fake processed over its chat and generate requests: each one's prompt_tokens less the
    leading ones its slot's prompt cache held (cached_tokens, 0 without the cache)."""
    calls = [r for r in records if r.get("path") in GENERATION_PATHS]
    return sum((r.get("prompt_tokens") or 0) - (r.get("cached_tokens") or 0) for r in calls)


def measured(fake, name: str, rows: int, score) -> Side:
    """Run score() -> (wall_s, scored, mean, note) and count the calls it made on `fake`."""
    first = len(fake.requests)
    wall_s, scored, mean, note = score()
    records = fake.requests[first:]
    calls, tokens, by_model = count_calls(records)
    processed = processed_tokens(records) if fake.prompt_cache else None
    return Side(name, rows, wall_s, calls, tokens, by_model, scored, mean, note, processed)


def one_read_floor(rows: list[dict], latency: str) -> float:
    """Seconds for the fake, under `latency`, to read every row once (question, contexts and answer as one
    prompt, in whitespace words as the fake counts them) and reply with one word, the rows spread evenly over
    its slots."""
    per_token, per_prompt_token, slots, _ = LATENCIES[latency]
    words = sum(len(" ".join([r["question"], *r["contexts"], r["answer"]]).split()) for r in rows)
    return (words * per_prompt_token + len(rows) * per_token) / slots


@dataclass
class SentenceFloor:
    """What scoring the rows costs when every sentence holds: one verifier call per answer sentence against the
    row's whole context (the workbench's first pass on an answer without citations), a one-word reply."""

    wall_s: float  # the calls spread evenly over the slots
    calls: int
    prompt_tokens: int
    processed_tokens: int  # with a prompt cache held across a row's sentences: its document read once


def sentence_floor(rows: list[dict], latency: str, prompt_cache: bool = False) -> SentenceFloor:
    """The SentenceFloor of `rows` under `latency`: their sentences as the workbench splits and checks them (meta
    statements left out, citations dropped), each in bespoke-minicheck's format against the row's contexts laid
    out as the workbench lays them out, in whitespace words as the fake counts them."""
    from pipeline.evaluation.given import given_passages
    from pipeline.text import is_meta_statement, sentences
    from pipeline.verification.claims import context_block
    from pipeline.verification.sentence_first import sentence_claim
    from pipeline.verification.yes_no import verifier_input

    per_token, per_prompt_token, slots, _ = LATENCIES[latency]
    calls = tokens = processed = 0
    for row in rows:
        document = context_block(given_passages(row["contexts"]))
        held = len(verifier_input(document, "").split())
        claims = [sentence_claim(s.text) for s in sentences(row["answer"]) if not is_meta_statement(s.text)]
        for n, claim in enumerate(claims):
            words = len(verifier_input(document, claim).split())
            calls, tokens = calls + 1, tokens + words
            processed += words - (held if prompt_cache and n else 0)
    read = processed if prompt_cache else tokens
    return SentenceFloor((read * per_prompt_token + calls * per_token) / slots, calls, tokens, processed)


# ---------------------------------------------------------------- Ragas (in its own interpreter)


def ragas_python() -> str | None:
    """The interpreter that has Ragas: $RAGAS_PYTHON, else .venv-ragas's; None if neither exists."""
    given = os.environ.get("RAGAS_PYTHON")
    if given:
        return given
    python = RAGAS_VENV / "bin" / "python"
    return str(python) if python.exists() else None


def ragas_worker(rows_path: str, url: str, out_path: str) -> None:
    """In the Ragas interpreter: score the rows with Faithfulness against the Ollama at `url`; write
    {wall_s, scored, mean, errors} to out_path."""
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from langchain_ollama import ChatOllama
    from ragas import EvaluationDataset, evaluate
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness
    from ragas.run_config import RunConfig

    rows = [json.loads(line) for line in Path(rows_path).read_text(encoding="utf-8").splitlines() if line.strip()]
    dataset = EvaluationDataset.from_list(
        [{"user_input": r["question"], "response": r["answer"], "retrieved_contexts": r["contexts"]} for r in rows]
    )
    llm = LangchainLLMWrapper(ChatOllama(model=MODEL, base_url=url, temperature=0))
    run_config = RunConfig(max_workers=CONCURRENCY, timeout=600)
    start = time.perf_counter()
    result = evaluate(dataset, metrics=[Faithfulness()], llm=llm, run_config=run_config, show_progress=False)
    wall_s = time.perf_counter() - start
    scores = [s.get("faithfulness") for s in result.scores]
    valid = [float(s) for s in scores if s is not None and not math.isnan(float(s))]
    out = {"wall_s": wall_s, "scored": len(valid), "mean": sum(valid) / len(valid) if valid else float("nan")}
    Path(out_path).write_text(json.dumps(out), encoding="utf-8")


def score_ragas(python: str, rows_path: Path, url: str, folder: Path):
    out = folder / "ragas.json"
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "PYTHONPATH": str(ROOT)}
    cmd = [python, "-m", "bench.imported", "--ragas-worker", str(rows_path), url, str(out)]
    started = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    outer = time.perf_counter() - started
    got = json.loads(out.read_text(encoding="utf-8"))
    note = f"subprocess {outer:.1f} s with Ragas's import"
    return got["wall_s"], got["scored"], got["mean"], note


# ---------------------------------------------------------------- the workbench


def scores_given_answers() -> bool:
    """Whether this checkout's evaluation runner scores given answers (`run_evaluation(..., pipeline=...)`)."""
    from pipeline.evaluation import runner

    return "pipeline" in inspect.signature(runner.run_evaluation).parameters


def score_ours(rows_path: Path):
    from pipeline.config import load_settings
    from pipeline.evaluation import runner
    from pipeline.evaluation.dataset import load_dataset
    from store import evals
    from store.db import get_database

    settings = load_settings()
    db = get_database(settings)
    try:
        dataset = load_dataset(rows_path)
        start = time.perf_counter()
        outcome = runner.run_evaluation(
            settings, db, dataset, "imported", concurrency=CONCURRENCY, metrics=["faithfulness"], pipeline="bench"
        )
        wall_s = time.perf_counter() - start
        summary = {m["metric"]: m for m in evals.metric_summary(db, outcome.eval_run_id)}.get("faithfulness", {})
    finally:
        db.close()
    note = f"{outcome.status}; {outcome.progress.done} done, {outcome.progress.failed} failed"
    return wall_s, int(summary.get("n") or 0), float(summary.get("mean") or math.nan), note


# ---------------------------------------------------------------- the benchmark


def compare(
    n_rows: int = ROWS, latency: str = "gpu", prompt_cache: bool = False, only: str | None = None
) -> tuple[list[Side], str, dict]:
    """Both sides on one fake Ollama (Ragas first, then the workbench), or `only` one of them; [] sides that cannot
    run, with why; and the rows' floors ({"one read": one_read_floor, "sentences": sentence_floor}).
    `prompt_cache`: the fake keeps a prompt cache per slot, as Ollama's runner does, and each side's processed
    prompt tokens are counted too."""
    per_token, per_prompt_token, slots, described = LATENCIES[latency]
    if prompt_cache:
        described += ", prompt cache"
    python = ragas_python() if only in (None, "Ragas") else None
    ours = scores_given_answers() if only in (None, "workbench") else False
    missing = []
    if python is None and only in (None, "Ragas"):
        missing.append(
            "Ragas is not installed (python3 -m venv .venv-ragas && .venv-ragas/bin/pip install -r "
            "requirements-bench.txt)"
        )
    if not ours and only in (None, "workbench"):
        missing.append("this checkout's evaluation runner does not score given answers yet")
    sides = []
    # the workbench is told the fake's slots (ollama_slots_per_host), as it reads them from a warm GPU host's
    # loaded models; a cold fake reports none loaded for the first minute
    with bench_environment(WORKBENCH_CACHE_ENABLED="false", WORKBENCH_OLLAMA_SLOTS_PER_HOST=str(slots)) as (
        fake,
        folder,
    ):
        rows = build_rows(n_rows)
        rows_path = write_rows(rows, folder / "rows.jsonl")
        fake.set_latency(per_token, slots=slots, seconds_per_prompt_token=per_prompt_token)
        fake.prompt_cache = prompt_cache
        if python is not None:
            sides.append(measured(fake, "Ragas", n_rows, lambda: score_ragas(python, rows_path, fake.url, folder)))
        if ours:
            sides.append(measured(fake, "workbench", n_rows, lambda: score_ours(rows_path)))
    floors = {"one read": one_read_floor(rows, latency), "sentences": sentence_floor(rows, latency, prompt_cache)}
    return sides, "; ".join([described] + missing), floors


def save_sides(sides: list[Side], note: str, path: Path) -> None:
    """The measured sides and their latency note, as JSON (`--save`)."""
    payload = {"note": note, "sides": [dataclasses.asdict(side) for side in sides]}
    path.write_text(json.dumps(payload, indent=1), encoding="utf-8")


def load_sides(path: Path, n_rows: int, note: str) -> list[Side]:
    """Sides saved by an earlier run (`--with`); refused unless it scored as many rows on the same latency model
    and prompt cache (its note's first part)."""
    payload = json.loads(path.read_text(encoding="utf-8"))
    sides = [Side(**side) for side in payload["sides"]]
    setup, saved_setup = note.split("; ")[0], payload["note"].split("; ")[0]
    if any(side.rows != n_rows for side in sides) or setup != saved_setup:
        raise SystemExit(
            f"{path} was measured on {sides[0].rows if sides else '?'} rows with {saved_setup!r}; this run is "
            f"{n_rows} rows with {setup!r}: measure both sides the same way"
        )
    return sides


def figures(
    sides: list[Side], n_rows: int, note: str, floor_s: float | None = None, sentences: SentenceFloor | None = None
) -> list[Figure]:
    """Per side: wall time, calls and prompt tokens per row; beside the workbench's wall time its floors (`floor_s`,
    one_read_floor; `sentences`, sentence_floor); with both sides, the ratios workbench / Ragas with their targets.
    `note` (the latency model, and why a side is missing) goes with the first figure."""
    out = []
    for side in sides:
        if side.name == "workbench" and floor_s:
            out.append(
                Figure(
                    f"floor: one read of every row, {side.rows} rows",
                    floor_s,
                    "s",
                    note=f"the workbench's wall time is {side.wall_s / floor_s:.1f}× it",
                )
            )
        if side.name == "workbench" and sentences:
            out += [
                Figure(
                    f"floor: one verifier call per sentence, {side.rows} rows",
                    sentences.wall_s,
                    "s",
                    note=f"the workbench's wall time is {side.wall_s / sentences.wall_s:.2f}× it; "
                    f"{sentences.calls / side.rows:.2f} calls per row",
                ),
                Figure(
                    "floor: one verifier call per sentence, prompt tokens per row",
                    sentences.prompt_tokens / side.rows,
                    "tokens",
                    note=f"{sentences.processed_tokens / side.rows:,.0f} processed with a prompt cache",
                ),
            ]
        models = ", ".join(f"{m} {c / side.rows:.2f}" for m, c in side.by_model.items())
        out += [
            Figure(
                f"{side.name}: wall time, {side.rows} rows",
                side.wall_s,
                "s",
                note=f"faithfulness {side.mean:.3f} on {side.scored}/{side.rows} rows; {side.note}",
            ),
            Figure(f"{side.name}: model calls per row", side.calls_per_row, "calls", note=models),
            Figure(f"{side.name}: prompt tokens per row", side.tokens_per_row, "tokens"),
        ]
        if side.processed_tokens is not None:
            out.append(
                Figure(
                    f"{side.name}: prompt tokens processed per row",
                    side.processed_tokens / side.rows,
                    "tokens",
                    note="not held by the server's prompt cache",
                )
            )
    named = {side.name: side for side in sides}
    if {"Ragas", "workbench"} <= named.keys():
        ours, ragas = named["workbench"], named["Ragas"]
        out += [
            Figure("workbench / Ragas: wall time", ours.wall_s / ragas.wall_s, "×", WALL_TARGET),
            Figure(
                "workbench / Ragas: prompt tokens",
                ours.prompt_tokens / max(1, ragas.prompt_tokens),
                "×",
                TOKEN_TARGET,
            ),
        ]
        if ours.processed_tokens is not None and ragas.processed_tokens is not None:
            out.append(
                Figure(
                    "workbench / Ragas: prompt tokens processed",
                    ours.processed / max(1, ragas.processed),
                    "×",
                    TOKEN_TARGET,
                )
            )
    if not out:
        return [Figure(f"imported, {n_rows} rows: skipped", math.nan, "", note=note)]
    out[0].note = f"{note}; {out[0].note}"
    return out


def run(
    n_rows: int = ROWS,
    latency: str = "gpu",
    prompt_cache: bool = False,
    only: str | None = None,
    save: Path | None = None,
    earlier: Path | None = None,
) -> list[Figure]:
    """The figures of one run (`only`: one side); `save` writes its sides as JSON, `earlier` adds the sides an
    earlier run saved (the other side, measured alone on the same rows and latency model)."""
    sides, note, floors = compare(n_rows, latency, prompt_cache, only)
    if save is not None:
        save_sides(sides, note, save)
    if earlier is not None:
        sides = sorted(sides + load_sides(earlier, n_rows, note), key=lambda side: side.name != "Ragas")
    return figures(sides, n_rows, note, floors["one read"], floors["sentences"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--ragas-worker"]:
        ragas_worker(*argv[1:4])
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.imported", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=ROWS, help=f"rows to score (default {ROWS})")
    parser.add_argument("--latency", choices=sorted(LATENCIES), default="gpu", help="the fake's latency model")
    parser.add_argument(
        "--prompt-cache",
        action="store_true",
        help="the fake keeps a prompt cache per slot, as Ollama does; processed prompt tokens are counted too",
    )
    parser.add_argument("--only", choices=("Ragas", "workbench"), help="measure one side only")
    parser.add_argument("--save", type=Path, help="write the measured sides to this JSON file")
    parser.add_argument(
        "--with",
        dest="earlier",
        type=Path,
        help="compare with the sides an earlier run saved (--save) on the same rows and latency model",
    )
    args = parser.parse_args(argv)
    print_table(run(args.rows, args.latency, args.prompt_cache, args.only, args.save, args.earlier))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
