"""Knowledge base management: a document's chunks and preview; deleting a document takes it out of retrieval
while the chunk text that stored runs cite stays for their drilldowns."""

from __future__ import annotations

import dataclasses

import pytest
from test_engine import RAG_QUESTION, ask

from pipeline.answering.retriever import DuckDBRetriever
from pipeline.errors import InputError
from pipeline.evaluation.example_questions import example_questions
from pipeline.history.runs import load_run
from pipeline.knowledge.documents import (
    count_chunks,
    document_with_chunks,
    list_documents,
    preview,
)
from pipeline.knowledge.ingest import delete_document, ingest, save_uploads
from pipeline.models.llm import LLM


def doc_id_of(db, name: str) -> int:
    return next(d["id"] for d in list_documents(db) if d["path"].endswith(name))


def chunk_rows(db, doc_id: int) -> int:
    with db.cursor() as cur:
        return cur.execute("SELECT count(*) FROM chunks WHERE document_id = ?", [doc_id]).fetchone()[0]


def test_deleting_a_document_keeps_the_evidence_of_stored_runs_but_not_for_retrieval(fake, settings, kb_db):
    _, result = ask(kb_db, dataclasses.replace(settings, top_k=2), RAG_QUESTION)  # not every chunk of rag.md
    assert result.status == "accepted"
    cited = [c for c in result.final_claims if c.passage is not None]
    assert cited and cited[0].passage.source.endswith("rag.md")
    evidence_text = cited[0].passage.text
    doc_id = doc_id_of(kb_db, "rag.md")
    n_chunks = next(d["n_chunks"] for d in list_documents(kb_db) if d["id"] == doc_id)
    live_before = count_chunks(kb_db)
    retrieved = {p.chunk_id for p in result.passages if p.source.endswith("rag.md")}

    removed = delete_document(doc_id, settings, kb_db)

    assert removed["path"].endswith("rag.md") and removed["kept_chunks"] == len(retrieved) < n_chunks
    assert removed["file_left"] == removed["path"]  # data/kb/rag.md is not an upload: the file stays
    assert chunk_rows(kb_db, doc_id) == len(retrieved)  # the chunks no run cites are gone
    assert not any(d["path"].endswith("rag.md") for d in list_documents(kb_db))
    assert count_chunks(kb_db) == count_chunks(kb_db, settings.embed_model) == live_before - n_chunks
    stored = load_run(kb_db, result.run_id)
    kept = [p for p in stored.result.passages if p.text == evidence_text]
    assert kept and kept[0].source.endswith("rag.md")  # the drilldown still has the evidence and its source
    assert any(r["text"] == evidence_text and r["source"].endswith("rag.md") for r in stored.retrievals)
    nodes = DuckDBRetriever(LLM(settings, kb_db), kb_db, 5).retrieve(RAG_QUESTION)
    assert nodes and not any(n.node.metadata["source"].endswith("rag.md") for n in nodes)


def test_replacing_a_document_keeps_the_chunks_runs_cite(fake, settings, kb_db, tmp_path):
    doc = tmp_path / "zebra.md"
    doc.write_text("# Zebras\n\nZebras have black and white stripes that confuse biting flies.")
    llm = LLM(settings, kb_db)
    ingest([str(doc)], settings, kb_db, llm)
    _, result = ask(kb_db, settings, "Why do zebras have stripes?")
    old = [p for p in result.passages if p.source.endswith("zebra.md")]
    assert old
    doc.write_text("# Zebras\n\nZebras live in Africa.")
    assert ingest([str(doc)], settings, kb_db, llm)[0].status == "replaced"
    passages = load_run(kb_db, result.run_id).result.passages
    assert any("confuse biting flies" in p.text and p.source.endswith("zebra.md") for p in passages)
    assert "confuse" not in preview(document_with_chunks(kb_db, doc_id_of(kb_db, "zebra.md"))["chunks"])


def test_a_document_lists_its_chunks_with_their_ingest_time_and_previews_its_text(settings, kb_db):
    document = document_with_chunks(kb_db, doc_id_of(kb_db, "transformer.md"))
    chunks = document["chunks"]
    assert len(chunks) == document["n_chunks"] > 1
    assert [c["ordinal"] for c in chunks] == list(range(len(chunks)))
    assert all(c["ingested_at"] == document["ingested_at"] for c in chunks)
    original = (settings_kb := __import__("pathlib").Path(settings.kb_path) / "transformer.md").read_text()
    shown = preview(chunks, limit=len(original) + 10)
    assert settings_kb.exists() and shown.strip() == original.strip()  # the overlap between chunks is not doubled
    assert preview(chunks, limit=100) == original[:100] + " …"


def test_deleting_an_upload_removes_its_file_too(fake, settings, db, tmp_path):
    settings = dataclasses.replace(settings, kb_path=str(tmp_path / "kb"))
    [path] = save_uploads([("notes.md", b"# Notes\n\nThe lab opens at nine.")], settings)
    ingest([path], settings, db, LLM(settings, db))
    removed = delete_document(doc_id_of(db, "notes.md"), settings, db)
    assert removed == {"path": path, "title": "Notes", "kept_chunks": 0, "file_left": ""}
    assert not (tmp_path / "uploads" / "notes.md").exists() and list_documents(db) == []
    with pytest.raises(InputError, match="no document with id"):
        delete_document(999, settings, db)


def test_example_questions_come_from_the_golden_set_for_the_sample(kb_db):
    questions = example_questions(kb_db)
    assert questions[0].startswith("How many passages were in the Wikipedia index")  # golden item on rag.md
    assert len(questions) == 4 and len(set(questions)) == 4


def test_example_questions_ask_about_other_documents_what_they_cover(fake, settings, db, tmp_path):
    doc = tmp_path / "zebra.md"
    doc.write_text("# Zebras\n\nZebras have black and white stripes that confuse biting flies.")
    ingest([str(doc)], settings, db, LLM(settings, db))
    assert example_questions(db) == ["What does Zebras cover?"]  # not a golden question about an absent document
