"""The fake Ollama server, exercised through the real `ollama` and llama-index clients."""

import hashlib
import json
import math
import threading

import fake_ollama
import httpx
import ollama
import pytest
from fake_ollama import FakeOllama, VirtualClock

LLM, VERIFIER, EMBEDDER = "llama3.2", "bespoke-minicheck", "nomic-embed-text"

CONTEXT = """[1] source: rag.md
Retrieval augmented generation retrieves chunks from a knowledge base. The retrieved chunks ground the answer.

Chunk size is 512 tokens with an overlap of 64 tokens.
[2] source: eval.md
The faithfulness score of the baseline was 28.4 percent in March.
Bananas are yellow."""

RAG_PROMPT = (
    f"Answer using the context.\nQuestion: How does retrieval augmented generation ground the answer?\n"
    f"Cite sources.\nContext:\n{CONTEXT}"
)

CLAIMS_SCHEMA = {
    "type": "object",
    "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
    "required": ["claims"],
}
RELEVANT_SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["relevant", "reason"],
}
VERDICT_SCHEMA = {
    "type": "object",
    "required": ["verdict", "quote", "reason"],
    "properties": {
        "verdict": {"enum": ["supported", "unsupported", "contradicted"]},
        "quote": {"type": "string"},
        "reason": {"type": "string"},
    },
}


@pytest.fixture(scope="module")
def shared():
    """One server and client for the module; tests that change models or leave sleepers use their own."""
    with FakeOllama() as server, ollama.Client(host=server.url) as c:
        yield server, c


@pytest.fixture
def fake(shared):
    shared[0].clear()
    return shared[0]


@pytest.fixture
def client(fake, shared):
    return shared[1]


@pytest.fixture
def own():
    """A private (fake, client) pair whose state changes cannot leak into other tests."""
    with FakeOllama() as server, ollama.Client(host=server.url) as c:
        yield server, c


def ask(client, content, model=LLM, **kwargs):
    """Content of a non-streamed single-message chat."""
    return client.chat(model=model, messages=[{"role": "user", "content": content}], **kwargs).message.content


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=False))


# ---------------------------------------------------------------- metadata


def test_root_version_and_unknown_path(fake):
    with httpx.Client(base_url=fake.url) as http:
        assert http.get("/").text == "Ollama is running"
        assert http.head("/").status_code == 200
        assert "version" in http.get("/api/version").json()
        assert http.get("/api/nope").status_code == 404


def test_list_shows_models_with_stable_digests(own):
    fake, client = own
    models = {m.model: m for m in client.list().models}
    assert set(models) == {"llama3.2:latest", "bespoke-minicheck:latest", "nomic-embed-text:latest"}
    assert models["llama3.2:latest"].digest == hashlib.sha256(b"llama3.2:latest").hexdigest()
    assert models["llama3.2:latest"].details.family == "llama" and models["llama3.2:latest"].size > 0
    fake.set_digest("llama3.2", "abc123")
    assert {m.model: m.digest for m in client.list().models}["llama3.2:latest"] == "abc123"


def test_show_reports_model_info(client):
    shown = client.show("llama3.2:latest")
    assert shown.modelinfo["general.architecture"] == "llama"
    assert shown.modelinfo["llama.context_length"] == 131072
    assert "completion" in shown.capabilities and shown.template and shown.modelfile and shown.parameters
    embedder = client.show(EMBEDDER)
    assert embedder.capabilities == ["embedding"] and embedder.modelinfo["nomic-bert.embedding_length"] == 768
    with pytest.raises(ollama.ResponseError) as err:
        client.show("mistral")
    assert err.value.status_code == 404 and err.value.error == "model 'mistral' not found"


def test_ps_lists_models_after_use(own):
    client = own[1]
    assert client.ps().models == []
    ask(client, "hello")
    assert [m.model for m in client.ps().models] == ["llama3.2:latest"]


# ---------------------------------------------------------------- chat and generate


