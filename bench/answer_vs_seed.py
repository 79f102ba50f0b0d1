"""The verified engine vs a model of the seed pipeline it replaces, on one simulated Ollama (issue 13).

    python -m bench answer-vs-seed                      # 30 golden questions, both profiles
    python -m bench.answer_vs_seed --questions 5        # a quick run
    python -m bench.answer_vs_seed --stages             # and where each pipeline's time goes
    python -m bench.answer_vs_seed --answer-style quote # answers that quote the context verbatim

Both pipelines answer the first golden questions, each question on its own simulated server: the fake
Ollama with 4 parallel slots and 25 ms per output token, charging 0.5 ms per prompt token (GPU-like) and
then 5 ms (CPU-like). On a server the engine answers, then the seed; several servers (lanes) run side by
side only to keep the run short (the waits are sleeps, not CPU work).
The fake's generator paraphrases by default (`FakeOllama(answer_style="paraphrase")`): three sentences,
each joining two reworded context sentences, and its first answer to a question adds two unsupported
sentences (faithfulness about 6/8), its later ones do not; its memory is reset before each pipeline, so
both start from the same unfaithful first answer. `--answer-style quote` quotes context sentences instead.
Tokens are the fake's whitespace words. The seed (bench/seed_pipeline.py) gets the passages of the same
store and top_k the engine retrieves from; the response cache is off. The engine's first visible answer
text is its first "token" event (or, from an engine that does not stream, its "generate" event); its lag
is that event's time minus the send time of the generation request's first chunk, both perf_counter
times in this process.
"""

from __future__ import annotations

import argparse
import dataclasses
import queue
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field

import ollama

from bench import seed_pipeline
from bench.common import ROOT, FakeOllama, Figure, bench_environment, print_table
from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from pipeline.prompt_registry import all_prompts
from pipeline.verification.faithfulness import Passage, context_block
from store.db import get_database

SECONDS_PER_TOKEN, SLOTS, LANES = 0.025, 4, 15
PROFILES = (("GPU-like", 0.0005), ("CPU-like", 0.005))  # seconds per prompt token
WALL_TARGET, TOKEN_TARGET, LAG_TARGET_MS = 0.40, 0.8, 100
GENERATION_PATHS = ("/api/chat", "/api/generate")
KNOWN_PROMPTS = list(all_prompts().values())
SEED_STAGES = {seed_pipeline.GENERATE_SYSTEM: "generate", seed_pipeline.EXTRACT_SYSTEM: "extract_claims"}


@dataclass
class Sample:
    wall: float
    prompt_tokens: int
    calls: Counter  # model -> chat/generate requests
    visible: float | None = None  # question -> first visible answer text, seconds
    lag: float | None = None  # server sent the first answer chunk -> the engine showed it, seconds
    stages: list[tuple[str, float, float, int]] = field(default_factory=list)  # (stage, start, end, prompt tokens)
    retries: int = 0  # answers generated again after the first


def served(fake) -> tuple[int, Counter]:
    """Prompt tokens and calls by model of the chat/generate requests the fake has served since clear()."""
    done = [r for r in fake.requests if r["path"] in GENERATION_PATHS]
    return sum(r.get("prompt_tokens", 0) for r in done), Counter(r["model"].split(":")[0] for r in done)


def stage_of(request: dict) -> str:
    """The prompt a chat request was made from (the longest known system text it starts with), or the model."""
    messages = (request["body"] or {}).get("messages") or [{}]
    system = messages[0].get("content") or "" if messages[0].get("role") == "system" else ""
    known = [(len(p.system), p.name) for p in KNOWN_PROMPTS if system.startswith(p.system)]
    if known:
        return max(known)[1]
    return SEED_STAGES.get(system) or request["model"].split(":")[0]


def timeline(fake, start: float) -> list[tuple[str, float, float, int]]:
    """Each chat/generate request as (stage, received, done, prompt tokens), seconds after `start`."""
    return [
        (stage_of(r), r["received"] - start, r.get("done", r["received"]) - start, r.get("prompt_tokens", 0))
        for r in fake.requests
        if r["path"] in GENERATION_PATHS
    ]


def first_answer_chunk(fake, generator: str) -> float | None:
    """Send time of the first non-blank chunk of the first generation request (no `format`) to `generator`."""
    model = generator if ":" in generator else f"{generator}:latest"
    indexes = [
        i
        for i, r in enumerate(fake.requests)
        if r["path"] in GENERATION_PATHS and r["model"] == model and not (r["body"] or {}).get("format")
    ]
    if not indexes:
        return None
    sent = [t for request, _, t, text in fake.chunk_log if request == indexes[0] and text.strip()]
    return min(sent, default=None)


