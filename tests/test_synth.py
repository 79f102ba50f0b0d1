"""`synth`: golden sets written from the knowledge base. On the shipped knowledge base with the fake Ollama: every
kind asked for is kept; each gate drops what it should, with its reason (the fake's weak question writer makes such
mistakes on its own, and the tests below script one of each); a killed job resumes without writing a candidate
twice; an empty knowledge base is refused before any model call; the kept set evaluates end to end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import duckdb
import pytest
from conftest import KB, ROOT, TEST_ENV, reset_process_state
from fake_ollama import FakeOllama

from pipeline.cli.main import main
from pipeline.config import load_settings
from pipeline.errors import InputError
from pipeline.evaluation import datasets
from pipeline.evaluation.runner import run_evaluation
from pipeline.evaluation.synth import KINDS, allocate, gates, parse_shares, run_synth, sampling
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from pipeline.text import sentences, short_source
from store import datasets as stored_datasets
from store import db as store_db
from store import synth as stored
from store.synth import ChunkRow

GOLDEN_QUESTION = "What exact match score did RAG-Sequence reach on Natural Questions?"


# -- helpers ------------------------------------------------------------------------------------------------------
def synth_message(body) -> str | None:
    """The user message of a synth prompt ("Kind: ..."), or None for any other request."""
    for message in (body or {}).get("messages") or []:
        if message.get("role") == "user" and (message.get("content") or "").startswith("Kind: "):
            return message["content"]
    return None


def synth_requests(fake) -> list[dict]:
    return [r for r in fake.requests if r["path"] == "/api/chat" and synth_message(r["body"]) is not None]


def chat_requests(fake) -> list[dict]:
    return [r for r in fake.requests if r["path"] in ("/api/chat", "/api/generate")]


def planned(settings, db, n: int, shares: dict, seed: int = 0) -> list[sampling.Slot]:
    """The slots a new job of these arguments writes (run_synth plans the same)."""
    return sampling.plan(stored.live_chunks(db, settings.embed_model), n, shares, seed)[0]


def chunk_of(db, chunk_id: int) -> ChunkRow:
    return next(c for c in stored.live_chunks(db, "nomic-embed-text") if c.id == chunk_id)


def a_sentence(text: str, number: bool = False) -> str:
    """A long sentence of the chunk (with a figure in it, if asked)."""
    found = [s.text for s in sentences(text) if s.kind != "heading" and len(s.text.split()) >= 8]
    if number:
        found = [s for s in found if any(ch.isdigit() for ch in s)]
    return found[0]


def script(fake, slot: sampling.Slot, db, reply, times: int = 1) -> None:
    """Reply `reply` to the synth prompt written from this slot's chunks (matched on its first passage)."""
    first = chunk_of(db, slot.chunk_ids[0])
    head = f"[1] source: {short_source(first.path)}\n{first.text[:80]}"
    fake.enqueue(reply, match=lambda body: head in (synth_message(body) or ""), times=times)


def candidate_rows(db, name: str) -> list[stored.CandidateRow]:
    return stored.candidates(db, stored.latest_job(db, name).id)


def one_candidate(rows, position: int) -> stored.CandidateRow:
    return next(r for r in rows if r.position == position)


