"""The seed-pipeline model of `python -m bench answer-vs-seed` makes the calls issue 13 describes."""

import ollama
import pytest

from bench import seed_pipeline

CONTEXT = """[1] source: rag.md
Retrieval augmented generation retrieves chunks from a knowledge base. The retrieved chunks ground the answer.
[2] source: eval.md
The faithfulness score of the baseline was 28.4 percent in March."""
QUESTION = "How does retrieval augmented generation ground the answer with retrieved chunks?"


@pytest.fixture
def client(fake):
    with ollama.Client(host=fake.url) as c:
        yield c


def chats(fake):
    return [r for r in fake.requests if r["path"] == "/api/chat"]


def test_one_generation_when_every_claim_is_supported(fake, client):
    fake.set_latency(0.02, slots=4, seconds_per_prompt_token=0.002)  # overlapping checks would show
    run = seed_pipeline.answer(client, QUESTION, CONTEXT)
    requests = chats(fake)
    assert run.generations == 1 and run.faithfulness == 1.0 and run.claims_checked == 2
    assert run.calls == {"llama3.2": 2, "bespoke-minicheck": 2}
    generate, extract, *checks = requests
    assert not generate["body"].get("format") and extract["body"]["format"] == seed_pipeline.CLAIMS_SCHEMA
    assert CONTEXT in generate["body"]["messages"][1]["content"]
    assert [r["model"] for r in checks] == ["bespoke-minicheck:latest"] * 2
    for check in checks:  # each claim on the whole retrieved context
        assert check["body"]["messages"][0]["content"].startswith(f"Document: {CONTEXT}\nClaim: ")
    assert checks[1]["received"] >= checks[0]["done"]  # one after another
    assert fake.max_in_flight == 1  # every call waited for the one before
    assert all(r["body"]["stream"] is False for r in requests)


def test_regenerates_at_most_twice_while_faithfulness_is_below_threshold(fake, client):
    fake.enqueue("No", model="bespoke-minicheck", times=6)
    run = seed_pipeline.answer(client, QUESTION, CONTEXT)
    assert run.generations == 3 and run.faithfulness == 0.0 and run.claims_checked == 6
    assert run.calls == {"llama3.2": 6, "bespoke-minicheck": 6}
    assert [bool(r["body"].get("format")) for r in chats(fake) if r["model"] == "llama3.2:latest"] == [False, True] * 3


def test_stops_regenerating_once_faithfulness_reaches_threshold(fake, client):
    fake.enqueue("No", model="bespoke-minicheck", times=1)  # first attempt 1/2 supported; the second 2/2
    run = seed_pipeline.answer(client, QUESTION, CONTEXT)
    assert run.generations == 2 and run.faithfulness == 1.0
    assert run.calls == {"llama3.2": 4, "bespoke-minicheck": 4}


def test_an_answer_without_claims_is_not_checked(fake, client):
    run = seed_pipeline.answer(client, "Who painted the Mona Lisa?", CONTEXT)
    assert run.answer == "The knowledge base does not cover this question."
    assert run.faithfulness is None and run.calls == {"llama3.2": 2}
    assert seed_pipeline.parse_claims("not json") == [] and seed_pipeline.parse_claims('{"claims": 3}') == []


def test_bench_finds_the_first_answer_chunk_and_names_stages(fake, client):
    from bench import answer_vs_seed
    from pipeline.answering import prompts

    grade = prompts.GRADE_CONTEXT.messages(prompts.grade_input(QUESTION, CONTEXT))
    client.chat(model="llama3.2", messages=grade, format=prompts.GRADE_CONTEXT.schema(), stream=False)
    generate = prompts.GENERATE.messages(prompts.generate_input(QUESTION, CONTEXT))
    pieces = list(client.chat(model="llama3.2", messages=generate, stream=True))
    assert answer_vs_seed.first_answer_chunk(fake, "llama3.2") == fake.chunk_log[1][2]
    assert fake.chunk_log[1][:2] == (1, 0) and fake.chunk_log[1][3] == pieces[0].message.content
    assert [answer_vs_seed.stage_of(r) for r in fake.requests] == ["grade_context", "generate"]
    tokens, calls = answer_vs_seed.served(fake)
    assert calls == {"llama3.2": 2} and tokens == sum(len(m["content"].split()) for m in grade + generate)
    strict = {"body": {"messages": prompts.GENERATE_STRICT.messages("x")}, "model": "llama3.2:latest"}
    assert answer_vs_seed.stage_of(strict) == "generate_strict"


def test_on_paraphrased_answers_the_seed_regenerates_once():
    from fake_ollama import FakeOllama

    question = "How does retrieval augmented generation ground the answer, and what was the baseline score?"
    with FakeOllama(answer_style="paraphrase") as fake, ollama.Client(host=fake.url) as client:
        run = seed_pipeline.answer(client, question, CONTEXT)
        assert run.generations == 2 and run.faithfulness == 1.0
        assert run.claims_checked == 5 + 3  # 3 true claims and 2 fabricated ones, then the 3 true ones
        assert run.calls == {"llama3.2": 4, "bespoke-minicheck": 8}
        assert "According to the sources, " in run.answer and "1971" not in run.answer
        fake.forget_answers()
        assert seed_pipeline.answer(client, question, CONTEXT).generations == 2
