"""The schedule of a question's calls chosen from the generator host's slots, and the context budget (issue 30)."""

from __future__ import annotations

import dataclasses
from itertools import groupby

from pipeline.answering.engine import VerifiedQueryEngine, run_config
from pipeline.answering.prompts import GENERATE, GENERATE_STRICT, generate_input
from pipeline.models import slots
from store.runs import get_run
from store.spans import spans_for_run

RAG_QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"


def ask(kb_db, settings, question=RAG_QUESTION):
    events = list(VerifiedQueryEngine(settings=settings, db=kb_db).stream(question))
    return events, events[-1].result


def steps(events):
    return [e.kind for e in events if e.kind not in ("token", "sentence", "verdict")]


def chats(fake, schema_key=None):
    """The generator's chat requests: with a `format` holding schema_key, or the generations (no format)."""
    out = []
    for r in fake.requests:
        if r["path"] != "/api/chat" or r["model"] != "llama3.2:latest":
            continue
        fmt = r["body"].get("format")
        if (schema_key is None and not fmt) or (schema_key and schema_key in ((fmt or {}).get("properties") or {})):
            out.append(r)
    return out


def schema_has(key):
    return lambda body: key in ((body.get("format") or {}).get("properties") or {})


def test_one_slot_grades_first_then_generates_from_the_passages_it_kept(fake, settings, kb_db):
    fake.set_latency(0.002)
    fake.enqueue(
        {"relevant": True, "reason": "states it", "passages": [1, 2]}, model="llama3.2", match=schema_has("relevant")
    )
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1))
    assert steps(events)[:5] == ["retrieve", "plan", "grade", "budget", "generate"]
    plan = next(e for e in events if e.kind == "plan")
    assert plan.schedule == "sequential" and "1 slot" in plan.why
    (grade,), generation = chats(fake, "relevant"), chats(fake)[0]
    assert grade["done"] <= generation["received"]  # nothing generated before the grade was in
    kept = next(e for e in events if e.kind == "budget").cuts
    read = {c.n for c in kept if c.kept}
    assert read <= {1, 2} and [c.why for c in kept if c.n > 2] == ["not relevant to the question (context grade)"] * 3
    assert all(r["done"] <= generation["done"] or r["received"] >= generation["done"] for r in chats(fake, "claims"))
    context = generation["body"]["messages"][1]["content"]
    assert read and all(f"[{n}] source:" in context for n in read)
    assert all(f"[{c.n}] source:" not in context for c in kept if not c.kept)
    assert result.status == "accepted"


def arrived(schema_key):
    """fake -> whether a generator request of that kind (None: a generation) has come in."""
    return lambda server: bool(chats(server, schema_key))


def test_four_slots_grade_alongside_the_first_answer(fake, settings, kb_db):
    # each reply waits for the other request to arrive: both are in flight at once on any machine, however busy
    fake.hold(match=schema_has("relevant"), until=arrived(None), times=1)
    fake.hold(match=lambda body: not body.get("format"), until=arrived("relevant"), times=1)
    events, _ = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=4))
    plan = next(e for e in events if e.kind == "plan")
    assert plan.schedule == "overlapped" and "4 slots" in plan.why
    (grade,), generation = chats(fake, "relevant"), chats(fake)[0]
    assert grade["received"] < generation["done"] and generation["received"] < grade["done"]


def test_auto_reads_where_the_host_runs_the_generator(fake, settings, kb_db):
    ask(kb_db, settings)  # the generator is loaded now
    slots.forget()
    fake.gpu = False
    assert slots.host_slots(settings, settings.ollama_host, "llama3.2") == slots.Slots(
        1, "Ollama's default: llama3.2:latest runs on the CPU"
    )
    assert slots.schedule(settings)[0] == "sequential"
    slots.forget()
    fake.gpu = True
    assert slots.host_slots(settings, settings.ollama_host, "llama3.2").count == 4
    assert slots.schedule(settings)[0] == "overlapped"
    assert slots.schedule(dataclasses.replace(settings, answer_schedule="sequential")) == (
        "sequential",
        "set by answer_schedule",
    )