def test_chat_answers_from_context_with_citations(client):
    response = client.chat(
        model=LLM, messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": RAG_PROMPT}]
    )
    reply = response.message.content
    assert reply == (
        "Retrieval augmented generation retrieves chunks from a knowledge base. [1] "
        "The retrieved chunks ground the answer. [1]"
    )
    assert response.message.role == "assistant" and response.done and response.done_reason == "stop"
    assert response.eval_count == len(reply.split())
    assert response.prompt_eval_count == len(RAG_PROMPT.split()) + 2
    assert response.total_duration > 0 and response.created_at


def test_chat_without_matching_context_declines(client):
    assert (
        ask(client, "Question: Who painted the Mona Lisa?\nContext:\n" + CONTEXT)
        == "The knowledge base does not cover this question."
    )


def test_chat_stream_chunks_concatenate_to_full_reply(client):
    full = ask(client, RAG_PROMPT)
    chunks = list(client.chat(model=LLM, messages=[{"role": "user", "content": RAG_PROMPT}], stream=True))
    assert len(chunks) > 3
    assert "".join(c.message.content for c in chunks) == full
    assert not any(c.done for c in chunks[:-1])
    assert chunks[-1].done and chunks[-1].done_reason == "stop" and chunks[-1].eval_count == len(full.split())


def test_stream_defaults_to_true_and_null_options_are_accepted(fake):
    body = {
        "model": LLM,
        "messages": [{"role": "user", "content": RAG_PROMPT}],
        "options": {"temperature": None},
        "keep_alive": "5m",
        "think": False,
        "tools": [],
    }
    response = httpx.post(f"{fake.url}/api/chat", json=body)
    assert response.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert len(lines) > 3 and lines[-1]["done"] and not lines[0]["done"]


def test_generate_stream_and_non_stream(client):
    response = client.generate(model=LLM, prompt=RAG_PROMPT)
    assert response.response.endswith("[1]") and response.done_reason == "stop"
    parts = list(client.generate(model=LLM, prompt=RAG_PROMPT, stream=True))
    assert "".join(p.response for p in parts) == response.response and parts[-1].done


def test_empty_chat_only_loads_the_model(client):
    response = client.chat(model=LLM, messages=[])
    assert response.done_reason == "load" and response.message.content == ""


def test_chat_with_embedding_model_is_rejected(client):
    with pytest.raises(ollama.ResponseError) as err:
        ask(client, "hi", model=EMBEDDER)
    assert err.value.status_code == 400


# ---------------------------------------------------------------- rule brain


@pytest.mark.parametrize(
    "claim, expected",
    [
        ("The faithfulness score of the baseline was 28.4 percent.", "Yes"),
        ("The faithfulness score of the baseline was 31.2 percent.", "No"),
        ("Bananas are purple and grow on the moon.", "No"),
    ],
)
def test_verifier_checks_claim_against_document(client, claim, expected):
    prompt = f"Document: {CONTEXT}\nClaim: {claim}"
    assert client.generate(model=VERIFIER, prompt=prompt).response == expected
    assert ask(client, prompt, model=VERIFIER) == expected


def test_structured_claims(client):
    prompt = (
        "Split the answer into claims.\nQuestion: q\nAnswer:\n"
        "Chunks are 512 tokens long [1]. The score was 28.4 percent [1, 2]! Short one. Overlap is 64 tokens."
    )
    claims = json.loads(ask(client, prompt, format=CLAIMS_SCHEMA))["claims"]
    assert claims == ["Chunks are 512 tokens long.", "The score was 28.4 percent!", "Overlap is 64 tokens."]
    declined = "Answer:\nThe knowledge base does not cover this question."
    assert json.loads(ask(client, declined, format=CLAIMS_SCHEMA)) == {"claims": []}


