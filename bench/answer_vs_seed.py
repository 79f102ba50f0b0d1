"""The verified engine vs a model of the seed pipeline it replaces, on four simulated Ollama servers (issues 13, 30).

    python -m bench answer-vs-seed                      # 30 golden questions, all four profiles
    python -m bench.answer_vs_seed --questions 5        # a quick run
    python -m bench.answer_vs_seed --stages             # and where each pipeline's time goes
    python -m bench.answer_vs_seed --answer-style quote # answers that quote the context verbatim
    python -m bench.answer_vs_seed --seed-retrieval ours  # the seed given the engine's passages instead
    python -m bench.answer_vs_seed --unfaithful-share 1   # every first answer unfaithful (before issue 48)

Both pipelines answer the first golden questions, each question on its own simulated server, the fake Ollama
(tests/fake_ollama/), under four profiles in turn (PROFILES): "GPU-like", 4 slots, 25 ms per output token,
0.5 ms per prompt token; "CPU-like", 4 slots, 25 ms and 5 ms; "laptop", 1 slot, 60 ms and 5 ms; "laptop, prompt
cache", the same with the fake's per-slot prompt cache on (a request is charged prompt time only for the words
after the longest common prefix with its slot's previous prompt for that model). The engine is told the server's
slots (`ollama_slots_per_host`, a new engine per profile). Each pipeline starts each question on a fresh slot pool
(empty caches), so neither inherits the other's or an earlier question's cache. On a server the engine answers,
then the seed; several servers (lanes) run side by side only to keep the run short (the waits are sleeps, not
CPU work).
The seed retrieves with its own index by default (`--seed-retrieval own`, bench/seed_pipeline.py `SeedIndex`):
the same files in data/kb split into chunks of at most 500 characters, the top 3 by cosine similarity of the
embedding model's vectors (the question's embedding call is in the seed's wall time; embeddings are instant on
the fake and are not prompt tokens). `--seed-retrieval ours`: the seed gets the passages of the engine's store
and top_k, as before issue 30.
The fake's generator paraphrases by default (`FakeOllama(answer_style="paraphrase")`): three sentences,
each joining two reworded context sentences (never a source sentence verbatim), its later answers to a question
faithful. On `--unfaithful-share` of the questions (default one in three, about RAGTruth's rate for QA answers;
every third question, spread evenly: `unfaithful_first`) its first answer adds two unsupported sentences
(faithfulness about 6/8); on the others the first answer is already faithful. Its memory is reset before each
pipeline, so both start from the same first answer. `--answer-style quote` quotes context sentences instead.
The response cache is off. Per profile, the four targets of issue 48 first:
- wall time: the sum over questions of ours / the seed's (target ≤ 0.45), with per-question medians;
- the checked answer shown: ours' Decided (or Abstained) event over the seed's wall (reported; what follows it is
  the store write and, for rejected claims, the contradicted-or-unsupported classification);
- the seed's own first answer over its checked answer (reported): the wall ratio of a pipeline that generated the
  seed's answers and checked them at no cost, to read beside the 0.45 target;
- the floor: the engine's own grade plus first answer, when the server finished its first generation call
  (the grade before it), from the run's own request timings; reported beside the wall time, and on the
  questions whose first answer is faithful, the sum of ours' wall over the sum of that floor (target ≤ 1.25);
- prompt tokens: the fake's whitespace words of the /api/chat and /api/generate prompts (with the prompt cache:
  only the words processed, not the reused ones), sum of ours / the seed's (target ≤ 1.0), also on the questions
  whose first answer is faithful and on the others;
- first shown answer text: the engine's first "token" event (or, from an engine that does not stream, its
  "generate" event), seconds after the question; the seed shows its answer only once checked, so its time is
  its wall time; the figure is the median over questions of ours / the seed's (target ≤ 0.15);
- first verified sentence: the engine's first "sentence" event with claims and no error; the seed's wall time;
  the median over questions of ours / the seed's (reported);
- first answer generated: when the server finished the engine's first generation call, over the seed's wall time
  (reported): a floor under the wall-time figure, as no check can finish before the answer it checks exists;
- LLM calls per question, each pipeline (reported);
- GPU-like only: the lag from the server sending the generation request's first chunk to the engine showing it
  (p95, target ≤ 100 ms), both perf_counter times in this process.
"""

from __future__ import annotations

