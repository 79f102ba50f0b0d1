"""The Calibration page's alignment section: plan, run and outcome of aligning a criterion's judge on people's
ratings (pipeline/calibration/align_run.py), and the criterion's judge prompt versions, one of which can be put
back in use."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.views.common import show_error
from pages.views.markup import escape_markdown, fmt_count, fmt_score, fmt_time
from pages.views.tables import table
from pipeline.calibration.align_run import Aligner, use_version, versions
from pipeline.errors import WorkbenchError

PLANNED = "align_plan"


def interval(low, high) -> str:
    return "no interval" if low is None else f"[{fmt_score(low)}, {fmt_score(high)}]"


def alignment_section(settings, db, criterion: str) -> None:
    st.subheader(f"Align the {criterion} judge with people")
    st.caption(
        "Rewrites the judge's prompt from every rated answer of this criterion (a rubric clarification the model "
        "writes from the disagreements, a few-shot set, both), chosen on some questions and measured on others. "
        "A new prompt is kept only when its gain over the current one is above zero across its whole interval."
    )
    try:
        if st.button("Plan the alignment", key=f"plan_{criterion}"):
            plan = Aligner(settings, db, criterion).plan()
            st.session_state[PLANNED] = (criterion, plan)
        planned = st.session_state.get(PLANNED)
        if planned and planned[0] == criterion:
            plan = planned[1]
            done = f" ({fmt_count(plan.done_steps)} steps already done)" if plan.done_steps else ""
            st.info(
                f"{fmt_count(plan.items)} rated answers of {fmt_count(plan.questions)} questions: "
                f"{fmt_count(plan.calls)} model calls, about {fmt_count(plan.tokens)} prompt tokens{done}."
            )
            if st.button("Run the alignment", key=f"run_{criterion}", type="primary"):
                run_alignment(settings, db, criterion, plan.calls)
    except WorkbenchError as exc:
        show_error(exc)
    versions_section(db, criterion)


def run_alignment(settings, db, criterion: str, planned_calls: int) -> None:
    bar = st.progress(0.0, text="aligning")
    done = [0]

    def on_item() -> None:
        done[0] += 1
        bar.progress(min(1.0, done[0] / max(planned_calls, 1)), text=f"{fmt_count(done[0])} model calls")

    result, version = Aligner(settings, db, criterion).run(on_item=on_item)
    st.session_state.pop(PLANNED, None)
    figures = (
        f"Held-out weighted kappa {fmt_score(result.kappa)} {interval(result.kappa_low, result.kappa_high)} "
        f"(current prompt {fmt_score(result.current_kappa)}); gain {fmt_score(result.gain)} "
        f"{interval(result.gain_low, result.gain_high)}."
    )
    tried = ", ".join(f"fold {f.index + 1}: {f.recipe}" for f in result.folds)
    if version is None:
        st.warning(escape_markdown(f"Kept the current prompt: {result.reason}. {figures} Tried: {tried}."))
        return
    st.success(escape_markdown(f"New judge prompt v{version} ({result.final.recipe}). {figures}"))
    if result.final.clarification:
        st.caption("The clarification added to the rubric:")
        st.text(result.final.clarification)  # model output: shown as text


def versions_section(db, criterion: str) -> None:
    rows = versions(db, criterion)
    if not rows:
        st.caption("No fitted versions yet: the judge uses the built-in rubric.")
        return
    table(
        pd.DataFrame(
            [
                {
                    "version": f"v{r['version']}",
                    "in use": "yes" if r["active"] else "",
                    "date": fmt_time(r["created_at"]),
                    "kind": r["recipe"],
                    "held-out kappa": f"{fmt_score(r['held_out_kappa'])} {interval(r['kappa_low'], r['kappa_high'])}",
                    "gain": f"{fmt_score(r['gain'])} {interval(r['gain_low'], r['gain_high'])}",
                    "fitted on": f"{fmt_count(len(r['fitted_on']))} ratings",
                }
                for r in rows
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    choices = {f"v{r['version']}": r["version"] for r in rows} | {"the built-in rubric (v0)": 0}
    chosen = st.selectbox("Judge prompt in use", list(choices), key=f"version_{criterion}")
    if st.button("Use this version", key=f"use_{criterion}"):
        use_version(db, criterion, choices[chosen])
        st.rerun()