def test_structured_claims_after_the_context_stop_at_the_examples_and_the_task(client):
    from pipeline.verification.prompts import EXTRACT_CLAIMS_IN_CONTEXT, claims_in_context_input

    lead = "Context:\n[1] source: a.md\nChunks are 512 tokens long.\n\nQuestion: How long are chunks?"
    (_, user) = EXTRACT_CLAIMS_IN_CONTEXT.messages(claims_in_context_input(lead, "Chunks are 512 tokens long [1]."))
    assert json.loads(ask(client, user["content"], format=CLAIMS_SCHEMA))["claims"] == ["Chunks are 512 tokens long."]


def test_structured_retry_follow_up_keeps_the_original_task(client):
    task = "Answer:\nChunk size is 512 tokens with an overlap of 64 tokens."
    messages = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": '{"claims": ['},
        {"role": "user", "content": "That reply is not valid JSON. Reply again with only the JSON object."},
    ]
    reply = client.chat(model=LLM, messages=messages, format=CLAIMS_SCHEMA).message.content
    assert json.loads(reply) == {"claims": ["Chunk size is 512 tokens with an overlap of 64 tokens."]}


def test_structured_relevance(client):
    relevant = json.loads(
        ask(client, "Question: What chunk size is used?\nContext:\n" + CONTEXT, format=RELEVANT_SCHEMA)
    )
    assert relevant == {"relevant": True, "reason": "2 of 3 question terms found in the context"}
    other = json.loads(
        ask(client, "Question: Who painted the Mona Lisa?\nContext:\n" + CONTEXT, format=RELEVANT_SCHEMA)
    )
    assert other["relevant"] is False


def test_structured_verdict(client):
    claim = "Claim: The baseline faithfulness score was 31.2 percent."
    contradicted = json.loads(ask(client, f"Context:\n{CONTEXT}\n{claim}", format=VERDICT_SCHEMA))
    assert contradicted["verdict"] == "contradicted"
    assert contradicted["quote"] == "The faithfulness score of the baseline was 28.4 percent in March."
    assert contradicted["quote"] in CONTEXT
    unsupported = json.loads(ask(client, f"Context:\n{CONTEXT}\nClaim: Bananas cure colds.", format=VERDICT_SCHEMA))
    assert unsupported == {"verdict": "unsupported", "quote": "", "reason": unsupported["reason"]}


def test_structured_query_score_and_other_schemas(client):
    query = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    assert json.loads(ask(client, "Question: What are the chunk sizes?", format=query)) == {"query": "chunk size"}
    score = {
        "type": "object",
        "required": ["score", "reasoning", "passed"],
        "properties": {"score": {"type": "integer"}, "reasoning": {"type": "string"}, "passed": {"type": "boolean"}},
    }
    judged = json.loads(ask(client, "Reference: chunks are 512 tokens\nAnswer: chunks are 512 tokens", format=score))
    assert judged["score"] == 5 and judged["passed"] is False and judged["reasoning"]
    assert json.loads(ask(client, "Rate this.", format=score))["score"] == 3
    other = {
        "type": "object",
        "properties": {"items": {"type": "array"}, "n": {"type": "integer"}},
        "required": ["items", "n"],
    }
    assert json.loads(ask(client, "anything", format=other)) == {"items": [], "n": 0}


@pytest.mark.parametrize(
    ("earlier", "question", "standalone"),
    [
        ("Who introduced the Transformer?", "When was it published?", "When was the Transformer published?"),
        ("Who introduced the Transformer?", "How big is its encoder?", "How big is the Transformer's encoder?"),
        ("Who introduced the Transformer?", "What about BERT?", "Who introduced BERT?"),
        ("What is RAG?", "Who wrote it?", "Who wrote RAG?"),
        ("Who introduced the Transformer?", "How many layers does BERT have?", "How many layers does BERT have?"),
    ],
)
def test_structured_standalone_question_resolves_the_reference_from_the_latest_turn(
    client, earlier, question, standalone
):
    schema = {"type": "object", "properties": {"standalone": {"type": "string"}}, "required": ["standalone"]}
    prompt = "Conversation so far:\nTurn 1 question: What is chunking?\nTurn 1 answer: Splitting text.\n"
    prompt += f"Turn 2 question: {earlier}\nTurn 2 answer: An answer.\n\nQuestion: {question}"
    assert json.loads(ask(client, prompt, format=schema)) == {"standalone": standalone}
    alone = json.loads(ask(client, f"Question: {question}", format=schema))
    assert alone == {"standalone": question}  # no earlier turn: nothing to resolve it from


