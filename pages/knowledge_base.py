"""The documents in the knowledge base, and adding more."""
from pathlib import Path

import pandas as pd
import streamlit as st

from pages.views.common import page_setup, show_error
from pipeline.errors import WorkbenchError
from pipeline.knowledge.ingest import PDF_SUFFIXES, TEXT_SUFFIXES, ingest
from pipeline.models.llm import LLM
from store.kb import list_documents
from store.llm_log import save_calls

settings, db = page_setup("Knowledge base")
st.title("Knowledge base")


def run_ingest(paths: list[str]) -> None:
    llm = LLM(settings, db, origin="ingest")
    try:
        with st.spinner("Embedding…"):
            results = ingest(paths, settings, db, llm)
    except WorkbenchError as exc:
        show_error(exc)
        return
    finally:
        save_calls(db, llm.take_calls(), llm.take_cache_entries())
    for result in results:
        name = Path(result.path).name
        if result.status == "skipped":
            st.warning(f"{name}: skipped ({result.reason})")
        else:
            st.info(f"{name}: {result.status}" + (f", {result.chunks} chunks" if result.chunks else ""))


uploads = st.file_uploader("Add Markdown, text or PDF files", accept_multiple_files=True,
                           type=sorted(s.lstrip(".") for s in TEXT_SUFFIXES | PDF_SUFFIXES))
if uploads and st.button("Ingest uploaded files"):
    folder = Path(settings.kb_path).parent / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for upload in uploads:
        target = folder / Path(upload.name).name
        target.write_bytes(upload.getvalue())
        paths.append(str(target))
    run_ingest(paths)
if st.button(f"Re-ingest {settings.kb_path}"):
    run_ingest([settings.kb_path])

documents = list_documents(db)
if not documents:
    st.info("No documents yet. Ingest the sample knowledge base with the button above, "
            "or run `python -m pipeline ingest data/kb`.")
else:
    frame = pd.DataFrame(documents)
    frame["path"] = frame["path"].map(lambda p: Path(p).name)
    st.dataframe(frame[["path", "title", "n_chunks", "n_chars", "embed_model", "ingested_at"]],
                 hide_index=True, width="stretch")
