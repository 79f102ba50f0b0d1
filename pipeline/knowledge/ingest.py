"""Ingest Markdown, text and PDF files into the knowledge base: split, embed, store.

A file whose content hash, embedding model and chunking are unchanged is skipped; a changed file
replaces its chunks; a file that cannot be read as text is skipped with its reason.
"""

from __future__ import annotations

import hashlib
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from llama_index.core.node_parser import SentenceSplitter

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.knowledge.documents import remove_document
from pipeline.knowledge.injection import flagged_excerpt, injection_flags
from pipeline.knowledge.similarity_scale import scale_for
from pipeline.models.llm import LLM
from store import kb
from store.atomic import write_atomically
from store.db import Database
from store.llm_log import save_calls

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".text", ".rst"}
PDF_SUFFIXES = {".pdf"}


@dataclass
class IngestResult:
    path: str
    status: str  # added | replaced | unchanged | skipped
    chunks: int = 0
    reason: str = ""
    flagged: int = 0  # chunks that look like instructions aimed at a model (knowledge/injection.py)


def collect_files(paths: list[str]) -> list[Path]:
    """Files named, plus supported files found under named folders (sorted, no duplicates)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES | PDF_SUFFIXES)
            )
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def read_text(path: Path) -> str:
    """The file's text; raises ValueError with a reason when it is not usable text."""
    if not path.exists():
        raise ValueError("file does not exist")
    suffix = path.suffix.lower()
    if suffix in PDF_SUFFIXES:
        return _read_pdf(path)
    if suffix not in TEXT_SUFFIXES:
        raise ValueError(f"unsupported file type '{suffix or 'none'}' (use .md, .txt or .pdf)")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (invalid byte at offset {exc.start}); convert it to UTF-8") from None
    if not text.strip():
        raise ValueError("file is empty")
    return text


def _read_pdf(path: Path) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        text = "\n\n".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)
    except (PdfReadError, OSError, ValueError) as exc:
        raise ValueError(f"unreadable PDF: {exc}") from None
    if not text.strip():
        raise ValueError("PDF has no extractable text (scanned images need OCR first)")
    return text


def title_of(text: str, path: Path) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def split(text: str, settings: Settings) -> list[tuple[str, int | None, int | None]]:
    splitter = SentenceSplitter(chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)
    pieces = splitter.split_text(text)
    out, cursor = [], 0
    for piece in pieces:
        at = text.find(piece[:64], max(0, cursor - settings.chunk_overlap * 8))
        start = at if at >= 0 else None
        out.append((piece, start, start + len(piece) if start is not None else None))
        if start is not None:
            cursor = start + 1
    return out


class SplitFailed(Exception):
    pass


def split_within(text: str, settings: Settings, timeout_s: float) -> list[tuple[str, int | None, int | None]]:
    """split() in a worker thread that may take at most timeout_s; SplitFailed (with the reason) when it takes
    longer or raises. A pathological file (megabytes of text with no sentence ends make NLTK's sentence
    splitter crawl, then raise TimeoutError) is then skipped instead of stopping the batch. The worker is a
    daemon thread: one that overruns is left to finish on its own and never holds up the process's exit."""
    outcome: dict = {}

    def work():
        try:
            outcome["pieces"] = split(text, settings)
        except Exception as exc:  # noqa: BLE001 - any failure of the splitter skips this one file
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="ingest-split", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise SplitFailed(
            f"splitting it into chunks took longer than {timeout_s:g} s ({len(text):,} characters); "
            "split the file into smaller ones, or raise WORKBENCH_INGEST_FILE_TIMEOUT_S"
        )
    if "error" in outcome:
        exc = outcome["error"]
        raise SplitFailed(f"it could not be split into chunks ({type(exc).__name__}: {exc})")
    return outcome["pieces"]


def ingest_file(path: Path, settings: Settings, db: Database, llm: LLM) -> IngestResult:
    key = str(path.resolve())
    try:
        text = read_text(path)
    except ValueError as exc:
        return IngestResult(key, "skipped", reason=str(exc))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    state = kb.document_state(db, key)
    wanted = kb.DocumentState(digest, settings.embed_model, settings.chunk_size, settings.chunk_overlap)
    if state == wanted:
        refresh_flags(db, key)  # the patterns may be newer than the chunks
        return IngestResult(key, "unchanged", flagged=len(_flags_of(kb.document_chunks(db, key)[1])))
    try:
        pieces = split_within(text, settings, settings.ingest_file_timeout_s)
    except SplitFailed as exc:
        return IngestResult(key, "skipped", reason=str(exc))
    vectors = llm.embed_documents([p[0] for p in pieces])
    chunks = [
        kb.NewChunk(i, piece, start, end, vector, injection_flags(piece), flagged_excerpt(piece))
        for i, ((piece, start, end), vector) in enumerate(zip(pieces, vectors, strict=True))
    ]
    kb.replace_document(
        db,
        key,
        title_of(text, path),
        digest,
        settings.embed_model,
        settings.chunk_size,
        settings.chunk_overlap,
        len(text),
        chunks,
    )
    flagged = sum(1 for c in chunks if c.flags)
    return IngestResult(key, "replaced" if state else "added", chunks=len(chunks), flagged=flagged)