# ---------------------------------------------------------------- embeddings


def test_embed_single_and_batch(client):
    single = client.embed(model=EMBEDDER, input="search_query: what is the chunk size?")
    assert len(single.embeddings) == 1 and len(single.embeddings[0]) == 768
    query = single.embeddings[0]
    docs = client.embed(
        model=EMBEDDER, input=["search_document: Chunk size is 512 tokens.", "search_document: Bananas are yellow.", ""]
    ).embeddings
    assert all(math.isclose(math.sqrt(cosine(v, v)), 1.0) for v in docs)
    assert cosine(query, docs[0]) > 0.5 > 0.1 > abs(cosine(query, docs[1]))
    assert docs[2][0] == 1.0


def test_legacy_embeddings_endpoint(client):
    embedding = client.embeddings(model=EMBEDDER, prompt="chunk size").embedding
    assert embedding == client.embed(model=EMBEDDER, input="chunk size").embeddings[0]


def test_llama_index_embedding_batch(fake):
    from llama_index.embeddings.ollama import OllamaEmbedding

    embedder = OllamaEmbedding(model_name=EMBEDDER, base_url=fake.url)
    vectors = embedder.get_text_embedding_batch(["chunk size is 512", "chunk sizes are 512", "bananas"])
    assert len(vectors) == 3 and cosine(vectors[0], vectors[1]) > 0.99 and cosine(vectors[0], vectors[2]) < 0.1


# ---------------------------------------------------------------- models, scripting, recording


def test_missing_model_is_404(own):
    fake, client = own
    for call in (lambda: ask(client, "hi", model="mistral"), lambda: client.embed(model="mistral", input="x")):
        with pytest.raises(ollama.ResponseError) as err:
            call()
        assert err.value.status_code == 404
        assert err.value.error == 'model "mistral" not found, try pulling it first'
    fake.remove_model("llama3.2:latest")
    with pytest.raises(ollama.ResponseError):
        ask(client, "hi")
    fake.add_model("llama3.2")
    assert ask(client, "hi")


def test_enqueue_overrides_once_then_rules_resume(fake, client):
    fake.enqueue({"claims": ["scripted"]}, model="llama3.2:latest", times=2)
    fake.enqueue("only for verifier", model=VERIFIER)
    fake.enqueue("matched", match=lambda body: "special" in json.dumps(body))
    assert ask(client, "special request") == '{"claims": ["scripted"]}'
    assert ask(client, "special request") == '{"claims": ["scripted"]}'
    assert ask(client, "special request") == "matched"
    assert ask(client, "Document: x\nClaim: yellow bananas", model=VERIFIER) == "only for verifier"
    assert ask(client, "Document: x\nClaim: yellow bananas", model=VERIFIER) == "No"


def test_requests_are_recorded_and_cleared(fake, client):
    ask(client, "hello", model="llama3.2:latest")
    client.list()
    assert [(r["path"], r["model"]) for r in fake.requests] == [("/api/chat", "llama3.2:latest"), ("/api/tags", None)]
    assert fake.requests[0]["body"]["messages"][0]["content"] == "hello" and fake.requests[1]["body"] is None
    fake.inject("500")
    fake.clear()
    assert fake.requests == [] and ask(client, "hello")


# ---------------------------------------------------------------- faults


def test_fault_500_and_not_found(fake, client):
    fake.inject("500", path="/api/chat")
    fake.inject("not_found", model=LLM)
    client.list()  # the faults are filtered to other requests
    with pytest.raises(ollama.ResponseError) as err:
        ask(client, "hi", model=VERIFIER)
    assert err.value.status_code == 500 and err.value.error == "internal server error"
    with pytest.raises(ollama.ResponseError) as err:
        ask(client, "hi")
    assert err.value.status_code == 404
    assert ask(client, "hi")