def test_one_slot_generates_nothing_for_a_question_the_sources_do_not_cover(fake, settings, kb_db):
    lean = dataclasses.replace(settings, ollama_slots_per_host=1, retrieval_floor=0.0)
    events, result = ask(kb_db, lean, "What is the capital city of Peru?")
    assert steps(events) == ["retrieve", "plan", "grade", "rewrite", "retrieve", "grade", "abstain", "final"]
    assert result.status == "abstained" and chats(fake) == []  # not one generation, not even a withdrawn one


def test_the_context_budget_bounds_what_the_generator_reads_and_the_run_shows_the_cuts(fake, settings, kb_db):
    from pipeline.answering.budget import count_tokens

    tight = dataclasses.replace(settings, ollama_slots_per_host=1, context_budget_tokens=60)
    events, result = ask(kb_db, tight)
    budget = next(e for e in events if e.kind == "budget")
    cuts = budget.cuts
    assert 0 < sum(c.kept for c in cuts) <= 60 < sum(c.tokens for c in cuts)
    context = chats(fake)[0]["body"]["messages"][1]["content"].split("\n\nQuestion:")[0]
    passages_text = [block.split("\n", 1)[1] for block in context.removeprefix("Context:\n").split("\n\n[")]
    assert sum(count_tokens(t) for t in passages_text) <= 60
    assert "21 million passages" in result.answer and result.status == "accepted"
    # the stored evidence spans point into the whole chunk the drilldown shows, not into the window
    stored = get_run(kb_db, result.run_id)
    chunk_text = {r["chunk_id"]: r["text"] for r in stored["retrievals"]}
    spans = [c for c in stored["claims"] if c["span_start"] is not None]
    assert spans
    for claim in spans:
        assert chunk_text[claim["evidence_chunk_id"]][claim["span_start"] : claim["span_end"]] == claim["evidence"]
    # what was cut is in the run's trace, which the drilldown shows
    (step,) = [s for s in spans_for_run(kb_db, result.run_id) if s.name == "context budget"]
    assert step.attributes["budget"] == 60
    assert {k: v for k, v in step.attributes.items() if k.startswith("passage_")} == {
        f"passage_{c.n}": f"{c.kept} of {c.tokens} tokens: {c.why}" for c in cuts
    }


def test_without_a_budget_the_generator_reads_whole_chunks(fake, settings, kb_db):
    events, _ = ask(kb_db, dataclasses.replace(settings, context_budget_tokens=0))
    cuts = next(e for e in events if e.kind == "budget").cuts
    assert all(c.kept == c.tokens and c.why == "whole chunk" for c in cuts)


def test_a_retry_shares_the_first_answers_prefix_up_to_its_question():
    lead = generate_input("Q?", "[1] source: a\nText.")
    first = GENERATE.messages(lead)
    retry = GENERATE_STRICT.messages(generate_input("Q?", "[1] source: a\nText.", ["A failed claim."]))
    assert first[0] == retry[0]
    assert first[1]["content"].startswith(lead + "\n\n") and retry[1]["content"].startswith(lead + "\n\n")
    assert first[1]["content"].endswith(GENERATE.task) and retry[1]["content"].endswith(GENERATE_STRICT.task)


def test_a_slot_with_the_prompt_cache_charges_the_retry_only_past_the_first_answers_prompt():
    import ollama
    from fake_ollama import FakeOllama

    context = "[1] source: a.md\n" + "Word " * 300
    first = GENERATE.messages(generate_input(RAG_QUESTION, context))
    retry = GENERATE_STRICT.messages(generate_input(RAG_QUESTION, context, ["A failed claim."]))
    with FakeOllama(prompt_cache=True, slots=1) as fake, ollama.Client(host=fake.url) as client:
        client.chat(model="llama3.2", messages=first, stream=False)
        client.chat(model="llama3.2", messages=retry, stream=False)
        _, second = fake.requests[-2:]
    shared = len((first[0]["content"] + " " + generate_input(RAG_QUESTION, context)).split())
    assert second["cached_tokens"] >= shared - 1 > 300


