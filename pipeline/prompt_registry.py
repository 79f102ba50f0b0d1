"""Every prompt any part of the pipeline declares, gathered from the declarations (a module above the parts it
reads, so that none of them imports it back)."""

from __future__ import annotations

from pipeline.answering.engine import PROMPTS
from pipeline.calibration.align_judge import PROMPTS as ALIGN_PROMPTS
from pipeline.declarations import prompt_versions
from pipeline.evaluation.registry import load_metrics
from pipeline.evaluation.synth.prompts import PROMPTS as SYNTH_PROMPTS
from pipeline.prompting import Prompt
from pipeline.verification.faithfulness import FaithfulnessChecker
from pipeline.verification.registry import load_verifiers


def all_prompts() -> dict[str, Prompt]:
    """Every prompt any part declares, by name: the engine's, the checker's, every registered verifier's and
    metric's (the judge's rubrics among them), synth's and judge alignment's."""
    every = [*PROMPTS, *FaithfulnessChecker.prompts, *FaithfulnessChecker.answer_prompts]
    every += [p for verifier in load_verifiers().values() for p in verifier.prompts]
    every += [p for metric in load_metrics().values() for p in metric.prompts]
    every += SYNTH_PROMPTS  # synth's question writers (pipeline/evaluation/synth/prompts.py)
    every += ALIGN_PROMPTS  # judge alignment's rubric clarification (pipeline/calibration/align_judge.py)
    prompt_versions(every)
    return {p.name: p for p in every}