def test_fault_drop(fake, client):
    fake.inject("drop")
    with pytest.raises(httpx.TransportError):
        ask(client, "hi")
    assert ask(client, "hi")


def test_fault_timeout(own):
    fake = own[0]
    fake.inject("timeout", path="/api/chat")
    with ollama.Client(host=fake.url, timeout=0.5) as impatient, pytest.raises(httpx.TimeoutException):
        ask(impatient, "hi")


def test_faults_delay_then_answer_normally():
    with FakeOllama(fault_delay_s=0.05) as fake, ollama.Client(host=fake.url) as client:
        fake.inject("timeout")
        assert ask(client, RAG_PROMPT).endswith("[1]")


def test_content_faults_break_json(fake, client):
    prompt = "Answer:\nChunk size is 512 tokens with an overlap of 64 tokens."
    fake.inject("malformed_json")
    fake.inject("truncated_json")
    client.list()  # content faults only hit chat/generate
    for _ in range(2):
        with pytest.raises(json.JSONDecodeError):
            json.loads(ask(client, prompt, format=CLAIMS_SCHEMA))
    assert json.loads(ask(client, prompt, format=CLAIMS_SCHEMA))["claims"]


def test_inject_rejects_unknown_fault(fake):
    with pytest.raises(ValueError):
        fake.inject("explode")


# ---------------------------------------------------------------- latency
# The latency model is checked on a VirtualClock (its waits are instant and exact) and concurrency by the fake's
# in-flight counters with replies held until the test has seen what it needs: no assertion here reads a wall
# clock, so a loaded machine cannot fail them. How fast things are belongs in bench/.


def virtual_fake(**latency):
    clock = VirtualClock()
    return clock, FakeOllama(clock=clock, sleep=clock.sleep, **latency)


def test_latency_uses_parallel_slots():
    reply = "one two three four five six seven eight nine ten"
    clock, server = virtual_fake(seconds_per_token=0.01, slots=4)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue(reply, times=9)
        assert ask(client, "hi") == reply
        single = fake.requests[0]
        assert single["done"] - single["received"] == pytest.approx(0.1)  # 10 reply tokens x 10 ms
        threads = [threading.Thread(target=ask, args=(client, "hi")) for _ in range(8)]
        with fake.hold() as gate:
            for t in threads:
                t.start()
            # four requests hold the four slots, the other four wait for one
            assert fake.wait_until(lambda f: gate.waiting == 4 and f.in_flight == 8), (gate.waiting, fake.in_flight)
            assert fake.generating == 4
        for t in threads:
            t.join()
    assert fake.max_in_flight == 8 and fake.max_generating == 4  # never more than the slots at once
    assert gate.caught == 4 and gate.timed_out == 0 and fake.in_flight == 0


def test_streamed_reply_is_paced_one_chunk_per_token():
    reply = "one two three four five six"
    clock, server = virtual_fake(seconds_per_token=0.05)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue(reply)
        start = clock()
        gate = fake.hold(after_chunks=1)
        parts = []
        for part in client.chat(model=LLM, messages=[{"role": "user", "content": "hi"}], stream=True):
            if not parts:
                # the client has the first chunk while the fake still holds back the second: chunks reach the
                # client as they are sent, not all at the end
                assert fake.wait_until(lambda f: gate.waiting == 1) and len(fake.chunk_log) == 1
                gate.release()
            parts.append((part.message.content, part.done))
        log = list(fake.chunk_log)
    words = [text for text, done in parts if not done]
    assert "".join(words) == reply and len(words) == 6
    assert [(r, c, text) for r, c, _, text in log] == [(0, i, w) for i, w in enumerate(words)]
    # one token's time apart, the first one token after the request
    assert [t - start for _, _, t, _ in log] == pytest.approx([0.05 * (i + 1) for i in range(6)])
    assert gate.caught == 1 and gate.timed_out == 0


