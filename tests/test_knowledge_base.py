import dataclasses

import pytest
from conftest import KB

from pipeline.answering.retriever import DuckDBRetriever
from pipeline.errors import InputError, WorkbenchError
from pipeline.knowledge.documents import count_chunks, list_documents
from pipeline.knowledge.ingest import ingest, ingest_and_record, save_uploads
from pipeline.models.llm import LLM


def test_sample_knowledge_base_is_substantial():
    docs = sorted(KB.glob("*.md"))
    assert len(docs) >= 8
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        assert text.startswith("# ") and len(text.split()) >= 400, doc.name


def test_reingesting_an_unchanged_file_does_nothing(fake, settings, db, tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nThe workbench stores runs in DuckDB. " * 20)
    llm = LLM(settings, db)
    assert [r.status for r in ingest([str(doc)], settings, db, llm)] == ["added"]
    embeds = len([r for r in fake.requests if r["path"] == "/api/embed"])
    assert [r.status for r in ingest([str(doc)], settings, db, llm)] == ["unchanged"]
    assert len([r for r in fake.requests if r["path"] == "/api/embed"]) == embeds


def test_a_changed_file_replaces_its_chunks(settings, db, tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\n" + "Sentence about retrieval and ranking. " * 200)
    llm = LLM(settings, db)
    first = ingest([str(doc)], settings, db, llm)[0]
    doc.write_text("# Notes\n\nA short replacement.")
    second = ingest([str(doc)], settings, db, llm)[0]
    assert first.chunks > 1 and (second.status, second.chunks) == ("replaced", 1)
    assert count_chunks(db) == 1 and len(list_documents(db)) == 1


def test_changing_the_embedding_model_re_embeds(fake, settings, db, tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nEmbeddings are vectors.")
    ingest([str(doc)], settings, db, LLM(settings, db))
    fake.add_model("mxbai-embed-large")
    other = dataclasses.replace(settings, embed_model="mxbai-embed-large")
    assert ingest([str(doc)], other, db, LLM(other, db))[0].status == "replaced"
    assert count_chunks(db, "mxbai-embed-large") == 1 and count_chunks(db, "nomic-embed-text") == 0
    assert fake.requests[-1]["body"]["model"] == "mxbai-embed-large"


def test_binary_and_non_utf8_files_are_skipped_while_the_others_are_ingested(settings, db, tmp_path):
    (tmp_path / "good.md").write_text("# Good\n\nPlain text about vector search.")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (tmp_path / "blob.md").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "empty.txt").write_text("  \n")
    results = {r.path.rsplit("/", 1)[-1]: r for r in ingest([str(tmp_path)], settings, db, LLM(settings, db))}
    assert results["good.md"].status == "added"
    assert results["latin1.txt"].reason == "not UTF-8 text (invalid byte at offset 3); convert it to UTF-8"
    assert results["blob.md"].reason == "binary file (contains NUL bytes)"
    assert results["empty.txt"].reason == "file is empty"
    assert [d["title"] for d in list_documents(db)] == ["Good"]


def test_missing_and_unsupported_files_are_skipped_with_reasons(settings, db, tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    results = ingest([str(tmp_path / "nope.md"), str(tmp_path / "image.png")], settings, db, LLM(settings, db))
    assert [r.reason for r in results] == [
        "file does not exist",
        "unsupported file type '.png' (use .md, .txt or .pdf)",
    ]


def test_retrieval_finds_the_document_that_answers(settings, kb_db):
    retriever = DuckDBRetriever(LLM(settings, kb_db), kb_db, 5)
    nodes = retriever.retrieve("How many BLEU points did the Transformer score on WMT 2014 English-German?")
    assert len(nodes) == 5
    assert nodes[0].node.metadata["source"].endswith("transformer.md")
    assert nodes[0].score > nodes[-1].score
    assert "28.4" in nodes[0].node.get_content()


def test_retrieval_sees_documents_ingested_after_the_index_was_loaded(settings, kb_db, tmp_path):
    llm = LLM(settings, kb_db)
    retriever = DuckDBRetriever(llm, kb_db, 1)
    retriever.retrieve("transformer attention")
    doc = tmp_path / "zebra.md"
    doc.write_text("# Zebras\n\nZebras have black and white stripes that confuse biting flies.")
    ingest([str(doc)], settings, kb_db, llm)
    assert retriever.retrieve("zebra stripes flies")[0].node.metadata["source"].endswith("zebra.md")


def test_an_unreadable_pdf_is_skipped_with_its_reason(settings, db, tmp_path):
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    result = ingest([str(tmp_path / "broken.pdf")], settings, db, LLM(settings, db))[0]
    assert result.status == "skipped" and result.reason.startswith("unreadable PDF")


def test_a_pdf_without_text_is_skipped_with_its_reason(settings, db, tmp_path):
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    with open(tmp_path / "scan.pdf", "wb") as handle:
        writer.write(handle)
    result = ingest([str(tmp_path / "scan.pdf")], settings, db, LLM(settings, db))[0]
    assert result.reason == "PDF has no extractable text (scanned images need OCR first)"


def logged_calls(db) -> list[tuple]:
    with db.cursor() as cur:
        return cur.execute("SELECT stage, run_id, error IS NULL FROM llm_calls ORDER BY id").fetchall()


def test_ingest_and_record_logs_its_embedding_calls(fake, settings, db, tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nVector search finds neighbours.")
    (tmp_path / "b.md").write_text("# B\n\nBM25 ranks by term frequency.")
    results = ingest_and_record([str(tmp_path)], settings, db)
    assert [r.status for r in results] == ["added", "added"]
    embeds = [r for r in fake.requests if r["path"] == "/api/embed"]
    assert logged_calls(db) == [("embed_documents", None, True)] * len(embeds) and len(embeds) == 2


def test_ingest_and_record_logs_the_calls_of_an_ingest_that_failed(fake, settings, db, tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nVector search finds neighbours.")
    fake.inject("500", path="/api/embed", times=10)
    with pytest.raises(WorkbenchError):
        ingest_and_record([str(tmp_path)], settings, db)
    calls = logged_calls(db)
    assert calls and all(stage == "embed_documents" and ok is False for stage, _, ok in calls)
    assert count_chunks(db) == 0


def test_uploads_are_saved_by_their_base_name_next_to_the_knowledge_base(settings, tmp_path):
    settings = dataclasses.replace(settings, kb_path=str(tmp_path / "kb"))
    paths = save_uploads([("notes.md", b"# Notes"), ("../../escape.md", b"# Out"), ("C:\\x\\win.txt", b"w")], settings)
    uploads = tmp_path / "uploads"
    assert paths == [str(uploads / "notes.md"), str(uploads / "escape.md"), str(uploads / "win.txt")]
    assert (uploads / "escape.md").read_bytes() == b"# Out" and not (tmp_path.parent / "escape.md").exists()
    with pytest.raises(InputError, match="no usable name"):
        save_uploads([("..", b"x")], settings)
