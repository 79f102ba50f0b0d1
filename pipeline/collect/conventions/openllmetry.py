"""OpenLLMetry / Traceloop (traceloop-sdk and its instrumentations for LlamaIndex, LangChain, Haystack, ...):
`traceloop.span.kind` workflow, task, agent or tool; what an entity was given and returned as JSON in
`traceloop.entity.input` / `traceloop.entity.output` (the workflow's input holds the question, its output the
answer); a retriever task is one whose output is a list of documents (LlamaIndex's NodeWithScore, LangChain's
and Haystack's Document); model calls and vector-database queries carry OTel GenAI's `gen_ai.*` and the
database attributes, read as otel_genai reads them."""

from __future__ import annotations

from pipeline.collect.conventions.base import (
    ANSWER_KEYS,
    OTHER,
    QUESTION_KEYS,
    RETRIEVER,
    Convention,
    ModelCall,
    contexts_of,
    looks_like_documents,
    text_of,
)
from pipeline.collect.conventions.otel_genai import OtelGenAI
from pipeline.evaluation.dataset import GivenContext
from store.records import ReceivedSpan

KIND = "traceloop.span.kind"
INPUT, OUTPUT = "traceloop.entity.input", "traceloop.entity.output"
_GENAI = OtelGenAI()


class OpenLLMetry(Convention):
    name = "openllmetry"

    def speaks(self, span: ReceivedSpan) -> bool:
        return KIND in span.attributes or "traceloop.entity.name" in span.attributes

    def kind(self, span: ReceivedSpan) -> str | None:
        return str(span.attributes.get(KIND) or "unknown")

    def role(self, span: ReceivedSpan) -> str:
        role = _GENAI.role(span)
        if role != OTHER:
            return role
        return RETRIEVER if looks_like_documents(span.attributes.get(OUTPUT)) else OTHER

    def question(self, span: ReceivedSpan) -> str | None:
        return text_of(span.attributes.get(INPUT), QUESTION_KEYS) or _GENAI.question(span)

    def answer(self, span: ReceivedSpan) -> str | None:
        if self.role(span) == RETRIEVER:
            return None
        return text_of(span.attributes.get(OUTPUT), ANSWER_KEYS) or _GENAI.answer(span)

    def documents(self, span: ReceivedSpan) -> list[GivenContext]:
        return contexts_of(span.attributes.get(OUTPUT)) or _GENAI.documents(span)

    def call(self, span: ReceivedSpan) -> ModelCall:
        call = _GENAI.call(span)
        if call.prompt is None and span.attributes.get(INPUT) is not None:
            call.prompt = str(span.attributes[INPUT])
        if call.completion is None:
            call.completion = text_of(span.attributes.get(OUTPUT), ANSWER_KEYS)
        return call
