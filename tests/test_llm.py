import dataclasses

import pytest

from pipeline.errors import ModelMissing, OllamaFailed, OllamaTimeout, OllamaUnreachable
from pipeline.models.llm import LLM, forget_digests

HELLO = [{"role": "user", "content": "Question: hello\n\nContext:\n[1] source: a.md\nhello world"}]


def test_a_call_is_recorded_with_digest_tokens_and_latency(settings, db):
    llm = LLM(settings, db)
    reply = llm.chat("generate", "llama3.2", HELLO)
    assert reply.text and not reply.cache_hit
    call = llm.calls[0]
    assert call.stage == "generate" and call.model == "llama3.2"
    assert len(call.digest) == 64 and len(call.prompt_hash) == 16
    assert call.prompt_tokens > 0 and call.completion_tokens > 0 and call.latency_ms > 0


def test_cache_key_includes_the_model_digest(fake, settings, db):
    llm = LLM(settings, db)
    first = llm.chat("generate", "llama3.2", HELLO)
    assert llm.chat("generate", "llama3.2", HELLO).cache_hit
    fake.set_digest("llama3.2", "f" * 64)
    forget_digests()
    again = llm.chat("generate", "llama3.2", HELLO)
    assert not again.cache_hit and again.text == first.text
    assert [c.cache_hit for c in llm.calls] == [False, True, False]


def test_cache_can_be_switched_off(fake, settings, db):
    llm = LLM(dataclasses.replace(settings, cache_enabled=False), db)
    llm.chat("generate", "llama3.2", HELLO)
    llm.chat("generate", "llama3.2", HELLO)
    assert len([r for r in fake.requests if r["path"] == "/api/chat"]) == 2


def test_an_unaccepted_reply_is_not_cached(fake, settings, db):
    llm = LLM(settings, db)
    llm.chat("verify", "bespoke-minicheck", HELLO, accept=lambda text: False)
    assert not llm.chat("verify", "bespoke-minicheck", HELLO).cache_hit


@pytest.mark.parametrize("fault", ["500", "drop"])
def test_transient_failures_are_retried(fake, settings, db, fault):
    fake.inject(fault, path="/api/chat", times=2)
    reply = LLM(settings, db).chat("generate", "llama3.2", HELLO)
    assert reply.text
    assert len([r for r in fake.requests if r["path"] == "/api/chat"]) == 3


def test_persistent_server_errors_give_up_with_the_stage_named(fake, settings, db):
    fake.inject("500", path="/api/chat", times=5)
    with pytest.raises(OllamaFailed) as caught:
        LLM(settings, db).chat("generate", "llama3.2", HELLO)
    assert "the generate step with model llama3.2" in caught.value.message
    assert "after 3 tries" in caught.value.message


def test_timeout_names_the_model_and_setting(fake, settings, db):
    fake.inject("timeout", path="/api/chat")
    with pytest.raises(OllamaTimeout) as caught:
        LLM(dataclasses.replace(settings, request_timeout_s=0.3), db).chat("generate", "llama3.2", HELLO)
    assert caught.value.message == "model llama3.2 did not answer the generate step within 0.3 s"
    assert "WORKBENCH_REQUEST_TIMEOUT_S" in caught.value.fix


def test_unreachable_ollama_says_how_to_start_it(fake, settings, db):
    fake.stop()
    with pytest.raises(OllamaUnreachable) as caught:
        LLM(settings, db).chat("generate", "llama3.2", HELLO)
    assert str(caught.value) == (f"Ollama is not reachable at {settings.ollama_host}: start it with "
                                 "`ollama serve` (or set OLLAMA_HOST to where it runs)")


def test_missing_model_says_what_to_pull(fake, settings, db):
    fake.remove_model("llama3.2")
    with pytest.raises(ModelMissing) as caught:
        LLM(settings, db).chat("generate", "llama3.2", HELLO)
    assert str(caught.value) == "model llama3.2 is not pulled: `ollama pull llama3.2`"


def test_a_model_removed_after_listing_is_reported_as_missing(fake, settings, db):
    llm = LLM(settings, db)
    llm.pulled_models()
    fake.inject("not_found", path="/api/chat")
    with pytest.raises(ModelMissing):
        llm.chat("generate", "llama3.2", HELLO)


def test_query_embeddings_use_the_prefix_and_are_cached(fake, settings, db):
    llm = LLM(settings, db)
    vector = llm.embed_query("What is RAG?")
    assert len(vector) == 768
    assert fake.requests[-1]["body"]["input"] == "search_query: What is RAG?"
    assert llm.embed_query("What is RAG?") == vector
    assert [c.cache_hit for c in llm.calls] == [False, True]
