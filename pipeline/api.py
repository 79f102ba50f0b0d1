"""Verdicts inside your own application: give a question, your pipeline's answer and the contexts it was written
from; get back its claims with verdicts, evidence spans and the faithfulness score. The run is logged to the
store as `imported` (with the name of your pipeline), so it appears on Runs with its drilldown and can be rated
on Annotate like any other.

    from pipeline.api import check_answer
    checked = check_answer("How tall is the tower?", answer, ["The tower is 330 m tall.", ...], pipeline="my-rag")
    checked.faithfulness, [(c.text, c.verdict, c.evidence) for c in checked.claims]

Inside a LlamaIndex application, `WorkbenchEvaluator` is a response evaluator:

    evaluator = WorkbenchEvaluator(pipeline="my-query-engine")
    result = evaluator.evaluate_response(query=question, response=query_engine.query(question))

Settings (models, hosts, the store) come from the environment and workbench.toml, as for the app and the CLI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.evaluation import BaseEvaluator, EvaluationResult

from pipeline.answering.engine import clean_question
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.dataset import GivenContext
from pipeline.evaluation.given import GivenRun, check_given
from pipeline.models.llm import LLM
from pipeline.session import open_workbench
from store.journal import save_run

__all__ = ["CheckedAnswer", "ClaimVerdict", "WorkbenchEvaluator", "check_answer"]


@dataclass(frozen=True)
class ClaimVerdict:
    text: str
    verdict: str  # supported | contradicted | unsupported | unverified
    verifier: str
    reason: str
    context: int | None  # the number (from 1) of the context holding its evidence
    source: str | None
    evidence: str | None  # the supporting or contradicting text, as it stands in that context
    evidence_span: tuple[int, int] | None  # where the evidence stands in that context's text
    answer_span: tuple[int, int] | None  # the sentence of the answer the claim came from


@dataclass(frozen=True)
class CheckedAnswer:
    status: str  # accepted | flagged | no_claims | unverified | no_contexts | failed
    faithfulness: float | None  # supported / claims with a verdict; None when nothing could be scored
    passing: bool | None  # faithfulness at or above the threshold; None without a score
    claims: list[ClaimVerdict]
    error: str | None
    run_id: int | None  # the logged run (None when not logged, or kept in the journal)
    journal: str | None  # the journal file keeping the run while the store could not take it


def check_answer(
    question: str,
    answer: str,
    contexts: Sequence[Any],
    *,
    pipeline: str = "python",
    settings: Settings | None = None,
    log: bool = True,
) -> CheckedAnswer:
    """Check `answer` against `contexts` (strings, {text, source?, score?} dicts, or LlamaIndex nodes). `pipeline`
    names your application on Runs and in trends. A model that cannot be reached gives status failed with the
    reason in `error`; nothing is invented."""
    settings, db = open_workbench(settings)
    if not isinstance(answer, str) or not answer.strip():
        raise InputError("the answer is empty", fix="pass the text your pipeline answered")
    name = " ".join(str(pipeline).split()) or "python"
    given = check_given(
        settings,
        LLM(settings, db, origin="imported"),
        clean_question(question, settings),
        answer.strip(),
        [as_context(c) for c in contexts or []],
        name,
        one_at_a_time=True,  # a call checks one answer (calls made from several threads interleave on one slot)
    )
    run_id = journal = None
    if log:
        run_id, kept = save_run(db, given.log, settings.store_save_wait_s)
        journal = str(kept) if kept else None
    return checked_answer(given, settings, run_id, journal)


def as_context(context: Any) -> GivenContext:
    """A context from a string, a {text, source?, score?} dict or a LlamaIndex node (with or without score)."""
    if isinstance(context, GivenContext):
        return context
    if isinstance(context, str):
        return GivenContext(text=context)
    if isinstance(context, dict):
        return GivenContext.model_validate(context)
    node = getattr(context, "node", context)
    if hasattr(node, "get_content"):
        meta = getattr(node, "metadata", {}) or {}
        source = meta.get("file_name") or meta.get("source") or meta.get("file_path") or getattr(node, "node_id", None)
        return GivenContext(text=node.get_content(), source=source, score=getattr(context, "score", None))
    raise InputError(
        f"a context is a {type(context).__name__}",
        fix="pass each context as a string, a dict {text, source?, score?} or a LlamaIndex node",
    )


def checked_answer(given: GivenRun, settings: Settings, run_id: int | None, journal: str | None) -> CheckedAnswer:
    result = given.result
    claims = [
        ClaimVerdict(
            c.text,
            c.verdict,
            c.verifier,
            c.reason,
            c.passage.n if c.passage else None,
            c.passage.source if c.passage else None,
            c.evidence,
            c.span,
            c.answer_span,
        )
        for c in result.final_claims
    ]
    passing = None if result.faithfulness is None else result.faithfulness >= settings.faithfulness_threshold
    return CheckedAnswer(result.status, result.faithfulness, passing, claims, result.error, run_id, journal)


class WorkbenchEvaluator(BaseEvaluator):
    """A LlamaIndex response evaluator that checks each response claim by claim and logs it as an imported run
    of `pipeline`. `evaluate_response(query, response)` takes the contexts from the response's source nodes."""

    def __init__(self, pipeline: str = "llama-index", settings: Settings | None = None, log: bool = True):
        self.pipeline, self.settings, self.log = pipeline, settings, log
        self.last: CheckedAnswer | None = None  # the last check, with its claims

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        if query is None or response is None:
            raise ValueError("evaluate needs the query and the response")
        checked = check_answer(
            query, response, contexts or [], pipeline=self.pipeline, settings=self.settings, log=self.log
        )
        self.last = checked
        common = dict(query=query, response=response, contexts=[as_context(c).text for c in contexts or []])
        feedback = "\n".join(f"{c.verdict}: {c.text}" + (f" ({c.reason})" if c.reason else "") for c in checked.claims)
        if checked.faithfulness is None:
            why = checked.error or f"not scored: {checked.status}"
            return EvaluationResult(**common, feedback=feedback or why, invalid_result=True, invalid_reason=why)
        return EvaluationResult(**common, passing=checked.passing, score=checked.faithfulness, feedback=feedback)

    def evaluate_response(self, query: str | None = None, response: Any = None, **kwargs: Any) -> EvaluationResult:
        """The response's text against its source nodes (kept as nodes: their file names become the sources)."""
        text, nodes = (response.response, list(response.source_nodes)) if response is not None else (None, None)
        return self.evaluate(query=query, response=text, contexts=nodes, **kwargs)

    async def aevaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> EvaluationResult:
        return await asyncio.to_thread(self.evaluate_response, query, response, **kwargs)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        return await asyncio.to_thread(self.evaluate, query, response, contexts)

    def _get_prompts(self) -> dict:
        return {}  # the checker's prompts are typed, versioned objects (pipeline/verification/prompts.py)

    def _update_prompts(self, prompts_dict: dict) -> None:
        if prompts_dict:
            raise NotImplementedError("the checker's prompts are versioned in pipeline/verification/prompts.py")