# -- the whole job on the shipped knowledge base ----------------------------------------------------------------------
@pytest.mark.slow
def test_synth_keeps_every_kind_and_drops_with_reasons(fake, settings, kb_db):
    result = run_synth(settings, kb_db, "kb-questions", 40, parse_shares(None), seed=0)
    assert result.written == 40 and result.planned == 40 and result.version == 1 and result.previous_version is None
    assert (
        result.requested
        == allocate(40, parse_shares(None))
        == {
            "fact": 12,
            "multi_hop": 8,
            "numeric": 6,
            "comparison": 4,
            "negative": 6,
            "false_premise": 4,
        }
    )
    assert all(result.kept_per_kind[kind] >= 1 for kind in KINDS), result.kept_per_kind
    assert sum(result.kept_per_kind.values()) == result.kept
    assert result.kept + sum(result.dropped_per_gate.values()) == 40
    # the fake's writer made mistakes of its own: its copies, unsupported references, answerable negatives and
    # repeats were caught, each with its reason
    assert {"copy", "reference", "duplicate"} <= set(result.dropped_per_gate), result.dropped_per_gate
    assert all(d.reason and d.gate in gates.GATES for d in result.drops)
    copied = next(d for d in result.drops if d.gate == "copy")
    assert "words in a row are the chunk's" in copied.reason
    # every document contributed
    rows = candidate_rows(kb_db, "kb-questions")
    chunks = {c.id: c for c in stored.live_chunks(kb_db, settings.embed_model)}
    assert len({chunks[cid].document_id for r in rows for cid in r.chunk_ids}) == len(
        {c.document_id for c in chunks.values()}
    )
    # the cost is in the open
    assert result.calls > 40 and result.prompt_tokens > 0
    assert result.calls + result.cache_hits == sum(r.calls + r.cache_hits for r in rows)
    # the kept set is a dataset version whose items say where they come from
    dataset = datasets.load(kb_db, "kb-questions")
    assert dataset.version == 1 and len(dataset.items) == result.kept
    for item in dataset.items:
        kind = item.provenance["kind"]
        assert item.origin == "synthesised" and item.tags == ["synth", kind] and item.reference
        assert item.provenance["model"] == settings.generator_model and item.provenance["model_digest"]
        assert item.provenance["prompt"] == f"synth_{kind}" and item.provenance["prompt_version"] == "1"
        assert item.provenance["review"] == "pending" and item.provenance["chunk_ids"]
        assert len(item.provenance["chunk_ids"]) == (2 if kind in ("multi_hop", "comparison") else 1)
    negatives = [i for i in dataset.items if i.provenance["kind"] == "negative"]
    assert negatives and all(i.reference == "The knowledge base does not cover this question." for i in negatives)
    assert all(i.provenance.get("false_premise") for i in dataset.items if i.provenance["kind"] == "false_premise")


@pytest.mark.slow
def test_the_same_name_again_is_a_new_version_and_reads_the_response_cache(fake, settings, kb_db):
    first = run_synth(settings, kb_db, "again", 6, {"fact": 1.0}, seed=3)
    fake.clear()
    second = run_synth(settings, kb_db, "again", 6, {"fact": 1.0}, seed=3)
    assert (first.version, second.version, second.previous_version) == (1, 2, 1)
    assert "dataset 'again' existed (latest version 1): saved as version 2" in second.notes
    assert second.calls == 0 and second.cache_hits > 0 and second.kept == first.kept
    assert not synth_requests(fake)  # every prompt was answered from the cache


# -- each gate drops what it should ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_reference_gate_drops_a_reference_the_verifier_rejects(fake, settings, kb_db):
    slots = planned(settings, kb_db, 2, {"fact": 1.0})
    good, bad = (a_sentence(chunk_of(kb_db, s.chunk_ids[0]).text) for s in slots)
    script(fake, slots[0], kb_db, {"question": "What does chunking do to long documents?", "reference": good})
    unsupported = bad + " The method was first described in 1987 by Okafor at Stanford."
    question = "Which method does this part of the pipeline use?"
    script(fake, slots[1], kb_db, {"question": question, "reference": unsupported})
    result = run_synth(settings, kb_db, "refs", 2, {"fact": 1.0})
    rows = candidate_rows(kb_db, "refs")
    assert one_candidate(rows, 0).status == "kept"
    dropped = one_candidate(rows, 1)
    assert dropped.status == "dropped" and dropped.gate == "reference"
    assert "The method was first described in 1987 by Okafor at Stanford" in dropped.reason
    assert "does not support" in dropped.reason and result.dropped_per_gate == {"reference": 1}
    claims = dropped.details["reference_check"]["claims"]
    assert claims[-1]["verdict"] == "unsupported" and all(c["verdict"] == "supported" for c in claims[:-1])


