"""Ragas's Faithfulness prompts, which come from outside the pipeline's prompt registry: recognised by Ragas's own
layout (PydanticPrompt: instruction, JSON schema, examples, then "input: {json}" and "Output:")."""

import json

from .text import _squash, content_words, is_number, sentences

_RAGAS_INPUT = "\nNow perform the same with the following input\ninput: "


def ragas_reply(prompt):
    """Ragas's Faithfulness prompts (PydanticPrompt: instruction, JSON schema, examples, then "input: {json}
    Output:"), answered in its schemas: {"statements"} for a question and answer = the answer's sentences of 3 or
    more words; {"statements": [{statement, reason, verdict}]} for a context and statements = verdict 1 when the
    statement's numbers and at least 80% of its other content words are in the context (as `verify`). None for
    any other prompt."""
    _, marker, rest = prompt.rpartition(_RAGAS_INPUT)
    if not marker:
        return None
    try:
        given, _ = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None
    if not isinstance(given, dict):
        return None
    if {"question", "answer"} <= given.keys():
        said = [_squash(s) for s in sentences(str(given["answer"]))]
        return {"statements": [s for s in said if len(s.split()) >= 3] or said}
    if {"context", "statements"} <= given.keys():
        context = set(content_words(str(given["context"])))
        verdicts = []
        for statement in given["statements"]:
            words = set(content_words(str(statement)))
            numbers = {w for w in words if is_number(w)}
            others = words - numbers
            found = len(others & context)
            verdict = int(numbers <= context and found >= 0.8 * len(others))
            shown = len(numbers & context)
            reason = f"{found} of {len(others)} words and {shown} of {len(numbers)} numbers are in the context"
            verdicts.append({"statement": statement, "reason": reason, "verdict": verdict})
        return {"statements": verdicts}
    return None