def test_prompt_tokens_are_charged_before_the_first_chunk_inside_the_slot():
    prompt = " ".join(["word"] * 20)
    clock, server = virtual_fake(seconds_per_token=0.0, seconds_per_prompt_token=0.01, slots=1)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("a b", times=2)
        start = clock()
        final = list(client.generate(model=LLM, prompt=prompt, stream=True))[-1]
        assert fake.chunk_log[0][2] - start == pytest.approx(0.2)  # 20 prompt tokens x 10 ms, then the first chunk
        assert final.prompt_eval_count == 20 and final.prompt_eval_duration == pytest.approx(0.2e9)
        fake.clear()
        threads = [threading.Thread(target=client.generate, args=(LLM, prompt)) for _ in range(2)]
        with fake.hold(times=1) as gate:
            for t in threads:
                t.start()
            # one slot: while the first is held inside it, the second has arrived and waits
            assert fake.wait_until(lambda f: gate.waiting == 1 and f.in_flight == 2)
            assert fake.generating == 1 and len(fake.requests) == 2
        for t in threads:
            t.join()
        assert fake.max_generating == 1
        first, second = sorted(fake.requests, key=lambda r: r["started"])
        assert second["started"] >= first["done"]  # the two prompt phases ran one after another


def test_non_streamed_reply_waits_for_prompt_and_decode_and_logs_one_chunk():
    clock, server = virtual_fake(seconds_per_token=0.02, seconds_per_prompt_token=0.01)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("one two three four five")
        start = clock()
        response = client.chat(model=LLM, messages=[{"role": "user", "content": "a b c d e f g h i j"}])
        assert response.message.content == "one two three four five"
        assert clock.slept == pytest.approx([0.1, 0.1])  # 10 prompt tokens x 10 ms, then 5 reply tokens x 20 ms
        assert [(r, c, text) for r, c, _, text in fake.chunk_log] == [(0, 0, "one two three four five")]
        assert fake.chunk_log[0][2] - start == pytest.approx(0.2)
        record = fake.requests[0]
        assert (record["prompt_tokens"], record["eval_tokens"]) == (10, 5)
        assert record["done"] - record["received"] == pytest.approx(0.2)
        assert response.prompt_eval_duration == pytest.approx(0.1e9)
        assert response.eval_duration == pytest.approx(0.1e9)
        fake.set_latency(0.0, seconds_per_prompt_token=0.0)
        ask(client, "a b c d e f g h i j")
        assert len(clock.slept) == 2  # no latency: no modelled wait at all


def test_the_default_clock_really_waits():
    """Without a clock given, the model's waits are real ones (a lower bound only, which load cannot break)."""
    with FakeOllama(seconds_per_token=0.01) as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("one two three four five")
        ask(client, "hi")
        record = fake.requests[0]
        assert record["done"] - record["received"] >= 0.05  # 5 reply tokens x 10 ms


def test_answer_length_is_a_setting():
    context = "[1] source: a.md\n" + " ".join(f"Retrieval step {n} ranks passages." for n in range(1, 6))
    prompt = f"Question: What does retrieval rank?\nContext:\n{context}"
    with FakeOllama() as fake, ollama.Client(host=fake.url) as client:
        assert ask(client, prompt).count("[1]") == 2
        fake.answer_sentences = 4
        assert ask(client, prompt) == " ".join(f"Retrieval step {n} ranks passages. [1]" for n in range(1, 5))


# ---------------------------------------------------------------- paraphrased answers

PARAPHRASE_PROMPT = (
    "Question: How does retrieval augmented generation ground the answer with 512 tokens chunks and what "
    f"was the baseline score?\n\nContext:\n{CONTEXT}"
)


def extract(client, answer):
    reply = ask(client, f"Question: x\n\nAnswer:\n{answer}", format=CLAIMS_SCHEMA)
    return json.loads(reply)["claims"]


def verdict(client, claim):
    return ask(client, f"Document: {CONTEXT}\nClaim: {claim}", model=VERIFIER)