@pytest.mark.slow
def test_a_multi_hop_reference_must_rest_on_both_chunks(fake, settings, kb_db):
    slot = planned(settings, kb_db, 1, {"multi_hop": 1.0})[0]
    one_side = a_sentence(chunk_of(kb_db, slot.chunk_ids[0]).text)
    script(fake, slot, kb_db, {"question": f"How is {slot.shared} used on both sides?", "reference": one_side})
    run_synth(settings, kb_db, "hops", 1, {"multi_hop": 1.0})
    row = candidate_rows(kb_db, "hops")[0]
    assert row.gate == "reference" and "rests on one chunk only" in row.reason


@pytest.mark.slow
def test_the_copy_gate_drops_a_question_copied_from_its_chunk(fake, settings, kb_db):
    slots = planned(settings, kb_db, 2, {"numeric": 1.0})
    copied = a_sentence(chunk_of(kb_db, slots[0].chunk_ids[0]).text, number=True)
    script(fake, slots[0], kb_db, {"question": copied.rstrip(".") + "?", "reference": copied})
    own = a_sentence(chunk_of(kb_db, slots[1].chunk_ids[0]).text, number=True)
    script(
        fake, slots[1], kb_db, {"question": "Which figure does this part of the documentation give?", "reference": own}
    )
    run_synth(settings, kb_db, "copies", 2, {"numeric": 1.0})
    rows = candidate_rows(kb_db, "copies")
    dropped = one_candidate(rows, 0)
    assert dropped.status == "dropped" and dropped.gate == "copy"
    assert f"{len(gates._tokens(copied))} of its {len(gates._tokens(copied))} words in a row" in dropped.reason
    assert one_candidate(rows, 1).status == "kept"
    assert len(synth_requests(fake)) == 2
    sent = [m["content"] for r in chat_requests(fake) for m in r["body"]["messages"]]
    assert not [m for m in sent if "Answer:\n" + copied in m]  # dropped before its reference was verified


@pytest.mark.slow
def test_the_source_gate_rewrites_a_leading_attribution_and_drops_any_other(fake, settings, kb_db):
    slots = planned(settings, kb_db, 2, {"fact": 1.0})
    refs = [a_sentence(chunk_of(kb_db, s.chunk_ids[0]).text) for s in slots]
    script(
        fake, slots[0], kb_db, {"question": "According to the passage, what is described here?", "reference": refs[0]}
    )
    script(fake, slots[1], kb_db, {"question": "What does the passage say about this topic?", "reference": refs[1]})
    result = run_synth(settings, kb_db, "sources", 2, {"fact": 1.0})
    rows = candidate_rows(kb_db, "sources")
    rewritten, dropped = one_candidate(rows, 0), one_candidate(rows, 1)
    assert rewritten.status == "kept" and rewritten.question == "What is described here?"
    assert rewritten.gate == "source" and "removed 'According to the passage,'" in rewritten.note
    assert dropped.status == "dropped" and dropped.gate == "source" and "'the passage say'" in dropped.reason
    assert result.rewritten == 1 and datasets.load(kb_db, "sources").items[0].provenance["note"] == rewritten.note


@pytest.mark.slow
def test_the_duplicate_gate_drops_a_paraphrase_of_a_kept_question(fake, settings, kb_db):
    slots = planned(settings, kb_db, 3, {"fact": 1.0})
    refs = [a_sentence(chunk_of(kb_db, s.chunk_ids[0]).text) for s in slots]
    asked = "How large is the context window of the generator model?"
    script(fake, slots[0], kb_db, {"question": asked, "reference": refs[0]})
    # the same content words and one more: a paraphrase, not the same text
    paraphrase = "How large is the generator model's context window in tokens?"
    script(fake, slots[1], kb_db, {"question": paraphrase, "reference": refs[1]})
    script(fake, slots[2], kb_db, {"question": "Which library builds an approximate index?", "reference": refs[2]})
    result = run_synth(settings, kb_db, "dups", 3, {"fact": 1.0})
    rows = candidate_rows(kb_db, "dups")
    assert [r.status for r in rows] == ["kept", "dropped", "kept"]
    assert rows[1].gate == "duplicate" and f"near-duplicate of kept question 1 ({asked!r})" in rows[1].reason
    assert 0.85 <= rows[1].details["similarity"] < 1
    assert result.dropped_per_gate == {"duplicate": 1}


