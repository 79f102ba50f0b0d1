"""The OpenAI-compatible backend (llm_backend = openai) against a stand-in server over HTTP."""

import dataclasses
import json

import pytest
from fake_openai import FakeOpenAI

from pipeline.config import load_settings
from pipeline.errors import ModelMissing, OllamaFailed, OllamaUnreachable
from pipeline.models.health import check_ollama
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.verification.prompts import EXTRACT_CLAIMS
from store.llm_log import calls_for_run, save_calls

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello to the tests"}]
CLAIMS = {"claims": ["The index held 21 million passages."]}


@pytest.fixture
def server():
    with FakeOpenAI(models=("llama3.2", "bespoke-minicheck")) as fake:
        yield fake


@pytest.fixture
def settings(fake, server, monkeypatch):
    """OpenAI-compatible server for chat; the fake Ollama stays for embeddings."""
    monkeypatch.setenv("WORKBENCH_LLM_BACKEND", "openai")
    monkeypatch.setenv("WORKBENCH_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("WORKBENCH_OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("WORKBENCH_MODEL_REVISION", "rev-7")
    return load_settings()


def test_a_chat_call_goes_to_the_server_with_options_and_records_its_tokens(fake, server, settings, db):
    server.enqueue("Hello, tests.")
    llm = LLM(settings, db)
    reply = llm.chat("generate", "llama3.2", HELLO)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("Hello, tests.", 7, 2)
    body = server.chat_requests()[0]
    assert body["model"] == "llama3.2" and body["messages"] == HELLO
    assert body["temperature"] == 0.0 and body["seed"] == 42 and "response_format" not in body
    assert server.requests[0]["authorization"] == "Bearer sk-test"
    call = llm.calls[0]
    assert (call.backend, call.digest, call.prompt_tokens, call.completion_tokens) == ("openai", "llama3.2@rev-7", 7, 2)
    assert json.loads(call.prompt_text) == HELLO and call.completion_text == "Hello, tests."
    assert fake.requests == []  # no digest lookup, no chat on Ollama


def test_a_structured_call_sends_the_schema_and_reads_a_fenced_reply(server, settings, db):
    server.enqueue("Sure! Here are the claims:\n```json\n" + json.dumps(CLAIMS) + "\n```\nAnything else?")
    llm = LLM(settings, db)
    result = ask(llm, "extract_claims", "llama3.2", EXTRACT_CLAIMS, "Answer:\nThe index held 21 million passages.")
    assert result.value is not None and result.value.claims == CLAIMS["claims"]
    assert len(server.chat_requests()) == 1  # parsed at once, no retry
    body = server.chat_requests()[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == EXTRACT_CLAIMS.schema()
    system, user = body["messages"]
    assert system["content"] == EXTRACT_CLAIMS.messages("")[0]["content"]  # the prompt's own, shared by other calls
    assert user["content"].startswith("Answer:\nThe index held") and "matches this JSON schema" in user["content"]
    assert llm.calls[0].completion_text.startswith("Sure! Here are the claims:")


def test_prose_that_never_holds_valid_json_is_invalid_after_one_retry(server, settings, db):
    server.enqueue("I think the claims are: the index was big.", times=2)
    result = ask(LLM(settings, db), "extract_claims", "llama3.2", EXTRACT_CLAIMS, "Answer:\nThe index was big.")
    assert result.value is None
    assert "invalid extract_claims reply after a retry: reply: no JSON object in the reply" in result.invalid_reason
    assert len(server.chat_requests()) == 2


def test_the_model_revision_is_the_identity_in_the_cache_key(server, settings, db):
    llm = LLM(settings, db)
    assert llm.digest("llama3.2") == "llama3.2@rev-7"
    llm.chat("generate", "llama3.2", HELLO)
    assert llm.chat("generate", "llama3.2", HELLO).cache_hit
    save_calls(db, llm.take_calls(), llm.take_cache_entries())
    again = LLM(settings, db)
    assert again.chat("generate", "llama3.2", HELLO).cache_hit  # from the store
    newer = LLM(dataclasses.replace(settings, model_revision="rev-8"), db)
    assert newer.digest("llama3.2") == "llama3.2@rev-8"
    assert not newer.chat("generate", "llama3.2", HELLO).cache_hit
    assert len(server.chat_requests()) == 2
    unpinned = LLM(dataclasses.replace(settings, model_revision=""), db)
    assert unpinned.digest("llama3.2") == "llama3.2@unpinned"


def test_calls_are_stored_with_backend_and_texts(server, settings, db):
    server.enqueue("Hello, tests.")
    llm = LLM(settings, db, origin="evaluation")
    llm.chat("generate", "llama3.2", HELLO)
    save_calls(db, llm.take_calls(), run_id=99)
    stored = calls_for_run(db, 99)[0]
    assert (stored["backend"], stored["origin"], stored["digest"]) == ("openai", "evaluation", "llama3.2@rev-7")
    assert json.loads(stored["prompt_text"]) == HELLO and stored["completion_text"] == "Hello, tests."


def test_embeddings_stay_on_ollama(fake, settings, db):
    llm = LLM(settings, db)
    assert len(llm.embed_query("What is RAG?")) == 768
    call = llm.calls[0]
    assert call.backend == "ollama" and len(call.digest) == 64
    assert [r["path"] for r in fake.requests] == ["/api/tags", "/api/embed"]


def test_a_model_the_server_does_not_serve_says_so(server, settings, db):
    with pytest.raises(ModelMissing) as caught:
        LLM(settings, db).chat("generate", "qwen2.5", HELLO)
    assert str(caught.value).startswith(f"model qwen2.5 is not served at {settings.openai_base_url}")


def test_server_errors_are_retried_then_named(server, settings, db):
    server.inject("500", times=2)
    assert LLM(settings, db).chat("generate", "llama3.2", HELLO).text == "ok"
    server.inject("drop", times=3)
    llm = LLM(settings, db)
    with pytest.raises(OllamaFailed) as caught:
        llm.chat("generate", "llama3.2", HELLO)
    assert "OpenAI-compatible server failed on the generate step" in caught.value.message
    assert "after 3 tries" in caught.value.message
    assert llm.calls[0].error == str(caught.value) and llm.calls[0].completion_text is None
    assert len(server.chat_requests()) == 6


def test_an_unreachable_server_names_its_url(server, settings, db):
    gone = dataclasses.replace(settings, openai_base_url="http://127.0.0.1:9/v1")
    with pytest.raises(OllamaUnreachable) as caught:
        LLM(gone, db).chat("generate", "llama3.2", HELLO)
    assert caught.value.message == "the OpenAI-compatible server is not reachable at http://127.0.0.1:9/v1"
    assert "WORKBENCH_OPENAI_BASE_URL" in caught.value.fix


def test_health_checks_the_server_its_models_and_ollama_for_embeddings(fake, server, settings):
    checks = {c.name: c for c in check_ollama(dataclasses.replace(settings, judge_model="qwen2.5"))}
    assert checks["openai server"].ok and "(2 models served)" in checks["openai server"].detail
    assert checks["model llama3.2"].ok and "revision rev-7" in checks["model llama3.2"].detail
    assert not checks["model qwen2.5"].ok and "bespoke-minicheck, llama3.2" in checks["model qwen2.5"].fix
    assert checks["ollama"].ok and checks["model nomic-embed-text"].ok
    assert "embed" in checks["model nomic-embed-text"].detail and "llama3.2" not in str(checks["ollama"])


def test_health_says_when_the_server_is_down(fake, settings):
    checks = check_ollama(dataclasses.replace(settings, openai_base_url="http://127.0.0.1:9/v1"))
    assert not checks[0].ok and checks[0].name == "openai server"
    assert "not reachable at http://127.0.0.1:9/v1" in checks[0].detail


def test_a_streamed_chat_goes_out_piece_by_piece_with_its_usage(server, settings, db):
    server.enqueue("Hello there, streaming tests.")
    llm = LLM(settings, db)
    pieces = []
    reply = llm.stream_chat("generate", "llama3.2", HELLO, pieces.append)
    assert pieces == ["Hello ", "there, ", "streaming ", "tests."] and reply.text == "Hello there, streaming tests."
    body = server.chat_requests()[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True} and body["seed"] == 42
    call = llm.calls[0]
    assert (call.backend, call.prompt_tokens, call.completion_tokens, call.completion_text) == (
        "openai",
        7,
        4,
        reply.text,
    )