import argparse
import copy
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
from pipeline.answering.events import Abstained, Decided, Generated, Retrying, SentenceChecked, Token, Trimmed
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from pipeline.prompt_registry import all_prompts
from pipeline.verification.faithfulness import Passage, context_block
from store.db import get_database

LANES = 15
WALL_TARGET, FLOOR_TARGET, TOKEN_TARGET, VISIBLE_TARGET, LAG_TARGET_MS = 0.45, 1.25, 1.0, 0.15, 100
UNFAITHFUL_SHARE = 1 / 3  # of the questions, those whose first answer is unfaithful (RAGTruth QA: about 0.3)
LAG_PROFILE = "GPU-like"


@dataclass(frozen=True)
class Profile:
    name: str
    slots: int
    seconds_per_token: float
    seconds_per_prompt_token: float
    prompt_cache: bool = False


PROFILES = (
    Profile("GPU-like", 4, 0.025, 0.0005),
    Profile("CPU-like", 4, 0.025, 0.005),
    Profile("laptop", 1, 0.060, 0.005),
    Profile("laptop, prompt cache", 1, 0.060, 0.005, prompt_cache=True),
)
GENERATION_PATHS = ("/api/chat", "/api/generate")
KNOWN_PROMPTS = list(all_prompts().values())
SEED_STAGES = {seed_pipeline.GENERATE_SYSTEM: "generate", seed_pipeline.EXTRACT_SYSTEM: "extract_claims"}


@dataclass
class Sample:
    wall: float
    prompt_tokens: int  # processed by the server (without the ones its prompt cache held)
    calls: Counter  # model -> chat/generate requests
    visible: float | None = None  # question -> first visible answer text, seconds
    verified: float | None = None  # question -> first sentence shown with its claims checked, seconds
    lag: float | None = None  # server sent the first answer chunk -> the engine showed it, seconds
    stages: list[tuple[str, float, float, int]] = field(default_factory=list)  # (stage, start, end, prompt tokens)
    retries: int = 0  # answers generated again after the first
    trims: int = 0  # answers repaired by dropping their unsupported sentences (no model call)
    cached_tokens: int = 0  # prompt tokens the server's prompt cache held
    unfaithful_first: bool = True  # the generator's first answer to this question was unfaithful
    decided: float | None = None  # question -> the checked answer decided and shown (Decided/Abstained), seconds

    @property
    def generated(self) -> float | None:
        """When the server finished the first answer (its first generation call), seconds after the question: what
        any pipeline that generates the same answer spends before checking anything."""
        done = [end for stage, _, end, _ in self.stages if stage.startswith("generate")]
        return min(done, default=None)


def unfaithful_questions(n: int, share: float) -> list[bool]:
    """Which of `n` questions get an unfaithful first answer: `share` of them, spread evenly (with 1/3, every
    third question: the 3rd, 6th, ...)."""
    if not 0 <= share <= 1:
        raise ValueError(f"the unfaithful share is a fraction from 0 to 1, not {share}")
    return [int((i + 1) * share + 1e-9) > int(i * share + 1e-9) for i in range(n)]


def processed(request: dict) -> int:
    """A chat/generate request's prompt tokens the server processed: those its slot's prompt cache did not hold."""
    return request.get("prompt_tokens", 0) - request.get("cached_tokens", 0)


def served(fake) -> tuple[int, Counter]:
    """Prompt tokens processed and calls by model of the chat/generate requests the fake has served since
    clear() (embedding requests are not counted)."""
    done = [r for r in fake.requests if r["path"] in GENERATION_PATHS]
    return sum(processed(r) for r in done), Counter(r["model"].split(":")[0] for r in done)


def reused(fake) -> int:
    """Prompt tokens the slots' prompt caches supplied to the chat/generate requests since clear()."""
    return sum(r.get("cached_tokens", 0) for r in fake.requests if r["path"] in GENERATION_PATHS)


def stage_of(request: dict) -> str:
    """The prompt a chat request was made from (the longest known system text it starts with and, among prompts
    that share it, the longest task its user message holds, if any), or the model."""
    messages = (request["body"] or {}).get("messages") or [{}]
    system = messages[0].get("content") or "" if messages[0].get("role") == "system" else ""
    user = (messages[-1].get("content") or "") if len(messages) > 1 else ""
    known = [
        (len(p.system), len(task), p.name)
        for p in KNOWN_PROMPTS
        for task in [getattr(p, "task", "")]
        if system.startswith(p.system) and task in user
    ]
    if known:
        return max(known)[2]
    return SEED_STAGES.get(system) or request["model"].split(":")[0]


