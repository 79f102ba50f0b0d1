"""Widgets of the Knowledge base page: one document's preview and chunks, and deleting it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from pages.views.common import show_error
from pages.views.markup import escape_markdown, fmt_count, plural
from pages.views.tables import count_column, table
from pipeline.errors import WorkbenchError
from pipeline.knowledge.documents import document_with_chunks, preview
from pipeline.knowledge.ingest import delete_document


def pick_document(documents: list[dict]) -> int:
    """A selectbox of the documents by file name and title; returns the chosen document's id."""
    names = {d["id"]: f"{Path(d['path']).name} · {d['title']}" for d in documents}
    return st.selectbox("Document", list(names), format_func=names.get, key="kb_document")


def document_panel(doc_id: int, settings, db) -> None:
    try:
        document = document_with_chunks(db, doc_id)
    except WorkbenchError as exc:
        show_error(exc)
        return
    chunks = document["chunks"]
    st.caption(
        escape_markdown(
            f"{document['path']} · {fmt_count(len(chunks))} chunks · {fmt_count(document['n_chars'])} characters · "
            f"embedded with {document['embed_model']} · ingested {document['ingested_at']:%Y-%m-%d %H:%M:%S}"
        )
    )
    preview_tab, chunks_tab = st.tabs(["Preview", f"Chunks ({len(chunks)})"])
    with preview_tab:
        st.text(preview(chunks))
    with chunks_tab:
        frame = pd.DataFrame(chunks)
        frame["flags"] = frame["flags"].map(", ".join)
        frame["characters"] = frame["text"].str.len()
        table(
            frame[["ordinal", "characters", "start_char", "end_char", "ingested_at", "flags", "text"]],
            hide_index=True,
            width="stretch",
            column_config={"characters": count_column("characters")},
        )
    delete_controls(document, settings, db)


def delete_controls(document: dict, settings, db) -> None:
    """Delete in two steps: the first click asks, the second deletes."""
    pending = st.session_state.get("kb_delete") == document["id"]
    if not pending:
        if st.button("Delete this document…", icon=":material/delete:"):
            st.session_state["kb_delete"] = document["id"]
            st.rerun()
        return
    st.warning(
        escape_markdown(
            f"Delete {Path(document['path']).name} from the knowledge base? It is no longer retrieved. "
            "Runs that cited it keep the chunk text they showed."
        ),
        icon=":material/warning:",
    )
    confirm, cancel = st.columns(2)
    if cancel.button("Cancel"):
        st.session_state.pop("kb_delete", None)
        st.rerun()
    if confirm.button("Yes, delete it", type="primary"):
        st.session_state.pop("kb_delete", None)
        try:
            removed = delete_document(document["id"], settings, db)
        except WorkbenchError as exc:
            show_error(exc)
            return
        st.session_state["kb_deleted"] = removed
        st.rerun()


def deleted_notice() -> None:
    """What the last deletion did, shown once after the page reloads."""
    removed = st.session_state.pop("kb_deleted", None)
    if not removed:
        return
    name = Path(removed["path"]).name
    n = removed["kept_chunks"]
    kept = f" {plural(n, 'chunk')} {'stays' if n == 1 else 'stay'} for the runs that cite them." if n else ""
    left = (
        f" The file is still at {removed['file_left']}: ingesting its folder again brings it back."
        if removed["file_left"]
        else ""
    )
    st.success(escape_markdown(f"Deleted {name}.{kept}{left}"), icon=":material/delete:")
