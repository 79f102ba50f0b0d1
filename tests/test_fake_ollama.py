"""The fake Ollama server, exercised through the real `ollama` and llama-index clients."""

import hashlib
import json
import math
import threading

import fake_ollama
import httpx
import ollama
import pytest
from fake_ollama import FakeOllama, VirtualClock, rules

from pipeline.answering.prompts import (
    GENERATE,
    GENERATE_STRICT,
    GRADE_CONTEXT,
    REWRITE_QUERY,
    STANDALONE_QUESTION,
    generate_input,
    grade_input,
    rewrite_input,
    standalone_input,
)
from pipeline.evaluation.judge_prompts import judge_input, judge_prompt
from pipeline.prompt_registry import all_prompts
from pipeline.verification.prompts import (
    EXTRACT_CLAIMS,
    EXTRACT_CLAIMS_IN_CONTEXT,
    NLI_JUDGE,
    claims_in_context_input,
    claims_input,
    nli_claim,
    nli_input,
)

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

RAG_QUESTION = "How does retrieval augmented generation ground the answer?"


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


def ask_as(client, prompt, user, last="", model=LLM, **kwargs):
    """Content of a non-streamed chat built from the registered `prompt` as the pipeline builds it: its messages
    and its output schema as the format."""
    kwargs.setdefault("format", prompt.schema())
    return client.chat(model=model, messages=prompt.messages(user, last), **kwargs).message.content


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


def test_chat_answers_from_context_with_citations(fake, client):
    messages = GENERATE.messages(generate_input(RAG_QUESTION, CONTEXT))
    response = client.chat(model=LLM, messages=messages)
    reply = response.message.content
    assert reply == (
        "Retrieval augmented generation retrieves chunks from a knowledge base. [1] "
        "The retrieved chunks ground the answer. [1]"
    )
    assert response.message.role == "assistant" and response.done and response.done_reason == "stop"
    assert response.eval_count == len(reply.split())
    assert response.prompt_eval_count == sum(len(m["content"].split()) for m in messages)
    assert response.total_duration > 0 and response.created_at
    assert fake.requests[-1]["prompt"] == "generate"


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
    answer = "Chunks are 512 tokens long [1]. The score was 28.4 percent [1, 2]! Short one. Overlap is 64 tokens."
    claims = json.loads(ask_as(client, EXTRACT_CLAIMS, claims_input("q", answer)))["claims"]
    assert claims == ["Chunks are 512 tokens long.", "The score was 28.4 percent!", "Overlap is 64 tokens."]
    declined = claims_input("q", "The knowledge base does not cover this question.")
    assert json.loads(ask_as(client, EXTRACT_CLAIMS, declined)) == {"claims": []}


def test_structured_claims_after_the_context_stop_at_the_examples_and_the_task(client):
    lead = "Context:\n[1] source: a.md\nChunks are 512 tokens long.\n\nQuestion: How long are chunks?"
    user = claims_in_context_input(lead, "Chunks are 512 tokens long [1].")
    assert json.loads(ask_as(client, EXTRACT_CLAIMS_IN_CONTEXT, user))["claims"] == ["Chunks are 512 tokens long."]


def test_structured_retry_follow_up_keeps_the_original_task(client):
    messages = EXTRACT_CLAIMS.messages(claims_input("q", "Chunk size is 512 tokens with an overlap of 64 tokens."))
    messages += [
        {"role": "assistant", "content": '{"claims": ['},
        {"role": "user", "content": "That reply is not valid JSON. Reply again with only the JSON object."},
    ]
    reply = client.chat(model=LLM, messages=messages, format=EXTRACT_CLAIMS.schema()).message.content
    assert json.loads(reply) == {"claims": ["Chunk size is 512 tokens with an overlap of 64 tokens."]}


def test_structured_relevance(client):
    relevant = json.loads(ask_as(client, GRADE_CONTEXT, grade_input("What chunk size is used?", CONTEXT)))
    assert relevant == {"relevant": True, "reason": "2 of 3 question terms found in the context", "passages": [1]}
    other = json.loads(ask_as(client, GRADE_CONTEXT, grade_input("Who painted the Mona Lisa?", CONTEXT)))
    assert other["relevant"] is False


def test_structured_verdict(client):
    claim = nli_claim("The baseline faithfulness score was 31.2 percent.")
    contradicted = json.loads(ask_as(client, NLI_JUDGE, nli_input(CONTEXT), claim))
    assert contradicted["verdict"] == "contradicted"
    assert contradicted["quote"] == "The faithfulness score of the baseline was 28.4 percent in March."
    assert contradicted["quote"] in CONTEXT
    unsupported = json.loads(ask_as(client, NLI_JUDGE, nli_input(CONTEXT), nli_claim("Bananas cure colds.")))
    assert unsupported == {"verdict": "unsupported", "quote": "", "reason": unsupported["reason"]}


