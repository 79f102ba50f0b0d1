import dataclasses
import json

import pytest

from pipeline.errors import ModelMissing, OllamaFailed, OllamaTimeout, OllamaUnreachable
from pipeline.models.backends import OllamaChat
from pipeline.models.llm import LLM, forget_digests
from pipeline.models.structured import ask
from pipeline.verification.prompts import EXTRACT_CLAIMS
from store.llm_log import calls_for_eval_run, calls_for_run, save_calls

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
    assert str(caught.value) == (
        f"Ollama is not reachable at {settings.ollama_host}: start it with "
        "`ollama serve` (or set OLLAMA_HOST to where it runs)"
    )


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


# ---------------------------------------------------------------- through LlamaIndex's Ollama


def chat_bodies(fake):
    return [r["body"] for r in fake.requests if r["path"] == "/api/chat"]


def test_num_ctx_is_the_context_window_setting_not_the_models_full_length(fake, settings, db):
    LLM(settings, db).chat("generate", "llama3.2", HELLO)
    LLM(dataclasses.replace(settings, context_window=2048, temperature=0.3, seed=7), db).chat(
        "generate", "llama3.2", HELLO
    )
    first, second = (body["options"] for body in chat_bodies(fake))
    assert first == {"num_ctx": 8192, "temperature": 0.0, "seed": 42}
    assert second == {"num_ctx": 2048, "temperature": 0.3, "seed": 7}
    assert not [r for r in fake.requests if r["path"] == "/api/show"]  # the 131,072 of /api/show is never read


def test_per_call_options_reach_the_server_and_the_cache_key(fake, settings, db):
    llm = LLM(settings, db)
    llm.chat("generate", "llama3.2", HELLO, options={"num_predict": 64})
    assert not llm.chat("generate", "llama3.2", HELLO).cache_hit
    assert chat_bodies(fake)[0]["options"] == {"num_ctx": 8192, "temperature": 0.0, "seed": 42, "num_predict": 64}
    assert "num_predict" not in chat_bodies(fake)[1]["options"]


def test_llama_index_objects_are_shared_and_their_metadata_needs_no_show(fake, settings):
    backend = OllamaChat(settings)
    model = backend.llm("llama3.2")
    assert OllamaChat(dataclasses.replace(settings, temperature=0.9)).llm("llama3.2") is model
    assert OllamaChat(dataclasses.replace(settings, context_window=4096)).llm("llama3.2") is not model
    assert backend.llm("bespoke-minicheck") is not model
    assert model.metadata.context_window == 8192 and model.metadata.model_name == "llama3.2"
    assert fake.requests == []


def test_a_structured_call_sends_the_schema_as_format(fake, settings, db):
    result = ask(
        LLM(settings, db),
        "extract_claims",
        "llama3.2",
        EXTRACT_CLAIMS,
        "Question: q\nAnswer:\nChunks are 512 tokens long [1].",
    )
    assert result.value.claims == ["Chunks are 512 tokens long."]
    assert chat_bodies(fake)[0]["format"] == EXTRACT_CLAIMS.schema()


def test_a_fenced_reply_from_ollama_is_parsed_and_cached(fake, settings, db):
    fake.enqueue('Here you go:\n```json\n{"claims": ["Chunks are 512 tokens."]}\n```')
    llm = LLM(settings, db)
    first = ask(llm, "extract_claims", "llama3.2", EXTRACT_CLAIMS, "Answer:\nChunks are 512 tokens.")
    again = ask(llm, "extract_claims", "llama3.2", EXTRACT_CLAIMS, "Answer:\nChunks are 512 tokens.")
    assert first.value.claims == again.value.claims == ["Chunks are 512 tokens."]
    assert [c.cache_hit for c in llm.calls] == [False, True] and len(chat_bodies(fake)) == 1


# ---------------------------------------------------------------- the record of every call


