"""One error family. Every message says what went wrong and how to fix it.

The family's root and the store's errors are defined in store.errors (the store imports nothing from
here) and re-exported, so pages and the CLI catch `WorkbenchError` and get the store's errors too.
"""

from __future__ import annotations

from store.errors import StoreError, StoreLocked, StoreUnavailable, WorkbenchError

__all__ = [
    "WorkbenchError",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "ConfigError",
    "OllamaUnreachable",
    "ModelMissing",
    "OllamaTimeout",
    "OllamaFailed",
    "InputError",
]


class ConfigError(WorkbenchError):
    pass


class OllamaUnreachable(WorkbenchError):
    def __init__(self, host: str):
        super().__init__(
            f"Ollama is not reachable at {host}",
            fix="start it with `ollama serve` (or set OLLAMA_HOST to where it runs)",
        )


class ModelMissing(WorkbenchError):
    def __init__(self, model: str):
        super().__init__(f"model {model} is not pulled", fix=f"`ollama pull {model}`")
        self.model = model


class OllamaTimeout(WorkbenchError):
    def __init__(self, model: str, stage: str, seconds: float):
        super().__init__(
            f"model {model} did not answer the {stage} step within {seconds:g} s",
            fix="check that Ollama is not overloaded, or raise WORKBENCH_REQUEST_TIMEOUT_S",
        )


class OllamaFailed(WorkbenchError):
    def __init__(self, model: str, stage: str, detail: str):
        super().__init__(
            f"Ollama failed on the {stage} step with model {model}: {detail}",
            fix="see `ollama serve` logs; run `python -m pipeline doctor`",
        )


class InputError(WorkbenchError):
    pass
