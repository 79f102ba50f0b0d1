"""A general model (the NLI model) asked Yes/No with an instruction, per chunk: for comparing a general
LLM with bespoke-minicheck."""

from __future__ import annotations

from pipeline.verification.registry import register_verifier
from pipeline.verification.verifiers.minicheck import MiniCheckChunk


@register_verifier("llm")
class LLMYesNo(MiniCheckChunk):
    instructed = True

    @property
    def model(self) -> str:
        return self.settings.nli_model
