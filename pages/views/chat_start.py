"""The empty chat: example questions to start from; clicking one asks it."""

from __future__ import annotations

import streamlit as st

from pages.views.markup import escape_markdown


def example_picker(questions: list[str]) -> str | None:
    """Buttons with example questions (labels escaped: a title comes from a document); the question whose
    button was clicked, else None."""
    if not questions:
        return None
    st.caption("Not sure what to ask? Try one of these questions about the knowledge base:")
    picked = None
    for i, question in enumerate(questions):  # one a row: in two columns a long question was cut at 1280 px
        if st.button(escape_markdown(question), key=f"example-{i}", icon=":material/help:", width="stretch"):
            picked = question
    return picked