@pytest.mark.slow
def test_the_negative_gate_drops_a_negative_the_knowledge_base_answers(fake, settings, kb_db):
    slots = planned(settings, kb_db, 2, {"negative": 1.0})
    script(fake, slots[0], kb_db, {"question": GOLDEN_QUESTION, "missing": "the score"})
    unanswerable = "Which company sells a commercial licence for BERT tokenizers, and at what price?"
    script(fake, slots[1], kb_db, {"question": unanswerable, "missing": "no vendor or price"})
    run_synth(settings, kb_db, "negatives", 2, {"negative": 1.0})
    rows = candidate_rows(kb_db, "negatives")
    answered = one_candidate(rows, 0)
    assert answered.status == "dropped" and answered.gate == "negative"
    assert answered.reason.startswith("the knowledge base answers it: ") and "rag.md" in answered.reason
    kept = one_candidate(rows, 1)
    assert kept.status == "kept" and kept.reference == "The knowledge base does not cover this question."
    assert "no retrieved passage answers it" in kept.details["negative_check"]


@pytest.mark.slow
def test_the_premise_gate_drops_a_false_premise_its_chunk_states(fake, settings, kb_db):
    slots = planned(settings, kb_db, 2, {"false_premise": 1.0})
    true = a_sentence(chunk_of(kb_db, slots[0].chunk_ids[0]).text, number=True)
    script(fake, slots[0], kb_db, {"question": "Why is that figure so?", "false_premise": true, "reference": true})
    other = a_sentence(chunk_of(kb_db, slots[1].chunk_ids[0]).text, number=True)
    changed = other.replace(next(w for w in other.split() if any(c.isdigit() for c in w)), "987654", 1)
    script(fake, slots[1], kb_db, {"question": "Why is it 987654?", "false_premise": changed, "reference": other})
    run_synth(settings, kb_db, "premises", 2, {"false_premise": 1.0})
    rows = candidate_rows(kb_db, "premises")
    assert one_candidate(rows, 0).gate == "premise" and "it is not false" in one_candidate(rows, 0).reason
    assert one_candidate(rows, 1).status == "kept"
    assert datasets.load(kb_db, "premises").items[0].provenance["false_premise"] == changed


@pytest.mark.slow
def test_an_unreadable_reply_is_a_dropped_candidate_never_a_made_up_question(fake, settings, kb_db):
    slot = planned(settings, kb_db, 1, {"fact": 1.0})[0]
    script(fake, slot, kb_db, "Here is a good question about chunking for you!", times=2)  # the reply and its retry
    result = run_synth(settings, kb_db, "unreadable", 1, {"fact": 1.0})
    row = candidate_rows(kb_db, "unreadable")[0]
    assert row.status == "dropped" and row.gate == "unreadable" and row.reason.startswith("unreadable reply: ")
    assert row.question is None and len(synth_requests(fake)) == 2
    assert result.version is None and "no question was kept: nothing was saved" in result.notes
    assert stored_datasets.version_info(kb_db, "unreadable") is None


# -- the near-duplicate threshold is on the embedding model's own scale ------------------------------------------------
QUESTIONS = (
    "How large is the context window of the generator model?",
    "How large is the generator model's context window in tokens?",  # a paraphrase
    "What does a larger context window cost the generator model?",  # the same subject, another question
    "Which library builds an approximate nearest neighbour index?",  # another subject
)