def timeline(fake, start: float) -> list[tuple[str, float, float, int]]:
    """Each chat/generate request as (stage, received, done, prompt tokens), seconds after `start`."""
    return [
        (stage_of(r), r["received"] - start, r.get("done", r["received"]) - start, processed(r))
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
    shown, retries, trims, verified, decided = {}, 0, 0, None, None
    for event in engine.stream(question):
        if isinstance(event, Token | Generated):
            shown.setdefault(type(event), time.perf_counter())
        elif isinstance(event, SentenceChecked) and verified is None and is_verified(event):
            verified = time.perf_counter() - start
        elif isinstance(event, Decided | Abstained):
            decided = time.perf_counter() - start
        retries += isinstance(event, Retrying)
        trims += isinstance(event, Trimmed)
    wall = time.perf_counter() - start
    tokens, calls = served(fake)
    sample = Sample(wall, tokens, calls, verified=verified, stages=timeline(fake, start), retries=retries)
    sample.cached_tokens = reused(fake)
    sample.trims = trims
    sample.decided = decided
    visible = shown.get(Token, shown.get(Generated))
    sent = first_answer_chunk(fake, engine.settings.generator_model)
    if visible is not None:
        sample.visible = visible - start
        sample.lag = visible - sent if sent is not None else None
    return sample


def is_verified(event: SentenceChecked) -> bool:
    """Whether a sentence's event shows checked claims: some claims and no extraction error."""
    return bool(event.claims) and not event.error


def seed(client, retrieve, fake, question: str) -> Sample:
    """The seed on one question; `retrieve(question)` gives its context block (timed with the rest)."""
    fake.clear()
    start = time.perf_counter()
    run = seed_pipeline.answer(client, question, retrieve(question))
    wall = time.perf_counter() - start
    tokens, calls = served(fake)
    assert calls == run.calls, (calls, run.calls)
    # the seed showed its answer once it was checked, so its first text is its first checked sentence
    sample = Sample(
        wall,
        tokens,
        calls,
        visible=wall,
        verified=wall,
        stages=timeline(fake, start),
        retries=run.generations - 1,
        decided=wall,
    )
    sample.cached_tokens = reused(fake)
    return sample


def our_passages(retriever: DuckDBRetriever):
    """The seed's retrieval with `--seed-retrieval ours`: the engine's store and top_k, in its context layout."""

    def retrieve(question: str) -> str:
        return context_block(
            [
                Passage(
                    n, int(node.node.metadata["chunk_id"]), node.node.metadata["source"], node.node.get_content(), 0.0
                )
                for n, node in enumerate(retriever.retrieve(question), start=1)
            ]
        )

    return retrieve


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
    """Calls per question by model, how often the answer was generated again and how often trimmed instead."""
    models = Counter()
    for s in samples:
        models.update(s.calls)
    calls = ", ".join(f"{m} {n / len(samples):.2f}" for m, n in sorted(models.items()))
    retried = sum(s.retries > 0 for s in samples)
    trimmed = sum(s.trims > 0 for s in samples)
    line = f"{calls}; regenerated on {retried}/{len(samples)} questions ({sum(s.retries for s in samples)} times)"
    return line + (f", repaired by dropping sentences on {trimmed}" if trimmed else "")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def ratio_figure(name: str, ratios: list[float], target: float | None, note: str) -> Figure:
    return Figure(name, statistics.median(ratios), "×", target, note=f"{note}; p95 {p95(ratios):.2f}")


def against_checked_answer(
    mine: list[Sample], base: list[Sample], what: str, field_name: str, target, counted: str, profile: str
) -> list[Figure]:
    """The median over questions of our time to `what` (the Sample field) / the seed's checked answer (its wall)."""
    pairs = [(getattr(m, field_name), b.wall) for m, b in zip(mine, base, strict=True)]
    pairs = [(m, b) for m, b in pairs if m is not None]
    if not pairs:
        return []
    seed_wall = statistics.median(s.wall for s in base)
    return [
        ratio_figure(
            f"answer vs seed: {what} / seed's checked answer, median ({profile})",
            [m / b for m, b in pairs],
            target,
            f"ours {statistics.median(m for m, _ in pairs):.2f} s, seed {seed_wall:.2f} s (medians); "
            f"{len(pairs)}/{len(mine)} answers {counted}",
        )
    ]


def floor_figures(profile: str, mine: list[Sample]) -> list[Figure]:
    """The engine's floor (its grade plus first answer: when the server finished its first generation call), and
    on the questions whose first answer is faithful, ours' wall time over that floor (the sums)."""
    generated = [s for s in mine if s.generated is not None]
    if not generated:
        return []
    faithful = [s for s in generated if not s.unfaithful_first]
    out = [
        Figure(
            f"answer vs seed: floor, the engine's grade + first answer ({profile})",
            statistics.median(s.generated for s in generated),
            "s",
            note=f"median over {len(generated)}/{len(mine)} answered questions; ours' wall "
            f"{statistics.median(s.wall for s in generated):.2f} s (median); on faithful first answers "
            + (f"{statistics.median(s.generated for s in faithful):.2f} s" if faithful else "none"),
        )
    ]
    if faithful:
        ratios = [s.wall / s.generated for s in faithful]
        out.append(
            Figure(
                f"answer vs seed: wall / floor, faithful first answers, total ({profile})",
                sum(s.wall for s in faithful) / sum(s.generated for s in faithful),
                "×",
                FLOOR_TARGET,
                note=f"{len(faithful)} questions; per question median {statistics.median(ratios):.2f}, "
                f"max {max(ratios):.2f}",
            )
        )
    return out


def decided_figures(profile: str, mine: list[Sample], base: list[Sample]) -> list[Figure]:
    """Ours' time to the checked answer shown (its Decided or Abstained event: what follows it is the run's
    bookkeeping, the store write and, on one slot, the contradicted-or-unsupported classification) over the seed's
    wall (reported beside the wall time, which runs to the stream's end); and the seed's own first answer (its
    first generation call done) over its checked answer: the wall ratio a pipeline would reach on the seed's own
    answers if everything after the generation were free, a bound to read beside the 0.45× target."""
    out = []
    pairs = [(m.decided, b.wall) for m, b in zip(mine, base, strict=True) if m.decided is not None]
    if pairs:
        out.append(
            Figure(
                f"answer vs seed: checked answer shown (decision) / seed's, total ({profile})",
                sum(m for m, _ in pairs) / sum(b for _, b in pairs),
                "×",
                note=f"{len(pairs)}/{len(mine)} decided; after the decision ours ran "
                f"{statistics.mean(m.wall - m.decided for m in mine if m.decided is not None):.2f} s more (mean)",
            )
        )
    own = [(b.generated, b.wall) for b in base if b.generated is not None]
    if own:
        out.append(
            Figure(
                f"answer vs seed: the seed's own first answer / its checked answer, total ({profile})",
                sum(g for g, _ in own) / sum(w for _, w in own),
                "×",
                note="the wall ratio of a pipeline that generated the seed's answers and checked them at no cost; "
                f"per question median {statistics.median(g / w for g, w in own):.2f}",
            )
        )
    return out


def wall_by_first_answer(mine: list[Sample], base: list[Sample], what: str = "wall") -> str:
    """Ours / the seed's `what` (a Sample field, summed) on the questions whose first answer was faithful and on
    the others."""
    parts = []
    for unfaithful, label in ((False, "faithful first answers"), (True, "unfaithful first answers")):
        pairs = [(m, b) for m, b in zip(mine, base, strict=True) if m.unfaithful_first is unfaithful]
        if pairs:
            ratio = sum(getattr(m, what) for m, _ in pairs) / sum(getattr(b, what) for _, b in pairs)
            parts.append(f"{ratio:.2f} on {len(pairs)} {label}")
    return "; ".join(parts)


def figures(profile: str, mine: list[Sample], base: list[Sample], lag: bool = False) -> list[Figure]:
    """The figures of one profile, with targets (`lag`: also the first-token lag figure)."""
    wall = sum(s.wall for s in mine) / sum(s.wall for s in base)
    tokens = sum(s.prompt_tokens for s in mine) / sum(s.prompt_tokens for s in base)
    median_ratio = statistics.median(m.wall / b.wall for m, b in zip(mine, base, strict=True))
    out = [
        Figure(
            f"answer vs seed: wall time, total ({profile})",
            wall,
            "×",
            WALL_TARGET,
            note=f"per question ours {statistics.median(s.wall for s in mine):.2f} s, "
            f"seed {statistics.median(s.wall for s in base):.2f} s (medians); median ratio {median_ratio:.2f}; "
            + wall_by_first_answer(mine, base),
        ),
        *decided_figures(profile, mine, base),
        *floor_figures(profile, mine),
        Figure(
            f"answer vs seed: prompt tokens, total ({profile})",
            tokens,
            "×",
            TOKEN_TARGET,
            note=f"per question ours {statistics.mean(s.prompt_tokens for s in mine):,.0f}, "
            f"seed {statistics.mean(s.prompt_tokens for s in base):,.0f} (means); "
            + wall_by_first_answer(mine, base, "prompt_tokens")
            + (
                f"; the prompt cache held ours {statistics.mean(s.cached_tokens for s in mine):,.0f}, "
                f"seed {statistics.mean(s.cached_tokens for s in base):,.0f} more"
                if any(s.cached_tokens for s in mine + base)
                else ""
            ),
        ),
    ]
    out += against_checked_answer(mine, base, "first shown text", "visible", VISIBLE_TARGET, "shown", profile)
    out += against_checked_answer(mine, base, "first verified sentence", "verified", None, "with one", profile)
    out += against_checked_answer(mine, base, "first answer generated", "generated", None, "generated", profile)
    out += [
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
    lags = [s.lag * 1000 for s in mine if s.lag is not None]
    if lag and lags:
        out.append(
            Figure(
                f"answer vs seed: first token sent -> shown, p95 ({profile})",
                p95(lags),
                "ms",
                LAG_TARGET_MS,
                note=f"max {max(lags):.0f} ms over {len(lags)} answers",
            )
        )
    return out


class Lane:
    """One simulated server with an engine and the seed's client that talk to it; the seed retrieves with
    `seed_index` (its own 500-character top-3 index) or, when None, with the engine's retriever."""

    def __init__(self, settings, db, fake: FakeOllama, seed_index: seed_pipeline.SeedIndex | None = None):
        self.fake, self.db = fake, db
        self.settings = dataclasses.replace(settings, ollama_host=fake.url)
        self.engine = VerifiedQueryEngine(settings=self.settings, db=db, kind="chat")
        self.client = ollama.Client(host=fake.url)
        self.profile: Profile | None = None
        if seed_index is None:
            self.retrieve = our_passages(DuckDBRetriever(LLM(self.settings, db), db, settings.top_k))
        else:  # the shared chunk vectors; the question is embedded on this lane's server
            index = copy.copy(seed_index)
            index.client = self.client
            self.retrieve = index.context

    def configure(self, profile: Profile) -> None:
        """Serve under `profile` and tell the engine the server's slots (a new engine)."""
        self.profile = profile
        self.fake.prompt_cache = profile.prompt_cache
        self.fresh_slots()
        self.settings = dataclasses.replace(self.settings, ollama_slots_per_host=profile.slots)
        self.engine = VerifiedQueryEngine(settings=self.settings, db=self.db, kind="chat")

    def fresh_slots(self) -> None:
        """The profile's latency on a new slot pool: no prompt cached, nothing remembered from before."""
        if self.profile is not None:
            p = self.profile
            self.fake.set_latency(p.seconds_per_token, p.slots, p.seconds_per_prompt_token)

    def both(self, question: str, unfaithful: bool = True) -> tuple[Sample, Sample]:
        """Ours, then the seed, on `question`, each from the generator's same first answer (`unfaithful` or not)."""
        self.fake.unfaithful_first = unfaithful
        self.fake.forget_answers()  # each pipeline gets the generator's first answer
        self.fresh_slots()  # and an empty prompt cache
        mine = ours(self.engine, self.fake, question)
        self.fake.forget_answers()
        self.fresh_slots()
        base = seed(self.client, self.retrieve, self.fake, question)
        mine.unfaithful_first = base.unfaithful_first = unfaithful
        return mine, base


def run_profile(
    lanes: list[Lane], questions: list[str], profile: Profile, unfaithful: list[bool]
) -> list[tuple[Sample, Sample]]:
    free: queue.Queue = queue.Queue()
    for lane in lanes:
        lane.configure(profile)
        free.put(lane)

    def on_a_free_lane(question: str, unfaithful_first: bool) -> tuple[Sample, Sample]:
        lane = free.get()
        try:
            return lane.both(question, unfaithful_first)
        finally:
            free.put(lane)

    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        return list(pool.map(on_a_free_lane, questions, unfaithful))


def measure(
    n_questions: int,
    lanes: int,
    answer_sentences: int = 2,
    answer_style: str = "paraphrase",
    seed_retrieval: str = "own",
    profiles: tuple[Profile, ...] = PROFILES,
    unfaithful_share: float = UNFAITHFUL_SHARE,
) -> dict[str, tuple[list[Sample], list[Sample]]]:
    """profile name -> (the engine's samples, the seed's samples), one per question. `answer_style`: the fake
    generator's, "paraphrase" or "quote"; `answer_sentences`: how many context sentences it quotes;
    `seed_retrieval`: "own" (the seed's 500-character top-3 index) or "ours" (the engine's passages);
    `unfaithful_share`: of the questions, those whose first (paraphrased) answer is unfaithful."""
    unfaithful = unfaithful_questions(n_questions, unfaithful_share)
    out = {}
    with bench_environment(WORKBENCH_CACHE_ENABLED="false") as (fake, _), ExitStack() as stack:
        settings = load_settings()
        db = get_database(settings)
        kb = ROOT / "data" / "kb"
        ingest([str(kb)], settings, db, LLM(settings, db))
        seed_index = None
        if seed_retrieval == "own":
            client = stack.enter_context(ollama.Client(host=fake.url))
            seed_index = seed_pipeline.SeedIndex(client, settings.embed_model, [kb])
        questions = [item.question for item in load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items]
        questions = questions[:n_questions]
        servers = [
            stack.enter_context(FakeOllama(answer_sentences=answer_sentences, answer_style=answer_style))
            for _ in range(min(lanes, n_questions))
        ]
        pool = [Lane(settings, db, server, seed_index) for server in servers]
        for lane in pool:
            lane.both(questions[0])  # warm-up, no latency
        for profile in profiles:
            mine, base = zip(*run_profile(pool, questions, profile, unfaithful[: len(questions)]), strict=True)
            out[profile.name] = list(mine), list(base)
        for lane in pool:
            lane.client.close()
        db.close()
    return out


def run(n_questions: int = 30, lanes: int = LANES, unfaithful_share: float = UNFAITHFUL_SHARE) -> list[Figure]:
    return to_figures(measure(n_questions, lanes, unfaithful_share=unfaithful_share))


def to_figures(measured: dict) -> list[Figure]:
    return [
        figure
        for profile, (mine, base) in measured.items()
        for figure in figures(profile, mine, base, lag=profile == LAG_PROFILE)
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
    parser.add_argument(
        "--unfaithful-share",
        type=float,
        default=UNFAITHFUL_SHARE,
        help="of the questions, the share whose first answer is unfaithful, spread evenly (default 1/3; 1 = every "
        "one, as before issue 48); the others' first answers are paraphrased and faithful",
    )
    parser.add_argument(
        "--seed-retrieval",
        choices=("own", "ours"),
        default="own",
        help="the seed's context: its own index, 500-character chunks, top 3 by cosine similarity (default), "
        "or the passages the engine retrieves (its store and top_k)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.questions <= 30:
        parser.error("--questions takes 1 to 30")
    if args.lanes < 1 or args.answer_sentences < 1:
        parser.error("--lanes and --answer-sentences take 1 or more")
    if not 0 <= args.unfaithful_share <= 1:
        parser.error("--unfaithful-share takes a fraction from 0 to 1")
    start = time.perf_counter()
    measured = measure(
        args.questions,
        args.lanes,
        args.answer_sentences,
        args.answer_style,
        args.seed_retrieval,
        unfaithful_share=args.unfaithful_share,
    )
    print_table(to_figures(measured))
    if args.stages:
        for profile, (mine, base) in measured.items():
            print(f"\n{profile}:")
            print("\n".join(stage_lines("ours", mine) + stage_lines("seed", base)))
    took = time.perf_counter() - start
    style = args.answer_style if args.answer_style == "paraphrase" else f"quote, {args.answer_sentences} sentences"
    n_unfaithful = sum(unfaithful_questions(args.questions, args.unfaithful_share))
    print(
        f"({args.questions} questions, answers: {style}, first answer unfaithful on {n_unfaithful}, "
        f"seed retrieval: {args.seed_retrieval}, {took:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