def _flags_of(chunks: list[tuple[int, str]]) -> dict[int, tuple[list[str], str]]:
    return {chunk_id: (names, flagged_excerpt(text)) for chunk_id, text in chunks if (names := injection_flags(text))}


def refresh_flags(db: Database, path: str) -> None:
    """Flag the chunks of a stored document with the current patterns (a document ingested before them has
    none); written only when they differ from what is stored."""
    doc_id, chunks = kb.document_chunks(db, path)
    if doc_id is None:
        return
    wanted = _flags_of(chunks)
    stored = {r["chunk_id"]: (list(r["flags"]), r["excerpt"]) for r in kb.document_flags(db, doc_id)}
    if wanted != stored:
        kb.set_chunk_flags(db, doc_id, wanted)


def ingest(paths: list[str], settings: Settings, db: Database, llm: LLM, on_result=None) -> list[IngestResult]:
    """Ingest every file; one bad file never stops the others."""
    results = []
    for path in collect_files(paths):
        result = ingest_file(path, settings, db, llm)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def uploads_folder(settings: Settings) -> Path:
    """Where the Knowledge base page saves uploaded files: `uploads/` beside the knowledge base folder
    (data/uploads by default), outside it so that the sample in data/kb stays as shipped."""
    return Path(settings.kb_path).resolve().parent / "uploads"


MAX_NAME_BYTES = 255  # the longest file name most file systems take


def save_uploads(files: list[tuple[str, bytes]], settings: Settings) -> list[str]:
    """Write uploaded files into the uploads folder; return their paths.
    Only the base of each uploaded name is used, so a name cannot point outside that folder; a name the folder
    cannot hold as given (control characters, too long) is refused with a message, before anything is written.
    Each file is written whole, through a temporary file renamed into place (a link planted under the name is
    replaced, never followed)."""
    folder = uploads_folder(settings)
    bases = [upload_name(name) for name, _ in files]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"the uploads folder {folder} cannot be created ({exc.strerror})", fix="make its parent folder writable"
        ) from None
    paths = []
    for base, (_, data) in zip(bases, files, strict=True):
        target = folder / base
        try:
            write_atomically(target, data, prefix=".upload-")
        except OSError as exc:
            raise InputError(
                f"the uploaded file {base!r} could not be saved in {folder} ({exc.strerror})",
                fix="make that folder writable and free space on its disk, then upload the file again",
            ) from None
        paths.append(str(target))
    return paths


def upload_name(name: str) -> str:
    """The name an uploaded file is saved under: the last part of the name given (after / or \\), or InputError
    when that is no usable file name."""
    base = Path(name.replace("\\", "/")).name
    if base in ("", ".", ".."):
        raise InputError(f"an uploaded file has no usable name ({name!r})", fix="rename the file and upload it again")
    if any(unicodedata.category(ch) == "Cc" for ch in base):
        raise InputError(
            f"an uploaded file's name holds control characters ({name!r})", fix="rename the file and upload it again"
        )
    if len(base.encode("utf-8")) > MAX_NAME_BYTES:
        raise InputError(
            f"an uploaded file's name is too long ({len(base.encode('utf-8'))} bytes, at most {MAX_NAME_BYTES}): "
            f"{base[:40]}…",
            fix="rename the file to a shorter name and upload it again",
        )
    return base


def ingest_and_record(paths: list[str], settings: Settings, db: Database, on_result=None) -> list[IngestResult]:
    """Ingest with a model client of its own and log its embedding calls, even when ingesting fails."""
    llm = LLM(settings, db, origin="ingest")
    try:
        results = ingest(paths, settings, db, llm, on_result)
        if any(r.status in ("added", "replaced") for r in results):  # the knowledge base changed: one embedding call
            scale_for(db, llm)
        return results
    finally:
        save_calls(db, llm.take_calls(), llm.take_cache_entries())


def delete_document(doc_id: int, settings: Settings, db: Database) -> dict:
    """Take a document out of the knowledge base (chunks that stored runs cite are kept for them). An uploaded
    file is removed from the uploads folder too, so it does not come back; a file elsewhere is left alone, and
    `file_left` names it: ingesting its folder again brings it back. Returns {path, title, kept_chunks,
    file_left}."""
    removed = remove_document(db, doc_id)
    path = Path(removed["path"])
    if path.parent == uploads_folder(settings):
        path.unlink(missing_ok=True)
    return {**removed, "file_left": str(path) if path.exists() else ""}