def test_structured_query_score_and_replies_fitted_to_the_requested_schema(client):
    assert json.loads(ask_as(client, REWRITE_QUERY, rewrite_input("What are the chunk sizes?"))) == {
        "query": "chunk size"
    }
    correctness = judge_prompt("correctness")
    judged = json.loads(
        ask_as(client, correctness, judge_input("q", "chunks are 512 tokens", CONTEXT, "chunks are 512"))
    )
    assert judged["score"] == 5 and judged["reasoning"]
    assert json.loads(ask_as(client, correctness, judge_input("q", "Rate this.", CONTEXT, None)))["score"] == 3
    # the rule's object is fitted to whatever schema the request asks for: extra required fields get empty values
    score = {
        "type": "object",
        "required": ["score", "reasoning", "passed"],
        "properties": {"score": {"type": "integer"}, "reasoning": {"type": "string"}, "passed": {"type": "boolean"}},
    }
    judged = json.loads(ask_as(client, correctness, judge_input("q", "chunks are 512", CONTEXT, "512"), format=score))
    assert judged["score"] == 5 and judged["passed"] is False and judged["reasoning"]
    other = {
        "type": "object",
        "properties": {"items": {"type": "array"}, "n": {"type": "integer"}},
        "required": ["items", "n"],
    }
    assert json.loads(ask_as(client, REWRITE_QUERY, rewrite_input("anything"), format=other)) == {"items": [], "n": 0}


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
    history = "Turn 1 question: What is chunking?\nTurn 1 answer: Splitting text.\n"
    history += f"Turn 2 question: {earlier}\nTurn 2 answer: An answer."
    assert json.loads(ask_as(client, STANDALONE_QUESTION, standalone_input(history, question))) == {
        "standalone": standalone
    }
    alone = json.loads(ask_as(client, STANDALONE_QUESTION, standalone_input("", question)))
    assert alone == {"standalone": question}  # no earlier turn: nothing to resolve it from


# ---------------------------------------------------------------- which registered prompt built a request

REGISTERED = all_prompts()
SOME_DATA = "Context:\n[1] source: a.md\nChunks are 512 tokens long.\n\nQuestion: How long are chunks?"


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_every_registered_prompt_is_recognised_from_its_messages_and_has_a_rule(name):
    prompt = REGISTERED[name]
    assert fake_ollama.prompt_name(prompt.messages(SOME_DATA, "Claim: Chunks are long.")) == name
    assert name in rules.RULES, f"the fake has no rule for {name!r}: add one to RULES in tests/fake_ollama/rules.py"


def test_a_judge_prompt_with_corrections_after_its_rubric_is_still_recognised():
    corrected = judge_prompt("grounding", ("Question: q\nAnswer excerpt: a\nCorrect score: 2. Why: w",))
    assert corrected.messages(SOME_DATA)[0]["content"] != judge_prompt("grounding").system
    assert fake_ollama.prompt_name(corrected.messages(SOME_DATA)) == "judge_grounding"


def test_prompts_that_share_a_system_text_are_told_apart_by_their_task(fake, client):
    lead = generate_input(RAG_QUESTION, CONTEXT)
    sent = [
        (GENERATE, lead, ""),
        (GENERATE_STRICT, lead, ""),
        (EXTRACT_CLAIMS_IN_CONTEXT, claims_in_context_input(lead, "Chunks are 512 tokens [1]."), ""),
        (NLI_JUDGE, nli_input(CONTEXT), nli_claim("Chunks are 9 tokens.")),
    ]
    assert len({prompt.system for prompt, _, _ in sent}) == 1
    for prompt, user, last in sent:
        ask_as(client, prompt, user, last)
    assert [r["prompt"] for r in fake.requests] == [prompt.name for prompt, _, _ in sent]


def test_the_reply_follows_the_prompts_name_not_the_fields_of_its_schema(fake, client):
    # rewrite_query's messages with grade_context's schema get rewrite_query's reply, fitted to that schema (its
    # fields empty), and the other way round
    rewrite = json.loads(
        ask_as(client, REWRITE_QUERY, rewrite_input("What chunk size?"), format=GRADE_CONTEXT.schema())
    )
    assert rewrite == {"relevant": False, "reason": ""}  # its required fields, empty
    grade = grade_input("What chunk size is used?", CONTEXT)
    assert json.loads(ask_as(client, GRADE_CONTEXT, grade, format=REWRITE_QUERY.schema())) == {"query": ""}
    assert [r["prompt"] for r in fake.requests] == ["rewrite_query", "grade_context"]