def test_paraphrased_answers_reword_join_and_fabricate_on_the_first_try():
    passages = [text for _, text in fake_ollama._blocks(CONTEXT)]
    with FakeOllama(answer_style="paraphrase") as fake, ollama.Client(host=fake.url) as client:
        first = ask(client, PARAPHRASE_PROMPT)
        assert first.startswith("According to the sources, retrieval augmented generation retrieves chunks from the ")
        assert first.count("According to the sources, ") == 2  # four overlapping context sentences, joined in twos
        for sentence in fake_ollama.sentences(fake_ollama._CITATION.sub("", first)):
            assert not any(sentence.rstrip(".").lower() in p.lower() for p in passages), sentence
        claims = extract(client, first)
        assert claims[:4] == [
            "Retrieval augmented generation retrieves chunks from the knowledge base.",
            "This retrieved chunks ground the answer.",
            "Chunk size was 512 tokens with an overlap of 64 tokens.",
            "This faithfulness score of the baseline was 28.4 percent in March.",
        ]
        assert len(claims) == 6 and "1971" in claims[4] and "1972" in claims[5]
        for claim in claims[:4]:
            assert not any(claim.rstrip(".").lower() in p.lower() for p in passages), claim
        assert [verdict(client, c) for c in claims] == ["Yes"] * 4 + ["No"] * 2

        again = ask(client, PARAPHRASE_PROMPT)  # the same question line: no fabrication
        assert first.startswith(again.rstrip(".")) and len(extract(client, again)) == 4
        other = ask(client, PARAPHRASE_PROMPT.replace("baseline score", "baseline's score"))
        assert "1971" in other  # another question is a first answer of its own
        fake.forget_answers()
        assert ask(client, PARAPHRASE_PROMPT) == first


def test_a_faithful_first_answer_is_paraphrased_and_an_unfaithful_one_fabricates():
    passages = [text for _, text in fake_ollama._blocks(CONTEXT)]
    with FakeOllama(answer_style="paraphrase", unfaithful_first=False) as fake, ollama.Client(host=fake.url) as c:
        faithful = ask(c, PARAPHRASE_PROMPT)
        claims = extract(c, faithful)
        assert len(claims) == 4 and [verdict(c, claim) for claim in claims] == ["Yes"] * 4
        for sentence in fake_ollama.sentences(fake_ollama._CITATION.sub("", faithful)) + claims:
            assert not any(sentence.rstrip(".").lower() in p.lower() for p in passages), sentence
        assert ask(c, PARAPHRASE_PROMPT) == faithful  # asked again: the same faithful answer
        fake.forget_answers()
        fake.unfaithful_first = True  # set on the running fake: the next first answer fabricates
        unfaithful = ask(c, PARAPHRASE_PROMPT)
        assert unfaithful.startswith(faithful.rstrip(".")) and "1971" in unfaithful
        assert [verdict(c, claim) for claim in extract(c, unfaithful)] == ["Yes"] * 4 + ["No"] * 2


def test_fabricated_sentences_keep_faithfulness_below_threshold():
    context = "[1] source: a.md\n" + " ".join(
        f"Retrieval step {n} ranks passages, and step {n} drops weak passages." for n in range(1, 7)
    )
    prompt = f"Question: What does retrieval step rank and drop?\n\nContext:\n{context}"
    answer = fake_ollama.paraphrase(prompt, fabricate=True)
    claims = fake_ollama.extract_claims(f"Answer:\n{answer}", split=True)["claims"]
    supported = [fake_ollama.verify(f"Document: {context}\nClaim: {c}") == "Yes" for c in claims]
    assert len(claims) == 16 and sum(supported) == 12  # 12 true claims need 4 fabricated ones: 0.75
    assert fake_ollama.extract_claims(f"Answer:\n{answer}")["claims"] == fake_ollama.sentences(
        fake_ollama._CITATION.sub("", answer)
    )  # without split, one claim per sentence (the quote style's extractor is unchanged)


