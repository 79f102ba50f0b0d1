"""The datasets kept in the store: every dataset with its versions and items, the review of items no person has
confirmed yet (synthesised ones, and runs added from the Runs page) one at a time by keyboard, the difference of two
versions, and each version's export as JSONL or CSV. The widgets are in pages/views/datasets.py."""

import streamlit as st

from pages.views.common import page_setup
from pages.views.datasets import (
    datasets_table,
    diff_section,
    export_button,
    items_table,
    pick_dataset,
    review_section,
    synth_form,
    versions_table,
)
from pages.views.markup import escape_markdown, plural
from pipeline.evaluation.datasets import listing, load, pending_review, versions

settings, db = page_setup(__file__)

rows = listing(db)
if synth_form(settings, db, expanded=not rows):  # above the list, so a page with no dataset yet offers it
    rows = listing(db)  # with the version it has just saved
if not rows:
    st.info(
        "No datasets yet: write questions from the knowledge base above (or `python -m pipeline synth`); a golden "
        "set given to an evaluation is kept here as a dataset, and a run can be added to one from the Runs page or "
        "its drilldown."
    )
    st.stop()
datasets_table(rows)
name = pick_dataset([info.name for info, _ in rows])
kept = versions(db, name)
numbers = [v.version for v in kept]
latest = load(db, name)
pending = pending_review(latest)
st.subheader(escape_markdown(f"{name}, version {latest.version}"))
st.caption(
    f"{plural(len(latest.items), 'item')}, {plural(len(kept), 'version')}; "
    f"{len(pending)} pending review in the latest version."
)

review_tab, items_tab, versions_tab, diff_tab = st.tabs(["Review", "Items", "Versions", "Compare versions"])
with review_tab:
    review_section(db, name, latest)
with items_tab:
    version = st.selectbox("Items of version", numbers, index=0, key=f"datasets_version-{name}-{numbers[0]}")
    shown = latest if version == latest.version else load(db, name, version)
    items_table(shown)
    export_button(shown)
with versions_tab:
    versions_table(kept)
with diff_tab:
    diff_section(db, name, numbers)