def test_near_duplicates_are_the_same_on_two_embedding_scales(monkeypatch):
    raw, decided = {}, {}
    for scale_name in ("bag", "dense"):
        with FakeOllama(embed_scale=scale_name) as server:
            monkeypatch.setenv("OLLAMA_HOST", server.url)
            reset_process_state()
            settings = load_settings()
            llm = LLM(settings, None)
            scale = gates.question_scale(llm)
            vectors = [gates.unit(v) for v in llm.embed_queries(list(QUESTIONS))]
            kept = [gates.Kept(0, QUESTIONS[0], vectors[0])]
            raw[scale_name] = [float(vectors[0] @ v) for v in vectors[1:]]
            decided[scale_name] = [
                gates.duplicate_gate(v, kept, scale, settings.synth_duplicate_similarity).dropped for v in vectors[1:]
            ]
            assert scale.median == pytest.approx({"bag": 0.0, "dense": 0.5}[scale_name], abs=0.05)
    assert decided["bag"] == decided["dense"] == [True, False, False]
    # read as a raw cosine, the threshold would call the dense model's other question on the same subject a duplicate;
    # its unrelated question sits half way to identical
    assert raw["dense"][1] >= load_settings().synth_duplicate_similarity > raw["bag"][1]
    assert raw["dense"][2] > 0.45 and raw["bag"][2] < 0.05
    assert all(d > b for d, b in zip(raw["dense"], raw["bag"], strict=True))


@pytest.fixture(scope="module")
def dense_store(tmp_path_factory):
    """A store with data/kb ingested under the dense embedding fake."""
    path = tmp_path_factory.mktemp("dense") / "kb.duckdb"
    with FakeOllama(embed_scale="dense") as server:
        env = {**TEST_ENV, "OLLAMA_HOST": server.url, "WORKBENCH_DB": str(path), "WORKBENCH_CONFIG": ""}
        settings = load_settings(environ=env)
        database = store_db.Database(str(path), 2, 0)
        ingest([str(KB)], settings, database, LLM(settings, database))
        database.close()
    return path


@pytest.mark.slow
def test_a_job_drops_the_same_duplicates_under_the_dense_embedding_scale(dense_store, monkeypatch, tmp_path):
    with FakeOllama(embed_scale="dense") as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        shutil.copy(dense_store, tmp_path / "dense.duckdb")
        monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "dense.duckdb"))
        reset_process_state()
        settings = load_settings()
        db = store_db.get_database(settings)
        slots = planned(settings, db, 3, {"fact": 1.0})
        refs = [a_sentence(chunk_of(db, s.chunk_ids[0]).text) for s in slots]
        for slot, question, ref in zip(slots, QUESTIONS[:3], refs, strict=True):  # the third: same subject
            script(server, slot, db, {"question": question, "reference": ref})
        run_synth(settings, db, "dense-dups", 3, {"fact": 1.0})
        rows = candidate_rows(db, "dense-dups")
        assert [(r.status, r.gate) for r in rows] == [("kept", None), ("dropped", "duplicate"), ("kept", None)]
        reset_process_state()


# -- resuming ----------------------------------------------------------------------------------------------------------
class Interrupted(Exception):
    pass


@pytest.mark.slow
def test_an_interrupted_job_resumes_and_writes_no_candidate_twice(fake, settings, kb_db):
    def stop_after_five(state):
        if state.written - state.already >= 5:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_synth(settings, kb_db, "resumed", 12, parse_shares(None), seed=1, progress=stop_after_five)
    job = stored.latest_job(kb_db, "resumed")
    assert job.status == "running" and len(stored.candidates(kb_db, job.id)) == 5
    assert stored_datasets.version_info(kb_db, "resumed") is None
    fake.clear()
    seen = []
    result = run_synth(
        settings, kb_db, "resumed", 12, parse_shares(None), seed=1, progress=lambda s: seen.append(s.written)
    )
    assert result.job_id == job.id and result.resumed == 5 and seen[0] == 5 and seen[-1] == 12
    assert result.notes[0] == "resuming job 1 of 'resumed': 5 of 12 candidates already written"
    assert len(synth_requests(fake)) == 7  # only the candidates not written before
    rows = stored.candidates(kb_db, job.id)
    assert [r.position for r in rows] == list(range(12))
    assert result.written == 12 and result.kept + sum(result.dropped_per_gate.values()) == 12
    assert len(datasets.load(kb_db, "resumed").items) == result.kept
    assert stored.latest_job(kb_db, "resumed").status == "finished"
    # a finished job is not resumed: the next run of the name is a new job and a new version
    fake.clear()
    again = run_synth(settings, kb_db, "resumed", 4, {"fact": 1.0})
    assert again.job_id != job.id and again.resumed == 0 and again.version == 2