def ours(engine: VerifiedQueryEngine, fake, question: str) -> Sample:
    fake.clear()
    start = time.perf_counter()
    shown, retries = {}, 0
    for event in engine.stream(question):
        if event.kind in ("token", "generate"):
            shown.setdefault(event.kind, time.perf_counter())
        retries += event.kind == "retry"
    wall = time.perf_counter() - start
    tokens, calls = served(fake)
    sample = Sample(wall, tokens, calls, stages=timeline(fake, start), retries=retries)
    visible = shown.get("token", shown.get("generate"))
    sent = first_answer_chunk(fake, engine.settings.generator_model)
    if visible is not None:
        sample.visible = visible - start
        sample.lag = visible - sent if sent is not None else None
    return sample


def seed(client, retriever: DuckDBRetriever, fake, question: str) -> Sample:
    fake.clear()
    start = time.perf_counter()
    passages = [
        Passage(n, int(node.node.metadata["chunk_id"]), node.node.metadata["source"], node.node.get_content(), 0.0)
        for n, node in enumerate(retriever.retrieve(question), start=1)
    ]
    run = seed_pipeline.answer(client, question, context_block(passages))
    wall = time.perf_counter() - start
    tokens, calls = served(fake)
    assert calls == run.calls, (calls, run.calls)
    # the seed showed its answer once it was checked
    return Sample(wall, tokens, calls, visible=wall, stages=timeline(fake, start), retries=run.generations - 1)


def stage_lines(name: str, samples: list[Sample]) -> list[str]:
    """Per stage: calls and prompt tokens per question, seconds in the server per question (slot waits
    included), and when its first call arrives and its last one finishes (means over the questions that
    have the stage, seconds after the question)."""
    spans: dict[str, list] = {}
    for sample in samples:
        per_stage: dict[str, list] = {}
        for stage, start, end, tokens in sample.stages:
            per_stage.setdefault(stage, []).append((start, end, tokens))
        for stage, calls in per_stage.items():
            spans.setdefault(stage, []).append(calls)
    n = len(samples)
    lines = [f"{name}: wall {statistics.mean(s.wall for s in samples):.2f} s per question (mean)"]
    for stage, per_question_calls in sorted(
        spans.items(), key=lambda item: statistics.mean(min(c)[0] for c in item[1])
    ):
        calls = [c for q in per_question_calls for c in q]
        first = statistics.mean(min(c[0] for c in q) for q in per_question_calls)
        last = statistics.mean(max(c[1] for c in q) for q in per_question_calls)
        lines.append(
            f"  {stage:<24} {len(calls) / n:5.2f} calls  {sum(c[2] for c in calls) / n:7,.0f} prompt tokens  "
            f"{sum(c[1] - c[0] for c in calls) / n:6.2f} s in server  first in {first:5.2f} s, last out {last:5.2f} s"
        )
    return lines


def per_question(samples: list[Sample]) -> str:
    """Calls per question by model, and how often the answer was generated again."""
    models = Counter()
    for s in samples:
        models.update(s.calls)
    calls = ", ".join(f"{m} {n / len(samples):.2f}" for m, n in sorted(models.items()))
    retried = sum(s.retries > 0 for s in samples)
    return f"{calls}; regenerated on {retried}/{len(samples)} questions ({sum(s.retries for s in samples)} times)"


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def figures(profile: str, mine: list[Sample], base: list[Sample], targets: bool) -> list[Figure]:
    wall = sum(s.wall for s in mine) / sum(s.wall for s in base)
    tokens = sum(s.prompt_tokens for s in mine) / sum(s.prompt_tokens for s in base)
    lags = [s.lag * 1000 for s in mine if s.lag is not None]
    visible = [s.visible for s in mine if s.visible is not None]
    median_ratio = statistics.median(m.wall / b.wall for m, b in zip(mine, base, strict=True))
    out = [
        Figure(
            f"answer vs seed: wall time, total ({profile})",
            wall,
            "×",
            WALL_TARGET if targets else None,
            note=f"per question ours {statistics.median(s.wall for s in mine):.2f} s, "
            f"seed {statistics.median(s.wall for s in base):.2f} s (medians); median ratio {median_ratio:.2f}",
        ),
        Figure(
            f"answer vs seed: prompt tokens, total ({profile})",
            tokens,
            "×",
            TOKEN_TARGET if targets else None,
            note=f"per question ours {statistics.mean(s.prompt_tokens for s in mine):,.0f}, "
            f"seed {statistics.mean(s.prompt_tokens for s in base):,.0f} (means)",
        ),
        Figure(
            f"answer vs seed: LLM calls per question, ours ({profile})",
            statistics.mean(sum(s.calls.values()) for s in mine),
            "calls",
            note=per_question(mine),
        ),
        Figure(
            f"answer vs seed: LLM calls per question, seed ({profile})",
            statistics.mean(sum(s.calls.values()) for s in base),
            "calls",
            note=per_question(base),
        ),
    ]
    if lags:
        out.append(
            Figure(
                f"answer vs seed: first token sent -> shown, p95 ({profile})",
                p95(lags),
                "ms",
                LAG_TARGET_MS,
                note=f"max {max(lags):.0f} ms over {len(lags)} answers",
            )
        )
    if visible:
        out.append(
            Figure(
                f"answer vs seed: question -> first visible token, median ({profile})",
                statistics.median(visible),
                "s",
                note=f"p95 {p95(visible):.2f} s; the seed shows its answer after checking: "
                f"median {statistics.median(s.visible for s in base):.2f} s",
            )
        )
    return out