def test_one_slot_extracts_the_claims_without_the_context_when_another_model_extracts_them(fake, settings, kb_db):
    """Each model has a prompt cache of its own, so a claim model other than the generator's would read the whole
    context again: the written answer's claims are then extracted from the question and the answer alone."""
    from pipeline.verification.prompts import EXTRACT_CLAIMS

    fake.add_model("qwen2.5")
    fake.answer_style = "paraphrase"  # sentences not found verbatim in a passage: their claims are extracted
    fake.set_latency(0.0, slots=1)
    other = dataclasses.replace(settings, ollama_slots_per_host=1, cache_enabled=False, claim_model="qwen2.5")
    _, result = ask(kb_db, other)
    (extraction,) = [r for r in fake.requests if r["path"] == "/api/chat" and r["model"] == "qwen2.5:latest"]
    system, user = (m["content"] for m in extraction["body"]["messages"])
    generation = chats(fake)[0]["body"]["messages"][-1]["content"]
    context = generation[: generation.index("\n\nQuestion:")]
    assert system == EXTRACT_CLAIMS.messages("")[0]["content"]
    assert user.startswith(f"Question: {RAG_QUESTION}") and context not in user
    assert [c for a in result.attempts for c in a.claims if c.verdict == "supported"]
    assert run_config(other)["prompts"]["extract_claims"] == EXTRACT_CLAIMS.version  # declared: a run may send it


def test_a_claim_checked_on_a_window_is_stored_against_the_whole_chunk():
    from pipeline.answering.budget import on_whole_chunk
    from pipeline.answering.events import claim_record
    from pipeline.verification.claims import CheckedClaim, Passage

    chunk = "First sentence here. The index held 21 million passages. Last one."
    whole = Passage(1, 7, "rag.md", chunk, 0.9)
    window = Passage(1, 7, "rag.md", chunk[21:57], 0.9, offset=21)
    claim = CheckedClaim(1, "The index held 21 million passages.", "supported", "precheck", window, (4, 35))
    record = claim_record(1, on_whole_chunk(claim, [whole]))
    assert chunk[record.span_start : record.span_end] == claim.evidence == "index held 21 million passages."


def test_the_drilldown_shows_what_the_generator_read_of_each_chunk(fake, settings, kb_db):
    from test_app import open_runs_page

    _, result = ask(kb_db, dataclasses.replace(settings, context_budget_tokens=60))
    at = open_runs_page(str(result.run_id), tab="Retrieval")
    (summary,) = [m.value for m in at.markdown if "Context budget" in m.value]
    assert summary.startswith("**Context budget 60 tokens\\: the generator read ")
    frame = next(d.value for d in at.dataframe if "the generator read" in d.value.columns)
    cuts = [s for s in spans_for_run(kb_db, result.run_id) if s.name == "context budget"][0].attributes
    assert list(frame["chunk"]) == sorted(int(k.split("_")[1]) for k in cuts if k.startswith("passage_"))
    assert all(" of " in line and "tokens" in line for line in frame["the generator read"])


def test_one_slot_extracts_a_written_answers_claims_in_one_call_and_checks_each_sentence(fake, settings, kb_db):
    two = "RAG retrieves passages and then it writes the answer from them [1]. The index held 21 million passages [1]."
    fake.enqueue(two, model="llama3.2", match=lambda body: not body.get("format"))
    events, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1, max_retries=0))
    extractions = chats(fake, "claims")
    assert len(extractions) == 1 and extractions[0]["received"] >= chats(fake)[0]["done"]
    assert "Answer:" in extractions[0]["body"]["messages"][-1]["content"]  # the whole answer's prompt
    sentences = [e for e in events if e.kind == "sentence"]
    assert [e.index for e in sentences] == [0, 1]
    claims = result.attempts[0].claims
    assert [c.claim_no for c in claims] == list(range(1, len(claims) + 1)) and len(claims) >= 2
    assert {c.answer_span for c in claims} == {(e.span[0], e.span[1]) for e in sentences}