def test_a_tests_own_rule_answers_only_the_prompt_it_is_set_for(own):
    fake, client = own
    from pipeline.verification.verifiers.llm_yes_no import LLM_VERIFIER
    from pipeline.verification.yes_no import verifier_input

    user = verifier_input(CONTEXT, "The faithfulness score of the baseline was 28.4 percent.")
    assert ask_as(client, LLM_VERIFIER, user) == fake_ollama.NO_ANSWER  # the generator's prose, by default
    fake.rules["llm_verifier"] = rules.yes_no
    assert ask_as(client, LLM_VERIFIER, user) == "Yes"
    assert ask_as(client, GENERATE, generate_input(RAG_QUESTION, CONTEXT)).endswith("[1]")  # others unchanged


def test_a_script_can_match_the_registered_prompt_a_request_was_built_from(fake, client):
    fake.enqueue("Scripted answer [1].", match=fake_ollama.built_from("generate_strict"))
    lead = generate_input(RAG_QUESTION, CONTEXT)
    assert ask_as(client, GENERATE, lead) != "Scripted answer [1]."
    system, user = (m["content"] for m in GENERATE.messages(lead))
    assert client.generate(model=LLM, system=system, prompt=user).response != "Scripted answer [1]."
    assert ask_as(client, GENERATE_STRICT, lead) == "Scripted answer [1]."


def test_a_request_no_registered_prompt_built_is_refused_with_the_reason(fake, client):
    briefly = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": RAG_PROMPT}]
    with pytest.raises(ollama.ResponseError) as refused:
        client.chat(model=LLM, messages=briefly)
    assert refused.value.status_code == 400
    assert "no registered prompt" in refused.value.error and "'Be brief.'" in refused.value.error
    assert (fake.requests[-1]["prompt"], fake.max_in_flight) == (None, 0)  # refused before it took a slot
    with pytest.raises(ollama.ResponseError) as refused:
        ask(client, rewrite_input("What chunk size?"), format=REWRITE_QUERY.schema())  # the data without the prompt
    assert "asks for a JSON format" in refused.value.error and fake.requests[-1]["refused"] == refused.value.error
    fake.enqueue("Scripted.")
    assert client.chat(model=LLM, messages=briefly).message.content == "Scripted."  # a script needs no rule
    assert ask(client, RAG_PROMPT).endswith("[1]") and fake.requests[-1]["prompt"] == fake_ollama.PLAIN


def test_a_registered_prompt_without_a_rule_is_refused_by_its_name(own):
    fake, client = own
    del fake.rules["rewrite_query"]
    with pytest.raises(ollama.ResponseError) as refused:
        ask_as(client, REWRITE_QUERY, rewrite_input("What chunk size?"))
    assert "'rewrite_query'" in refused.value.error and "RULES in tests/fake_ollama/rules.py" in refused.value.error


def test_a_prompt_registered_after_the_first_look_is_recognised(fake, client):
    from pipeline.answering.prompts import Prompt
    from pipeline.evaluation.registry import register_metric, unregister_metric

    ask_as(client, REWRITE_QUERY, rewrite_input("What chunk size?"))  # the registry has been read
    late = Prompt(name="late_metric_prompt", version="1", system="You count the words of the answer. Reply with JSON.")
    register_metric("late_metric", component="generator", prompts=(late,))(lambda inputs: None)
    try:
        with pytest.raises(ollama.ResponseError) as refused:
            ask_as(client, late, "Answer:\nChunks are 512 tokens.")
    finally:
        unregister_metric("late_metric")
        fake_ollama.prompts.registered(refresh=True)
    assert "no rule for the registered prompt 'late_metric_prompt'" in refused.value.error


def test_a_verifier_model_answers_yes_or_no_whatever_it_is_sent(fake, client):
    claim = "The faithfulness score of the baseline was 28.4 percent."
    assert ask(client, f"Document: {CONTEXT}\nClaim: {claim}", model=VERIFIER) == "Yes"
    assert ask_as(client, REWRITE_QUERY, f"Document: {CONTEXT}\nClaim: {claim}", model=VERIFIER, format=None) == "Yes"
    assert [r["prompt"] for r in fake.requests] == [fake_ollama.VERIFIER_MODEL] * 2


def test_generate_with_a_system_text_is_recognised_as_chat_is(fake, client):
    system, user = (m["content"] for m in GRADE_CONTEXT.messages(grade_input("What chunk size is used?", CONTEXT)))
    reply = client.generate(model=LLM, system=system, prompt=user, format=GRADE_CONTEXT.schema()).response
    assert json.loads(reply)["relevant"] is True and fake.requests[-1]["prompt"] == "grade_context"


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
    user = claims_input("q", "Chunk size is 512 tokens with an overlap of 64 tokens.")
    fake.inject("malformed_json")
    fake.inject("truncated_json")
    client.list()  # content faults only hit chat/generate
    for _ in range(2):
        with pytest.raises(json.JSONDecodeError):
            json.loads(ask_as(client, EXTRACT_CLAIMS, user))
    assert json.loads(ask_as(client, EXTRACT_CLAIMS, user))["claims"]


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
    reply = ask_as(client, EXTRACT_CLAIMS, claims_input("x", answer))
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