class Lane:
    """One simulated server with an engine, the seed's client and a retriever that talk to it."""

    def __init__(self, settings, db, fake: FakeOllama):
        self.fake = fake
        self.settings = dataclasses.replace(settings, ollama_host=fake.url)
        self.engine = VerifiedQueryEngine(settings=self.settings, db=db, kind="chat")
        self.retriever = DuckDBRetriever(LLM(self.settings, db), db, settings.top_k)
        self.client = ollama.Client(host=fake.url)

    def both(self, question: str) -> tuple[Sample, Sample]:
        self.fake.forget_answers()  # each pipeline gets the generator's unfaithful first answer
        mine = ours(self.engine, self.fake, question)
        self.fake.forget_answers()
        return mine, seed(self.client, self.retriever, self.fake, question)


def run_profile(lanes: list[Lane], questions: list[str], per_prompt_token: float) -> list[tuple[Sample, Sample]]:
    free: queue.Queue = queue.Queue()
    for lane in lanes:
        lane.fake.set_latency(SECONDS_PER_TOKEN, SLOTS, per_prompt_token)
        free.put(lane)

    def on_a_free_lane(question: str) -> tuple[Sample, Sample]:
        lane = free.get()
        try:
            return lane.both(question)
        finally:
            free.put(lane)

    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        return list(pool.map(on_a_free_lane, questions))


def measure(
    n_questions: int, lanes: int, answer_sentences: int = 2, answer_style: str = "paraphrase"
) -> dict[str, tuple[list[Sample], list[Sample]]]:
    """profile -> (the engine's samples, the seed's samples), one per question. `answer_style`: the fake
    generator's, "paraphrase" or "quote"; `answer_sentences`: how many context sentences it quotes."""
    out = {}
    with bench_environment(WORKBENCH_CACHE_ENABLED="false") as (fake, _), ExitStack() as stack:
        settings = load_settings()
        db = get_database(settings)
        ingest([str(ROOT / "data" / "kb")], settings, db, LLM(settings, db))
        questions = [item.question for item in load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items]
        questions = questions[:n_questions]
        servers = [
            stack.enter_context(FakeOllama(answer_sentences=answer_sentences, answer_style=answer_style))
            for _ in range(min(lanes, n_questions))
        ]
        pool = [Lane(settings, db, server) for server in servers]
        for lane in pool:
            lane.both(questions[0])  # warm-up, no latency
        for profile, per_prompt_token in PROFILES:
            mine, base = zip(*run_profile(pool, questions, per_prompt_token), strict=True)
            out[profile] = list(mine), list(base)
        for lane in pool:
            lane.client.close()
        db.close()
    return out


def run(n_questions: int = 30, lanes: int = LANES) -> list[Figure]:
    return to_figures(measure(n_questions, lanes))


def to_figures(measured: dict) -> list[Figure]:
    return [
        figure
        for profile, (mine, base) in measured.items()
        for figure in figures(profile, mine, base, targets=profile == PROFILES[0][0])
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.answer_vs_seed", description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=30, help="how many golden questions (default 30)")
    parser.add_argument("--lanes", type=int, default=LANES, help=f"simulated servers side by side (default {LANES})")
    parser.add_argument("--stages", action="store_true", help="also print where each pipeline's time goes")
    parser.add_argument(
        "--answer-style",
        choices=("paraphrase", "quote"),
        default="paraphrase",
        help="the fake generator's answers: reworded and joined context sentences, its first answer to each "
        "question with two unsupported ones (default), or context sentences quoted verbatim",
    )
    parser.add_argument(
        "--answer-sentences",
        type=int,
        default=2,
        help="with --answer-style quote: context sentences per answer (default 2); more = more claims",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.questions <= 30:
        parser.error("--questions takes 1 to 30")
    if args.lanes < 1 or args.answer_sentences < 1:
        parser.error("--lanes and --answer-sentences take 1 or more")
    start = time.perf_counter()
    measured = measure(args.questions, args.lanes, args.answer_sentences, args.answer_style)
    print_table(to_figures(measured))
    if args.stages:
        for profile, (mine, base) in measured.items():
            print(f"\n{profile}:")
            print("\n".join(stage_lines("ours", mine) + stage_lines("seed", base)))
    took = time.perf_counter() - start
    style = args.answer_style if args.answer_style == "paraphrase" else f"quote, {args.answer_sentences} sentences"
    print(f"({args.questions} questions, answers: {style}, {took:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