def test_split_claim_keeps_short_parts_together():
    assert fake_ollama.split_claim("Cats sleep; dogs bark loudly at night.") == [
        "Cats sleep; dogs bark loudly at night."
    ]
    assert fake_ollama.split_claim("the cache is on; the store keeps runs, and runs have ids [1].") == [
        "The cache is on.",
        "The store keeps runs.",
        "Runs have ids [1].",
    ]


def test_unknown_answer_style_is_refused():
    with pytest.raises(ValueError, match="paraphrase"):
        FakeOllama(answer_style="summarise")


def test_with_the_prompt_cache_a_call_sharing_a_slots_prefix_is_charged_only_for_its_suffix():
    passages = " ".join(f"passage{n}" for n in range(40))
    clock, server = virtual_fake(seconds_per_token=0.0, seconds_per_prompt_token=0.01, slots=1, prompt_cache=True)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("ok", times=4)
        first = client.generate(model=LLM, prompt=f"{passages} grade them")
        second = client.generate(model=LLM, prompt=f"{passages} now answer the question")
        other = client.generate(model=LLM, prompt="something else entirely")
        again = client.generate(model=LLM, prompt=f"{passages} answer again")
    assert clock.slept == pytest.approx([0.42, 0.04, 0.03, 0.42])  # 42 words; 40 shared, 4 new; 3; evicted: 42
    assert [r["cached_tokens"] for r in fake.requests] == [0, 40, 0, 0]
    assert (first.prompt_eval_count, second.prompt_eval_count, other.prompt_eval_count) == (42, 4, 3)
    assert again.prompt_eval_count == 42 and [r["prompt_tokens"] for r in fake.requests] == [42, 44, 3, 42]


def test_with_the_prompt_cache_a_call_to_another_model_does_not_evict_a_models_prefix():
    """Each model's runner keeps its own cache: the verifier's calls between two of the generator's leave the
    generator's prefix in place."""
    passages = " ".join(f"passage{n}" for n in range(40))
    clock, server = virtual_fake(seconds_per_token=0.0, seconds_per_prompt_token=0.01, slots=1, prompt_cache=True)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("ok", times=4)
        client.generate(model=LLM, prompt=f"{passages} grade them")
        client.generate(model="bespoke-minicheck", prompt=f"Document: {passages} Claim: one")
        client.generate(model=LLM, prompt=f"{passages} now answer the question")
        client.generate(model="bespoke-minicheck", prompt=f"Document: {passages} Claim: two")
    assert [r["cached_tokens"] for r in fake.requests] == [0, 0, 40, 42]  # 40 passages; "Document:" + 40 + "Claim:"
    assert clock.slept == pytest.approx([0.42, 0.43, 0.04, 0.01])


def test_with_two_slots_each_keeps_its_own_prefix_and_a_call_finds_the_slot_that_holds_its_own():
    a, b = " ".join(["alpha"] * 30), " ".join(["beta"] * 30)
    clock, server = virtual_fake(seconds_per_token=0.0, seconds_per_prompt_token=0.01, slots=2, prompt_cache=True)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("ok", times=4)
        for prompt in (f"{a} one", f"{b} one", f"{b} two", f"{a} two"):
            client.generate(model=LLM, prompt=prompt)
    assert [r["cached_tokens"] for r in fake.requests] == [0, 0, 30, 30]


def test_without_the_prompt_cache_every_prompt_is_charged_whole():
    passages = " ".join(f"passage{n}" for n in range(40))
    clock, server = virtual_fake(seconds_per_token=0.0, seconds_per_prompt_token=0.01, slots=1)
    with server as fake, ollama.Client(host=fake.url) as client:
        fake.enqueue("ok", times=2)
        client.generate(model=LLM, prompt=f"{passages} grade them")
        client.generate(model=LLM, prompt=f"{passages} now answer the question")
    assert clock.slept == pytest.approx([0.42, 0.44]) and [r["cached_tokens"] for r in fake.requests] == [0, 0]