def test_every_call_is_recorded_with_its_texts(fake, settings, db):
    llm = LLM(settings, db, origin="evaluation", eval_run_id=5)
    reply = llm.chat("generate", "llama3.2", HELLO)
    cached = llm.chat("generate", "llama3.2", HELLO)
    fresh, hit = llm.calls
    assert json.loads(fresh.prompt_text) == HELLO and fresh.completion_text == reply.text
    assert cached.cache_hit and hit.cache_hit and hit.completion_text == reply.text
    assert hit.prompt_text == fresh.prompt_text and hit.prompt_tokens == fresh.prompt_tokens
    assert {(c.origin, c.backend, c.eval_run_id, c.span_id) for c in llm.calls} == {("evaluation", "ollama", 5, None)}


def test_texts_can_be_switched_off(fake, settings, db):
    llm = LLM(dataclasses.replace(settings, log_call_text=False), db)
    llm.chat("generate", "llama3.2", HELLO)
    llm.embed_query("What is RAG?")
    assert [(c.prompt_text, c.completion_text) for c in llm.calls] == [(None, None), (None, None)]
    assert llm.calls[0].prompt_tokens > 0


def test_a_failed_call_is_recorded_with_its_error(fake, settings, db):
    fake.remove_model("llama3.2")
    llm = LLM(settings, db)
    with pytest.raises(ModelMissing):
        llm.chat("generate", "llama3.2", HELLO)
    (call,) = llm.calls
    assert call.error == "model llama3.2 is not pulled: `ollama pull llama3.2`"
    assert call.digest is None and call.completion_text is None and json.loads(call.prompt_text) == HELLO


def test_embedding_calls_record_the_texts_as_sent_or_a_count(fake, settings, db):
    llm = LLM(settings, db, origin="ingest")
    llm.embed_query("What is RAG?")
    llm.embed_documents(["Chunk one.", "Chunk two."])
    llm.embed_documents([f"chunk {n} " + "word " * 100 for n in range(8)])
    query, small, big = llm.calls
    assert query.prompt_text == fake.requests[-3]["body"]["input"] == "search_query: What is RAG?"
    assert query.completion_text == "1 vector of 768 dimensions" and query.stage == "embed_query"
    assert (
        small.prompt_text
        == "\n\n".join(fake.requests[-2]["body"]["input"])
        == "search_document: Chunk one.\n\nsearch_document: Chunk two."
    )
    assert small.completion_text == "2 vectors of 768 dimensions"
    assert big.prompt_text == "8 texts, 4,214 characters" and big.origin == "ingest"
    assert all(len(c.digest) == 64 and len(c.prompt_hash) == 16 for c in llm.calls)


# ---------------------------------------------------------------- the call log in DuckDB


def text_rows(db):
    """Call texts stored (response-cache entries are rows of the same table)."""
    with db.cursor() as cur:
        return cur.execute("SELECT count(*) FROM llm_texts WHERE cache_key64 IS NULL").fetchone()[0]


def test_a_repeated_prompt_is_stored_once(fake, settings, db):
    for _ in range(2):
        llm = LLM(dataclasses.replace(settings, cache_enabled=False), db)
        llm.chat("generate", "llama3.2", HELLO)
        save_calls(db, llm.take_calls(), run_id=1)
    calls = calls_for_run(db, 1)
    assert len(calls) == 2 and text_rows(db) == 2  # one prompt, one completion
    assert calls[0]["prompt_text"] == calls[1]["prompt_text"] and json.loads(calls[0]["prompt_text"]) == HELLO
    assert calls[0]["completion_text"] and calls[0]["backend"] == "ollama" and calls[0]["origin"] == "chat"


def test_no_texts_are_stored_when_texts_are_off(fake, settings, db):
    llm = LLM(dataclasses.replace(settings, log_call_text=False), db)
    llm.chat("generate", "llama3.2", HELLO)
    save_calls(db, llm.take_calls(), run_id=1)
    assert text_rows(db) == 0
    assert calls_for_run(db, 1)[0]["prompt_text"] is None and calls_for_run(db, 1)[0]["prompt_tokens"] > 0