def test_four_slots_check_each_sentence_while_the_answer_streams(fake, settings, kb_db):
    two = "RAG retrieves passages and then it writes the answer from them [1]. The index held 21 million passages [1]."
    fake.enqueue(two, model="llama3.2", match=lambda body: not body.get("format"))
    ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=4, max_retries=0))
    answers = sorted(r["body"]["messages"][-1]["content"].split("Answer:\n")[1] for r in chats(fake, "claims"))
    assert answers == [  # a call per sentence, each as soon as it was written
        "RAG retrieves passages and then it writes the answer from them [1].",
        "The index held 21 million passages [1].",
    ]


def test_one_slot_verifies_the_whole_answer_together_so_the_prompt_cache_holds_each_passage(fake, settings, kb_db):
    """The sequential schedule hands every sentence's claims to the verifier at once: a passage is asked about
    claims of different sentences in a row, and the server's prompt cache holds it for all but the first."""
    from test_faithfulness import minicheck_asked

    fake.answer_style = "paraphrase"  # a first answer with sentences no passage supports: each tried on every one
    fake.prompt_cache = True
    fake.set_latency(0.0, slots=1)
    one_slot = dataclasses.replace(settings, ollama_slots_per_host=1, cache_enabled=False)
    events, result = ask(kb_db, one_slot)
    asked = minicheck_asked(fake)
    sentence_of = {c.text: c.answer_span for a in result.attempts for c in a.claims}
    runs = [(doc, {sentence_of.get(claim) for _, claim in group}) for doc, group in groupby(asked, key=lambda a: a[0])]
    assert any(len(spans) >= 4 for _, spans in runs)  # one passage, claims of four sentences, one after another
    held = [
        r for r in fake.requests if (r["model"] or "").startswith("bespoke-minicheck") and r.get("cached_tokens", 0) > 5
    ]
    assert len(asked) >= 8 and len(held) >= len(asked) / 2
    assert result.status in ("accepted", "flagged")


def test_one_slot_extracts_and_classifies_the_claims_after_the_generations_context_which_the_cache_holds(
    fake, settings, kb_db
):
    """On one slot the written answer's claim extraction starts with the generation's system text and context, and
    the contradicted-or-unsupported calls after it share them: the server's prompt cache holds that prefix from the
    generation, so no call after it reads the context again."""
    fake.answer_style = "paraphrase"  # a first answer with invented sentences: rejected claims to classify
    fake.prompt_cache = True
    fake.set_latency(0.0, slots=1)
    _, result = ask(kb_db, dataclasses.replace(settings, ollama_slots_per_host=1, cache_enabled=False))
    generation, (extraction,), classified = chats(fake)[0], chats(fake, "claims"), chats(fake, "verdict")
    system, user = (m["content"] for m in generation["body"]["messages"])
    context = len(f"{system} {user[: user.index(chr(10) * 2 + 'Question:')]}".split())
    assert context > 300 and extraction["received"] >= generation["done"] and classified
    assert extraction["cached_tokens"] >= context and classified[0]["cached_tokens"] >= context
    unsupported = [c.text for a in result.attempts for c in a.claims if c.verdict in ("unsupported", "contradicted")]
    assert len(unsupported) == len(classified) >= 2
    for later in classified[1:]:  # after the first, a call reads its claim alone: the task comes before it
        content = later["body"]["messages"][-1]["content"]
        claim = [text for text in unsupported if content.endswith(f"\n\nClaim: {text}")]
        assert claim and later["prompt_tokens"] - later["cached_tokens"] <= len(claim[0].split()) + 1
