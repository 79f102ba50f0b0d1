"""One error family. Every message says what went wrong and how to fix it."""
from __future__ import annotations


class WorkbenchError(Exception):
    """An expected failure the user can fix; pages show it with st.error, the CLI exits non-zero."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}: {self.fix}" if self.fix else self.message


class ConfigError(WorkbenchError):
    pass


class OllamaUnreachable(WorkbenchError):
    def __init__(self, host: str):
        super().__init__(f"Ollama is not reachable at {host}",
                         fix="start it with `ollama serve` (or set OLLAMA_HOST to where it runs)")


class ModelMissing(WorkbenchError):
    def __init__(self, model: str):
        super().__init__(f"model {model} is not pulled", fix=f"`ollama pull {model}`")
        self.model = model


class OllamaTimeout(WorkbenchError):
    def __init__(self, model: str, stage: str, seconds: float):
        super().__init__(f"model {model} did not answer the {stage} step within {seconds:g} s",
                         fix="check that Ollama is not overloaded, or raise WORKBENCH_REQUEST_TIMEOUT_S")


class OllamaFailed(WorkbenchError):
    def __init__(self, model: str, stage: str, detail: str):
        super().__init__(f"Ollama failed on the {stage} step with model {model}: {detail}",
                         fix="see `ollama serve` logs; run `python -m pipeline doctor`")


class StoreLocked(WorkbenchError):
    def __init__(self, path: str, seconds: float):
        super().__init__(f"the store {path} stayed locked by another process for {seconds:g} s",
                         fix="wait for the other workbench process (a CLI batch or the app) to finish, "
                             "or point WORKBENCH_DB at another file")


class InputError(WorkbenchError):
    pass
