"""Failures of a model server, translated into WorkbenchErrors that say the fix; retries with backoff.

LlamaIndex's Ollama classes call the `ollama` client, so Ollama failures arrive as that client's
exceptions (ConnectionError, ollama.ResponseError, httpx errors). OpenAILike calls the `openai` SDK,
whose failures arrive as openai.APIError subclasses.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import ollama
import openai

from pipeline.config import Settings
from pipeline.errors import ModelMissing, OllamaFailed, OllamaTimeout, OllamaUnreachable, WorkbenchError

TRANSIENT = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.PoolTimeout)


class Transient(Exception):
    """A failure worth retrying (HTTP 5xx, a dropped connection)."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


# The OpenAI-compatible backend's errors subclass the Ollama ones, so callers catch one family,
# but their messages name the server and setting that matter.
class ServerUnreachable(OllamaUnreachable):
    def __init__(self, base_url: str):
        WorkbenchError.__init__(
            self,
            f"the OpenAI-compatible server is not reachable at {base_url}",
            fix="start it, or set WORKBENCH_OPENAI_BASE_URL to where it listens",
        )


class ModelNotServed(ModelMissing):
    def __init__(self, model: str, base_url: str):
        WorkbenchError.__init__(
            self,
            f"model {model} is not served at {base_url}",
            fix="load it in that server, or set the model setting to a model it lists at /v1/models",
        )
        self.model = model


class ServerTimeout(OllamaTimeout):
    def __init__(self, model: str, stage: str, seconds: float):
        WorkbenchError.__init__(
            self,
            f"model {model} did not answer the {stage} step within {seconds:g} s",
            fix="check that the server is not overloaded, or raise WORKBENCH_REQUEST_TIMEOUT_S",
        )


class ServerFailed(OllamaFailed):
    def __init__(self, model: str, stage: str, detail: str):
        WorkbenchError.__init__(
            self,
            f"the OpenAI-compatible server failed on the {stage} step with model {model}: {detail}",
            fix="see the server's logs; run `python -m pipeline doctor`",
        )


class OllamaServerError(OllamaFailed):
    """Ollama kept failing with a server error (HTTP 5xx, a dropped connection): the host is in trouble."""


class HostsUnavailable(OllamaUnreachable):
    """No Ollama host could take a call; `reasons` holds (host, why) for each."""

    def __init__(self, reasons: list[tuple[str, str]], model: str = ""):
        wanted = f" for {model}" if model else ""
        WorkbenchError.__init__(
            self,
            f"Ollama is not usable at any of its {len(reasons)} hosts{wanted}: "
            + "; ".join(f"{host} ({why})" for host, why in reasons),
            fix="start `ollama serve` on them and pull the same models on each, or set WORKBENCH_OLLAMA_HOSTS "
            "to hosts that run; `python -m pipeline doctor` checks each host",
        )
        self.reasons = reasons


def ollama_guard(settings: Settings, stage: str, model: str, call: Callable):
    try:
        return call()
    except (ConnectionError, httpx.ConnectError):
        raise OllamaUnreachable(settings.ollama_host) from None
    except httpx.TimeoutException:
        raise OllamaTimeout(model, stage, settings.request_timeout_s) from None
    except ollama.ResponseError as exc:
        if exc.status_code == 404 and "not found" in str(exc.error).lower():
            raise ModelMissing(model) from None
        if exc.status_code >= 500 or exc.status_code == -1:
            raise Transient(f"HTTP {exc.status_code}: {exc.error}") from None
        raise OllamaFailed(model, stage, f"HTTP {exc.status_code}: {exc.error}") from None
    except TRANSIENT as exc:
        raise Transient(f"{type(exc).__name__}: {exc}") from None


def openai_guard(settings: Settings, stage: str, model: str, call: Callable):
    try:
        return call()
    except openai.APITimeoutError:
        raise ServerTimeout(model, stage, settings.request_timeout_s) from None
    except openai.APIConnectionError as exc:
        if isinstance(exc.__cause__, httpx.ConnectError):
            raise ServerUnreachable(settings.openai_base_url) from None
        raise Transient(f"{type(exc.__cause__ or exc).__name__}: {exc}") from None
    except openai.APIStatusError as exc:
        if exc.status_code == 404:
            raise ModelNotServed(model, settings.openai_base_url) from None
        if exc.status_code >= 500:
            raise Transient(f"HTTP {exc.status_code}: {exc.message}") from None
        raise ServerFailed(model, stage, f"HTTP {exc.status_code}: {exc.message}") from None


def with_retries(settings: Settings, stage: str, model: str, call: Callable, guard: Callable):
    """`guard(settings, stage, model, call)`, retried with exponential backoff on transient failures."""
    attempts = 1 + max(0, settings.llm_retries)
    failed = ServerFailed if guard is openai_guard else OllamaServerError
    for attempt in range(attempts):
        try:
            return guard(settings, stage, model, call)
        except Transient as exc:
            if attempt == attempts - 1:
                raise failed(model, stage, f"{exc.detail} (after {attempts} tries)") from None
            time.sleep(settings.llm_backoff_s * (2**attempt))
