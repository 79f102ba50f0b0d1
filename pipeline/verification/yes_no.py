"""The Yes/No verification call in bespoke-minicheck's format, shared by the verifiers and context recall."""

from __future__ import annotations

import re

from pipeline.answering import prompts
from pipeline.models.llm import LLM


def parse_yes_no(text: str) -> bool | None:
    """The verifier's verdict from its first word; None when it is neither yes nor no."""
    match = re.match(r"\W*([A-Za-z]+)", text or "")
    word = match.group(1).lower() if match else ""
    return {"yes": True, "no": False}.get(word)


def ask_verifier(llm: LLM, model: str, document: str, claim: str, stage: str = "verify", instructed: bool = False):
    """One Yes/No verification call; `instructed` adds a system instruction for general models.
    Replies that are neither Yes nor No are not cached."""
    user = prompts.verifier_input(document, claim)
    messages = prompts.LLM_VERIFIER.messages(user) if instructed else [{"role": "user", "content": user}]
    return llm.chat(stage, model, messages, accept=lambda text: parse_yes_no(text) is not None)
