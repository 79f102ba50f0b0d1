"""What the steps of one question's run share: the settings, the model seam, the checker, the run's thread pool,
the sink its events go to, the result they fill in and the question they work on."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from pipeline.answering.event_stream import Emit
from pipeline.answering.events import AnswerResult
from pipeline.config import Settings
from pipeline.knowledge.similarity_scale import SimilarityScale
from pipeline.models.llm import LLM
from pipeline.verification.faithfulness import FaithfulnessChecker


@dataclass
class RunContext:
    settings: Settings
    llm: LLM
    checker: FaithfulnessChecker
    pool: Executor
    emit: Emit
    result: AnswerResult  # the run, filled in step by step (each step records what it found before its event)
    similarity_scale: Callable[[], SimilarityScale]  # the embedding model's, measured on first need
    # Set by the first step (followup.py), then kept: what retrieval, grading, generation and checking work on (a
    # follow-up's standalone question), and the earlier turns the generation prompt shows (a follow-up's only).
    question: str
    history_text: str = ""
    schedule: str | None = None  # overlapped | sequential: chosen at the first round (answer_loop.plan), then kept
    generation_prompts: set[str] = field(default_factory=set)  # every generation prompt an attempt sent (a repair
    # never replays one of them from the cache)