@pytest.mark.slow
def test_a_job_killed_with_sigkill_resumes_under_the_same_name(fake, settings, kb_db, capsys):
    kb_db.close()
    child = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "synth", "--name", "killed", "--n", "12", "--kinds", "fact=1"],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "WORKBENCH_EVAL_CONCURRENCY": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # from the fifth synth prompt on, no reply leaves the fake until the child is killed
    gate = fake.hold(match=lambda body: synth_message(body) and len(synth_requests(fake)) >= 5, timeout_s=120)
    got_going = fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=120)
    threading.Event().wait(0.5)  # the fourth candidate's write
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    gate.release()
    assert got_going, "the child never got going"
    con = duckdb.connect(settings.store_path)
    written = con.execute("SELECT count(*) FROM synth_candidates").fetchone()[0]
    assert con.execute("SELECT status FROM synth_jobs WHERE name = 'killed'").fetchone()[0] == "running"
    con.close()
    assert 1 <= written <= 4
    fake.clear()
    assert main(["synth", "--name", "killed", "--n", "12", "--kinds", "fact=1", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert f"resuming job 1 of 'killed': {written} of 12 candidates already written" in err
    assert report["resumed"] == written and report["written"] == 12 and report["dataset"] == "dataset:killed@1"
    assert len(synth_requests(fake)) == 12 - written
    con = duckdb.connect(settings.store_path)
    assert con.execute("SELECT count(*), count(DISTINCT position) FROM synth_candidates").fetchone() == (12, 12)
    con.close()


# -- bad input ---------------------------------------------------------------------------------------------------------
def test_an_empty_knowledge_base_is_refused_before_any_model_call(fake, settings, db, capsys):
    with pytest.raises(InputError, match="no chunks") as refused:
        run_synth(settings, db, "nothing", 10, parse_shares(None))
    assert "ingest" in refused.value.fix
    assert not chat_requests(fake) and not [r for r in fake.requests if r["path"] == "/api/embed"]
    assert stored.latest_job(db, "nothing") is None
    assert main(["synth", "--name", "nothing"]) == 2
    assert "the knowledge base has no chunks" in capsys.readouterr().err
    assert not chat_requests(fake)


@pytest.mark.parametrize(
    "kinds, message",
    [
        ("facts=1", "'facts' is not a kind"),
        ("fact=-1", "share of fact"),
        ("fact=x", "share of fact"),
        ("fact=0", "nothing"),
    ],
)
def test_bad_kinds_are_refused_with_the_fix(kinds, message):
    with pytest.raises(InputError, match=message):
        parse_shares(kinds)


def test_shares_are_normalised_and_every_kind_asked_gets_a_candidate():
    assert parse_shares("fact=3,negative=1") == {"fact": 0.75, "negative": 0.25}
    assert allocate(50, parse_shares(None)) == {
        "fact": 15,
        "multi_hop": 10,
        "numeric": 8,
        "comparison": 5,
        "negative": 7,
        "false_premise": 5,
    }
    assert sum(allocate(7, parse_shares(None)).values()) == 7 and min(allocate(7, parse_shares(None)).values()) == 1


# -- sampling ----------------------------------------------------------------------------------------------------------
def synthetic_base(documents: int, chunks_per_document: int = 3) -> list[ChunkRow]:
    rows, n = [], 0
    for d in range(documents):
        for c in range(chunks_per_document):
            n += 1
            shared = f"Project{(d * 7 + c) % 50}" if c == 0 else ""
            text = f"The component number {d} part {c} is described here. "
            text += f"It works with {shared or 'nothing'} and 1{d}{c} items."
            rows.append(ChunkRow(n, d + 1, f"docs/doc-{d:04d}.md", f"Doc {d}", c, text))
    return rows


def test_a_large_knowledge_base_is_sampled_across_its_documents():
    chunks = synthetic_base(1000)
    slots, notes = sampling.plan(chunks, 50, parse_shares(None), seed=7)
    documents = {chunks[cid - 1].document_id for s in slots for cid in s.chunk_ids[:1]}
    assert len(slots) == 50 and len(documents) == 50 and not notes  # 50 documents, not 50 questions about one
    assert max(documents) > 500  # spread over the base, not its first files
    assert slots == sampling.plan(chunks, 50, parse_shares(None), seed=7)[0]  # seeded
    assert slots != sampling.plan(chunks, 50, parse_shares(None), seed=8)[0]
    for slot in slots:
        if slot.kind in ("multi_hop", "comparison"):
            a, b = (chunks[cid - 1] for cid in slot.chunk_ids)
            assert a.document_id != b.document_id and slot.shared in a.text and slot.shared in b.text


def test_pairs_share_a_name_before_a_number_and_kinds_without_chunks_are_noted():
    chunks = [
        ChunkRow(1, 1, "a.md", "A", 0, "The Falcon model was trained in 2021 on a corpus."),
        ChunkRow(2, 2, "b.md", "B", 0, "Another model, released in 2021, was compared with Falcon on a benchmark."),
        ChunkRow(3, 3, "c.md", "C", 0, "Nothing here has any figure in it at all."),
    ]
    assert sampling.entities(chunks[0].text) == {"Falcon", "2021"}
    slots, notes = sampling.plan(chunks, 3, {"multi_hop": 1.0}, seed=0)
    assert {s.shared for s in slots} == {"Falcon"}
    slots, notes = sampling.plan(chunks[2:], 2, {"numeric": 0.5, "multi_hop": 0.5}, seed=0)
    assert slots == [] and notes == [
        "1 multi_hop candidate left out: no two documents share an entity",
        "1 numeric candidate left out: no chunk holds a figure",
    ]


def test_the_copy_and_source_gates_on_their_own():
    passage = gates.Passage(
        1, 1, "kb/chunking.md", "Many RAG systems use chunks of a few hundred tokens as a starting point.", 0
    )
    assert gates.copy_gate(
        "Do many RAG systems use chunks of a few hundred tokens as a starting point?", [passage]
    ).dropped
    assert not gates.copy_gate("How many tokens do RAG systems put in a chunk at first?", [passage]).dropped
    assert gates.source_gate("What chunk size is common in the text splitter?") == (
        "What chunk size is common in the text splitter?",
        gates.PASS,
    )
    question, verdict = gates.source_gate("Based on the document, which chunk size is common?")
    assert question == "Which chunk size is common?" and verdict.note and not verdict.dropped
    for named in ("What does passage 2 say about chunks?", "Which size do the sources mention?", "What is in [1]?"):
        assert gates.source_gate(named)[1].dropped, named


# -- the kept set, end to end ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_kept_set_evaluates_end_to_end(fake, settings, kb_db, capsys):
    assert main(["synth", "--name", "small", "--n", "8", "--seed", "2"]) == 0
    out, err = capsys.readouterr()
    assert "8 candidates written:" in out and "kept per kind" in out and "saved as dataset 'small' version 1" in out
    assert "synthesising" in err and "calls" in err and "prompt tokens" in err
    kept = datasets.load(kb_db, "small")
    assert main(["eval", "dataset:small", "--name", "small-eval", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["items"]["done"] == len(kept.items) >= 4 and report["items"]["failed"] == 0
    assert {row["metric"] for row in report["metrics"]} >= {"faithfulness", "judge_correctness"}
    outcome = run_evaluation(settings, kb_db, kept, "small-eval-2")
    assert outcome.progress.done == len(kept.items) and outcome.progress.failed == 0
