"""The Yes/No verification call in bespoke-minicheck's format, shared by the verifiers and context recall."""

from __future__ import annotations

from pipeline.models.llm import LLM
from pipeline.models.parsing import parse_yes_no  # noqa: F401 (the one tolerant parser; re-exported)
from pipeline.prompting import Prompt


def verifier_input(document: str, claim: str) -> str:
    """bespoke-minicheck's own format."""
    return f"Document: {document}\nClaim: {claim}"


def ask_verifier(
    llm: LLM, model: str, document: str, claim: str, stage: str = "verify", instruction: Prompt | None = None
):
    """One Yes/No verification call; a general model gets an `instruction` (its caller's declared prompt) as
    the system message, bespoke-minicheck none. Replies that are neither Yes nor No are not cached."""
    user = verifier_input(document, claim)
    messages = instruction.messages(user) if instruction else [{"role": "user", "content": user}]
    return llm.chat(stage, model, messages, accept=lambda text: parse_yes_no(text) is not None)
