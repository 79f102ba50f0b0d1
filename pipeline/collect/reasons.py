"""Why a received trace was not evaluated, in the user's words and with what was found, so that the user can act:
record the retrieval as a span, turn on content capture, or map an in-house instrumentation (collect_mapping).

    no span carries retrieved documents; spans seen: 14, kinds: workflow 1, task 9, chat 2; attributes that
    look like documents: none"""

from __future__ import annotations

import re
from collections import Counter

from pipeline.collect.conventions.base import looks_like_documents

_DOCUMENT_WORDS = re.compile(r"(document|docs?\b|context|chunk|passage|hits|results?\b|nodes?\b|sources?\b)", re.I)
_SHOWN = 5  # attributes named at most
_PROMPT_MARGIN = 200  # characters of a prompt beyond the question that may be documents put in it


def why_not(request, readings, retrievers) -> str | None:
    """The reason, or None for a question-and-answer trace to verify."""
    if request.error:
        return f"the application's request failed: {request.error}"
    if not request.contexts:
        return _no_contexts(request, readings, retrievers)
    if not request.question:
        return f"no question: the root span {_root_name(readings)!r} carries no input ({_seen(readings)})"
    if not request.answer:
        return (
            f"no answer: the root span {_root_name(readings)!r} carries no output and no model call returned "
            f"text ({_seen(readings)})"
        )
    return None


def _no_contexts(request, readings, retrievers) -> str:
    if retrievers:
        named = ", ".join(sorted({r.span.name for r in retrievers}))
        first = f"the retrieval spans ({named}) carry no document text (only ids and scores, or content capture off)"
    else:
        first = "no span carries retrieved documents"
    reason = f"{first}; {_seen(readings)}; attributes that look like documents: {_document_like(readings)}"
    prompt = _documents_in_prompt(request)
    return f"{reason}. {prompt}" if prompt else reason


def _seen(readings) -> str:
    kinds = Counter(r.kind or "unmarked" for r in readings)
    shown = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
    conventions = sorted({r.convention.name for r in readings if r.convention is not None})
    read_as = f"read as {', '.join(conventions)}" if conventions else "no known convention"
    return f"spans seen: {len(readings)}, kinds: {shown} ({read_as})"


def _document_like(readings) -> str:
    """Attributes that no convention read but that look like retrieved documents, as span: attribute."""
    found = []
    for reading in readings:
        for key, value in reading.span.attributes.items():
            if _DOCUMENT_WORDS.search(key) or looks_like_documents(value):
                found.append(f"{reading.span.name}: {key}")
    if not found:
        return "none"
    more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    return ", ".join(found[:_SHOWN]) + more


def _documents_in_prompt(request) -> str | None:
    """When the application called a model with a prompt much longer than the question and no retrieval span:
    its documents are likely inside that prompt, where they cannot be told apart from the instructions."""
    question = request.question or ""
    for call in request.calls:
        prompt = call.prompt_text or ""
        if len(prompt) - len(question) > _PROMPT_MARGIN:
            return (
                f"The application called {call.model} with a prompt of {len(prompt):,} characters"
                + (" that holds the question" if question and question in prompt else "")
                + ": its documents may be inside the prompt, with no retrieval span to read them from. Record the "
                "retrieval as a span of its own, or name its attribute in collect_mapping (docs/traces-in.md)"
            )
    return None


def _root_name(readings) -> str:
    roots = [r for r in readings if r.span.parent_id is None] or readings
    return min(roots, key=lambda r: r.span.started_at).span.name
