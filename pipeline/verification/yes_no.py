"""The Yes/No verification call in bespoke-minicheck's format, shared by the verifiers and context recall."""

from __future__ import annotations

from pipeline.answering import prompts
from pipeline.models.llm import LLM
from pipeline.models.parsing import parse_yes_no  # noqa: F401 (the one tolerant parser; re-exported)


def ask_verifier(llm: LLM, model: str, document: str, claim: str, stage: str = "verify", instructed: bool = False):
    """One Yes/No verification call; `instructed` adds a system instruction for general models.
    Replies that are neither Yes nor No are not cached."""
    user = prompts.verifier_input(document, claim)
    messages = prompts.LLM_VERIFIER.messages(user) if instructed else [{"role": "user", "content": user}]
    return llm.chat(stage, model, messages, accept=lambda text: parse_yes_no(text) is not None)
