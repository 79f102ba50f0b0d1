"""Retrieval rounds and their context grades, with the rows that record them: the chunks retrieved for the question
(round 1) or its rewrite (round 2), whether the best of them is above the retrieval floor, the grade of a round's
context and the rewrite of a query whose context does not answer. (retriever.py is the search itself.)"""

from __future__ import annotations

from llama_index.core.retrievers import BaseRetriever

from pipeline import tracing
from pipeline.answering import prompts
from pipeline.answering.context import RunContext
from pipeline.answering.events import Graded, Retrieved, Rewritten
from pipeline.answering.live import grade_view
from pipeline.knowledge.similarity_scale import floor
from pipeline.models.structured import ask
from pipeline.text import one_line
from pipeline.verification.faithfulness import Passage
from store.records import GradeRecord, RetrievalRecord


class Retrieval:
    def __init__(self, ctx: RunContext, retriever: BaseRetriever):
        self.ctx, self.retriever = ctx, retriever
        self.records: list[RetrievalRecord] = []
        self.grades: list[GradeRecord] = []

    @property
    def relevant(self) -> bool | None:
        """What the last recorded grade said of its context (None: no grade, or its reply was unreadable)."""
        return self.grades[-1].relevant if self.grades else None

    def retrieve(self, round_no: int, query: str) -> list[Passage]:
        settings = self.ctx.settings
        with tracing.step("retrieve", span_kind=tracing.RETRIEVER, round=round_no, top_k=settings.top_k) as span_id:
            nodes = self.retriever.retrieve(query)
        passages = [
            Passage(
                n,
                int(node.node.metadata["chunk_id"]),
                node.node.metadata["source"],
                node.node.get_content(),
                float(node.score),
            )
            for n, node in enumerate(nodes, start=1)
        ]
        # a negative chunk id is no chunk of the knowledge base (a sweep's own index numbers its chunks -rank, as
        # given contexts are): the retrieval keeps the chunk's text and source itself
        self.records += [
            RetrievalRecord(
                round_no,
                query,
                p.n,
                p.chunk_id,
                p.score,
                context_text=p.text if p.chunk_id < 0 else None,
                context_source=p.source if p.chunk_id < 0 else None,
                span_id=span_id,
            )
            for p in passages
        ]
        self.ctx.result.passages = passages
        asked = self.ctx.result.question
        self.ctx.emit(
            Retrieved(
                message=f"retrieved {len(passages)} chunks" + (f" for '{query}'" if query != asked else ""),
                round=round_no,
                query=query,
                passages=passages,
            )
        )
        return passages

    def below_floor(self, passages: list[Passage]) -> str:
        """Why the best chunk is too far from the question to answer from (its similarity no higher than the
        retrieval_floor quantile of unrelated pairs); "" when it is above, or there is no floor."""
        quantile = self.ctx.settings.retrieval_floor
        if quantile <= 0:
            return ""
        limit = floor(self.ctx.similarity_scale(), quantile)
        best = max(p.score for p in passages)
        tracing.annotate(retrieval_floor=limit, best_similarity=best)
        if limit is None or best > limit:
            return ""
        return (
            f"the best chunk's similarity {best:.2f} is no higher than unrelated text: the "
            f"{_ordinal(quantile)} percentile of unrelated pairs is {limit:.2f}"
        )

    def grade(self, round_no: int, passages: list[Passage]) -> Graded:
        """The context grade, read from the short view of the context; safe to run on the pool while the answer
        streams (nothing is recorded here: `record` does that)."""
        settings = self.ctx.settings
        with tracing.step("grade context", round=round_no):
            result = ask(
                self.ctx.llm,
                "grade_context",
                settings.generator_model,
                prompts.GRADE_CONTEXT,
                prompts.grade_input(self.ctx.question, grade_view(self.ctx.question, passages)),
            )
            tracing.annotate(relevant=result.value.relevant if result.value else None)
        grade = result.value
        if grade is None:
            return Graded(
                message=f"context grade unreadable, answering anyway: {result.invalid_reason}",
                round=round_no,
                relevant=None,
                reason=result.invalid_reason,
            )
        return Graded(
            message=("context is relevant" if grade.relevant else "context is not relevant") + f": {grade.reason}",
            round=round_no,
            relevant=grade.relevant,
            reason=grade.reason,
            kept=frozenset(set(grade.passages) & {p.n for p in passages}) if grade.relevant else frozenset(),
        )

    def record(self, graded: Graded) -> None:
        """The grade's row, for the round retrieved last."""
        self.grades.append(GradeRecord(graded.round, self.records[-1].query, graded.relevant, graded.reason))

    def rewrite(self) -> str | None:
        """A different query for round 2, or None when the model offers none."""
        question = self.ctx.question
        with tracing.step("rewrite query"):
            result = ask(
                self.ctx.llm,
                "rewrite_query",
                self.ctx.settings.generator_model,
                prompts.REWRITE_QUERY,
                prompts.rewrite_input(question),
            )
        query = one_line(result.value.query) if result.value else ""
        if not query or query.lower() == question.lower():
            self.ctx.emit(
                Rewritten(
                    message="no different query to try"
                    + (f" ({result.invalid_reason})" if result.invalid_reason else ""),
                    query=None,
                )
            )
            return None
        self.ctx.result.rewritten_query = query
        self.ctx.emit(Rewritten(message=f"rewrote the query as '{query}'", query=query))
        return query


def _ordinal(quantile: float) -> str:
    """0.95 -> "95th", 0.5 -> "50th", 0.975 -> "97.5th"."""
    number = f"{quantile * 100:.1f}".rstrip("0").rstrip(".")
    last = int(float(number)) % 100 if "." not in number else 0
    suffix = "th" if "." in number or 10 <= last % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(last % 10, "th")
    return number + suffix