def test_a_cached_call_is_stored_with_cache_hit_and_its_text(fake, settings, db):
    llm = LLM(settings, db)
    reply = llm.chat("generate", "llama3.2", HELLO)
    save_calls(db, llm.take_calls(), llm.take_cache_entries(), run_id=1)
    again = LLM(settings, db)
    assert again.chat("generate", "llama3.2", HELLO).cache_hit
    save_calls(db, again.take_calls(), again.take_cache_entries(), run_id=2)
    (stored,) = calls_for_run(db, 2)
    assert stored["cache_hit"] and stored["completion_text"] == reply.text and text_rows(db) == 2


def test_calls_of_an_evaluation_are_found_by_its_id(fake, settings, db):
    llm = LLM(settings, db, origin="evaluation", eval_run_id=3)
    llm.chat("judge_correctness", "llama3.2", HELLO)
    save_calls(db, llm.take_calls())
    other = LLM(settings, db)
    other.chat("generate", "llama3.2", HELLO)
    save_calls(db, other.take_calls())
    found = calls_for_eval_run(db, 3)
    assert [(c["stage"], c["eval_run_id"]) for c in found] == [("judge_correctness", 3)]


# -- streamed chat -----------------------------------------------------------------------------


def test_a_streamed_reply_reaches_the_caller_piece_by_piece_and_is_recorded_like_chat(fake, settings, db):
    gate = fake.hold(after_chunks=1)  # the fake sends the first chunk, then waits for the caller to have it
    llm = LLM(settings, db)
    pieces = []

    def on_delta(delta):
        if not pieces:  # handed on as it came, while the fake still holds back the rest
            held.append(fake.wait_until(lambda f: gate.waiting == 1) and len(fake.chunk_log))
            gate.release()
        pieces.append(delta)

    held = []
    reply = llm.stream_chat("generate", "llama3.2", HELLO, on_delta)
    assert held == [1] and gate.timed_out == 0
    assert len(pieces) > 1 and "".join(pieces) == reply.text == llm.chat("generate", "llama3.2", HELLO).text
    call = llm.calls[0]
    assert (call.stage, call.completion_text, call.error, call.cache_hit) == ("generate", reply.text, None, False)
    assert call.prompt_tokens == reply.prompt_tokens > 0 and call.completion_tokens == reply.completion_tokens > 0
    assert json.loads(call.prompt_text) == HELLO


def test_a_cached_streamed_reply_arrives_as_one_piece(fake, settings, db):
    llm = LLM(settings, db)
    first = llm.stream_chat("generate", "llama3.2", HELLO, lambda delta: None)
    pieces = []
    again = llm.stream_chat("generate", "llama3.2", HELLO, pieces.append)
    assert again.cache_hit and pieces == [first.text] and llm.calls[-1].cache_hit


def test_a_stream_is_retried_before_its_first_piece(fake, settings, db):
    fake.inject("500", model="llama3.2")
    llm = LLM(settings, db)
    reply = llm.stream_chat("generate", "llama3.2", HELLO, lambda delta: None)
    assert reply.text and len([r for r in fake.requests if r["path"] == "/api/chat"]) == 2


def test_a_stopped_stream_is_recorded_as_stopped_and_not_cached(fake, settings, db):
    llm = LLM(settings, db)
    pieces = []
    with fake.hold(after_chunks=1, times=1):  # the rest of the reply is not sent before the caller stops
        reply = llm.stream_chat("generate", "llama3.2", HELLO, pieces.append, stop=lambda: len(pieces) >= 1)
    assert reply.text == pieces[0] and len(pieces) == 1
    assert llm.calls[0].error.startswith("stopped") and llm.calls[0].completion_text == pieces[0]
    assert not llm.stream_chat("generate", "llama3.2", HELLO, lambda delta: None).cache_hit


def test_an_unreachable_server_fails_a_stream_like_a_chat(fake, settings, db):
    fake.stop()
    with pytest.raises(OllamaUnreachable):
        LLM(settings, db).stream_chat("generate", "llama3.2", HELLO, lambda delta: None)
