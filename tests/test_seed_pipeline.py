"""The seed-pipeline model of `python -m bench answer-vs-seed` makes the calls issue 13 describes."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


# -- the seed's own retrieval and the bench's server profiles (issue 30) --------------------------------------

KB_FOLDER = Path(__file__).resolve().parent.parent / "data" / "kb"


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def test_seed_index_chunks_to_500_characters_and_returns_the_top_3_by_cosine(fake, client, tmp_path):
    from fake_ollama import embed_vector

    sentence = "Chunk {n} mentions retrieval, embeddings and vector search number {n} of many."
    long_paragraph = " ".join(sentence.format(n=n) for n in range(12))  # ~950 characters: split on sentences
    (tmp_path / "a.md").write_text(
        f"# Title\n\nShort paragraph about tokenization.\n\n{long_paragraph}\n\n"
        "A line about BM25 lexical search.\nAnother line about dense retrieval and embeddings.\n",
        encoding="utf-8",
    )
    (tmp_path / "b.txt").write_text(("x" * 1200) + "\n\nRetrieval with embeddings ranks chunks.", encoding="utf-8")
    (tmp_path / "skip.json").write_text('{"not": "a document"}', encoding="utf-8")
    index = seed_pipeline.SeedIndex(client, "nomic-embed-text", [tmp_path])
    texts = [text for _, text in index.chunks]
    assert all(0 < len(t) <= seed_pipeline.CHUNK_SIZE for t in texts)
    assert {source for source, _ in index.chunks} == {"a.md", "b.txt"}
    assert " ".join(" ".join(texts).split()).count("Chunk ") == 12  # no sentence lost, none cut
    assert texts.count("x" * 500) == 2 and "x" * 200 in texts  # a 1,200-character word: cut every 500
    assert all(len(t) > 250 for t in texts if t.startswith("Chunk "))  # sentences merged up to the limit
    with_kb = seed_pipeline.SeedIndex(client, "nomic-embed-text", [KB_FOLDER])
    assert len(with_kb.chunks) > 100 and max(len(t) for _, t in with_kb.chunks) <= 500

    question = "How are chunks ranked by retrieval with embeddings?"
    fake.clear()
    found = index.search(question)
    by_hand = sorted(
        range(len(texts)), key=lambda i: -cosine(embed_vector(question, 768), embed_vector(texts[i], 768))
    )[:3]
    assert [text for _, _, text in found] == [texts[i] for i in by_hand]
    scores = [score for score, _, _ in found]
    assert scores == sorted(scores, reverse=True) and len(found) == 3
    assert scores[0] == pytest.approx(cosine(embed_vector(question, 768), embed_vector(texts[by_hand[0]], 768)))
    assert index.context(question) == "\n\n".join(
        f"[{n}] source: {source}\n{text}" for n, (_, source, text) in enumerate(found, start=1)
    )
    from bench import answer_vs_seed

    assert [r["path"] for r in fake.requests] == ["/api/embed"] * 2  # the question, not counted as prompt tokens
    assert answer_vs_seed.served(fake) == (0, {})


def test_the_laptop_profiles_charge_a_one_slot_server(kb_db, fake, monkeypatch):
    import dataclasses

    from bench import answer_vs_seed
    from pipeline.config import load_settings

    monkeypatch.setenv("WORKBENCH_CACHE_ENABLED", "false")
    settings = load_settings()
    laptops = [p for p in answer_vs_seed.PROFILES if p.name.startswith("laptop")]
    assert [(p.slots, p.prompt_cache) for p in laptops] == [(1, False), (1, True)]
    assert {p.name for p in answer_vs_seed.PROFILES} == {"GPU-like", "CPU-like", "laptop", "laptop, prompt cache"}
    with ollama.Client(host=fake.url) as index_client:
        index = seed_pipeline.SeedIndex(index_client, settings.embed_model, [KB_FOLDER])
        lane = answer_vs_seed.Lane(settings, kb_db, fake, index)
        for profile in laptops:  # the profile's shape, faster
            lane.configure(dataclasses.replace(profile, seconds_per_token=0.0005, seconds_per_prompt_token=0.00001))
            assert lane.engine.settings.ollama_slots_per_host == 1 and fake.prompt_cache is profile.prompt_cache
            question = "What did the RAG paper use as its retriever?"
            fake.forget_answers()
            lane.fresh_slots()
            mine = answer_vs_seed.ours(lane.engine, fake, question)
            assert fake.max_generating == 1 and mine.prompt_tokens > 0 and mine.verified is not None
            base = answer_vs_seed.seed(lane.client, lane.retrieve, fake, question)
            assert fake.max_generating == 1 and base.calls["llama3.2"] >= 2
            generate = next(r for r in fake.requests if answer_vs_seed.stage_of(r) == "generate")
            assert generate["body"]["messages"][1]["content"].count("] source: ") == 3  # the seed's top 3
            # the server itself has one slot: of two requests at once, the second waits for the first
            fake.clear()
            both_received = lambda f: sum(r["path"] == "/api/chat" for r in f.requests) >= 2  # noqa: E731
            with fake.hold(until=both_received, timeout_s=5), ThreadPoolExecutor(2) as pool:
                list(
                    pool.map(
                        lambda text: lane.client.chat(model="llama3.2", messages=[{"role": "user", "content": text}]),
                        ["hi", "hello"],
                    )
                )
            assert fake.max_generating == 1
        lane.client.close()


def test_the_first_answer_is_generated_when_its_first_generation_call_ends():
    from collections import Counter

    from bench import answer_vs_seed

    stages = [("grade_context", 0.0, 1.0, 9), ("generate", 1.0, 5.0, 9), ("generate_strict", 6.0, 9.0, 9)]
    assert answer_vs_seed.Sample(9.0, 27, Counter(), stages=stages).generated == 5.0
    checks_only = [("bespoke-minicheck", 0.0, 1.0, 9)]
    assert answer_vs_seed.Sample(1.0, 9, Counter(), stages=checks_only).generated is None


# -- the share of unfaithful first answers and the engine's floor (issue 48) ----------------------------------


def test_the_unfaithful_share_picks_questions_evenly():
    from bench import answer_vs_seed

    third = answer_vs_seed.unfaithful_questions(30, 1 / 3)
    assert sum(third) == 10 and [i for i, u in enumerate(third) if u][:3] == [2, 5, 8]
    assert answer_vs_seed.unfaithful_questions(4, 1.0) == [True] * 4
    assert answer_vs_seed.unfaithful_questions(4, 0.0) == [False] * 4
    assert sum(answer_vs_seed.unfaithful_questions(30, 0.5)) == 15
    with pytest.raises(ValueError, match="fraction from 0 to 1"):
        answer_vs_seed.unfaithful_questions(3, 1.5)


def test_a_lane_gives_both_pipelines_the_same_faithful_or_unfaithful_first_answer(kb_db, fake, monkeypatch):
    from bench import answer_vs_seed
    from pipeline.config import load_settings

    monkeypatch.setenv("WORKBENCH_CACHE_ENABLED", "false")
    fake.answer_style = "paraphrase"
    lane = answer_vs_seed.Lane(load_settings(), kb_db, fake)
    question = "What did the RAG paper use as its retriever?"
    for unfaithful in (False, True):
        mine, base = lane.both(question, unfaithful)
        assert mine.unfaithful_first is base.unfaithful_first is unfaithful
        assert base.retries == int(unfaithful)  # the seed regenerates only an unfaithful first answer
        assert (mine.retries + mine.trims > 0) is unfaithful  # and the engine repairs only that one
    lane.client.close()


def test_the_floor_is_the_engines_grade_and_first_answer_and_faithful_questions_are_held_to_it():
    from collections import Counter

    from bench import answer_vs_seed

    def sample(wall, generated, unfaithful):
        stages = [("grade_context", 0.0, 1.0, 10), ("generate", 1.0, generated, 10)]
        return answer_vs_seed.Sample(wall, 100, Counter(llama3=2), stages=stages, unfaithful_first=unfaithful)

    mine = [sample(6.0, 4.0, False), sample(10.0, 4.0, True), sample(3.0, 2.0, False)]
    walls = zip((12.0, 20.0, 6.0), mine, strict=True)
    base = [answer_vs_seed.Sample(w, 100, Counter(llama3=3), unfaithful_first=m.unfaithful_first) for w, m in walls]
    figures = {f.name.split(": ", 1)[1].rsplit(" (", 1)[0]: f for f in answer_vs_seed.figures("p", mine, base)}
    floor = figures["floor, the engine's grade + first answer"]
    assert floor.value == 4.0 and floor.target is None
    held = figures["wall / floor, faithful first answers, total"]
    assert held.value == (6.0 + 3.0) / (4.0 + 2.0) and held.target == 1.25 and held.meets == "NO"
    wall = figures["wall time, total"]
    assert wall.value == 19.0 / 38.0 and wall.target == 0.45 and wall.meets == "NO"
    assert "0.50 on 2 faithful first answers; 0.50 on 1 unfaithful first answers" in wall.note
    assert figures["prompt tokens, total"].target == 1.0


def test_the_bench_reports_the_decision_the_seeds_own_generation_and_tokens_by_first_answer():
    from collections import Counter

    from bench import answer_vs_seed

    def sample(wall, tokens, generated, decided=None, unfaithful=False):
        stages = [("generate", 0.0, generated, tokens)]
        s = answer_vs_seed.Sample(wall, tokens, Counter(), stages=stages, decided=decided)
        s.unfaithful_first = unfaithful
        return s

    mine = [sample(6.0, 300, 4.0, decided=5.0), sample(9.0, 900, 4.0, decided=6.0, unfaithful=True)]
    base = [sample(10.0, 400, 2.0), sample(10.0, 500, 5.0, unfaithful=True)]
    shown, own = answer_vs_seed.decided_figures("p", mine, base)
    assert shown.value == 11.0 / 20.0 and "ran 2.00 s more" in shown.note  # (1 + 3) / 2 after the decision
    assert own.value == 7.0 / 20.0 and "median 0.35" in own.note
    assert answer_vs_seed.wall_by_first_answer(mine, base, "prompt_tokens") == (
        "0.75 on 1 faithful first answers; 1.80 on 1 unfaithful first answers"
    )


def test_context_coverage_counts_the_references_content_words_the_context_holds():
    from bench.context_coverage import coverage

    reference = "RAG used 21 million passages."  # rag, used, 21, million, passage
    assert coverage(reference, "[1] source: rag.md\nRAG was used with 21 million passages") == 1.0
    assert coverage(reference, "The RAG passages") == 2 / 5
    assert coverage("", "anything") == 1.0
