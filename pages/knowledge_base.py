"""The documents in the knowledge base: adding, previewing, their chunks, and deleting one."""

from pathlib import Path

import pandas as pd
import streamlit as st

from pages.views.common import page_setup, show_error
from pages.views.knowledge import deleted_notice, document_panel, pick_document
from pages.views.markup import escape_markdown, plural
from pages.views.tables import count_column, table
from pipeline.errors import WorkbenchError
from pipeline.knowledge.documents import flagged_chunks, list_documents
from pipeline.knowledge.ingest import PDF_SUFFIXES, TEXT_SUFFIXES, ingest_and_record, save_uploads, uploads_folder

settings, db = page_setup(__file__)
deleted_notice()


def run_ingest(paths: list[str]) -> None:
    try:
        with st.spinner("Embedding…"):
            results = ingest_and_record(paths, settings, db)
    except WorkbenchError as exc:
        show_error(exc)
        return
    for result in results:
        name = Path(result.path).name
        if result.status == "skipped":
            st.warning(escape_markdown(f"{name}: skipped ({result.reason})"))
        else:
            chunks = f", {plural(result.chunks, 'chunk')}" if result.chunks else ""
            st.info(escape_markdown(f"{name}: {result.status}{chunks}"))
            if result.flagged:
                st.warning(
                    escape_markdown(
                        f"{name}: {plural(result.flagged, 'chunk')} {'reads' if result.flagged == 1 else 'read'} "
                        "like instructions aimed at a model"
                    ),
                    icon=":material/flag:",
                )


uploads = st.file_uploader(
    "Add Markdown, text or PDF files",
    accept_multiple_files=True,
    type=sorted(s.lstrip(".") for s in TEXT_SUFFIXES | PDF_SUFFIXES),
)
st.caption(escape_markdown(f"Uploaded files are saved in {uploads_folder(settings)} and ingested from there."))
if uploads and st.button("Ingest uploaded files"):
    try:
        run_ingest(save_uploads([(upload.name, upload.getvalue()) for upload in uploads], settings))
    except WorkbenchError as exc:
        show_error(exc)
if st.button(f"Re-ingest {settings.kb_path}"):
    run_ingest([settings.kb_path])

documents = list_documents(db)
if not documents:
    st.info(
        "No documents yet. Ingest the sample knowledge base with the button above, "
        "or run `python -m pipeline ingest data/kb`."
    )
    st.stop()

frame = pd.DataFrame(documents)
frame["path"] = frame["path"].map(lambda p: Path(p).name)
table(
    frame[["path", "title", "n_chunks", "flagged_chunks", "n_chars", "embed_model", "ingested_at"]],
    hide_index=True,
    width="stretch",
    column_config={
        "n_chunks": count_column("chunks"),
        "flagged_chunks": count_column("flagged chunks"),
        "n_chars": count_column("characters"),
        "embed_model": "embedding model",
        "ingested_at": st.column_config.DatetimeColumn("ingested", format="YYYY-MM-DD HH:mm"),
    },
)
st.subheader("A document")
document_panel(pick_document(documents), settings, db)

flagged = flagged_chunks(db)
st.subheader(f"Possible prompt injection ({plural(len(flagged), 'chunk')})")
st.caption(
    'Chunks whose text reads like instructions aimed at a model ("ignore previous instructions", '
    '"you are now", chat-template tokens, …), found by fixed patterns at ingest. They are still retrieved '
    "and checked; answers whose claims rest on them are marked."
)
if flagged:
    flags = pd.DataFrame(flagged)
    flags["path"] = flags["path"].map(lambda p: Path(p).name)
    flags["flags"] = flags["flags"].map(", ".join)
    table(flags[["path", "ordinal", "flags", "excerpt"]], hide_index=True, width="stretch")
