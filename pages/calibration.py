"""How far the judge agrees with people, where it disagrees, whether corrections help, and aligning the judge."""

import streamlit as st

from pages.views.alignment import alignment_section
from pages.views.calibration import (
    agreement_by_criterion,
    choose_criterion,
    choose_scope,
    claim_section,
    corrections_form,
    criterion_section,
    overview,
    rejudge_section,
)
from pages.views.common import page_setup
from pages.views.markup import escape_markdown
from pipeline.evaluation.judge import CRITERIA

settings, db = page_setup(__file__)

label, run_ids = choose_scope(db)
if not run_ids:
    st.info("No judged runs in this scope yet.")
    st.stop()

pairs_by_criterion, stats = agreement_by_criterion(db, run_ids)
if not any(s.n for s in stats.values()):
    st.info(f"No rated answers in {escape_markdown(label)} yet: rate some on the Annotate page.")
    st.stop()
overview(stats, label)
criterion = choose_criterion([c for c in CRITERIA if stats[c].n])
criterion_section(db, run_ids, criterion, pairs_by_criterion[criterion], stats[criterion])
alignment_section(settings, db, criterion)
claim_section(db, run_ids)
corrections_form(db, pairs_by_criterion)
rejudge_section(settings, db, run_ids, stats)
