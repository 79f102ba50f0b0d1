"""Widgets of the Calibration page."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from pages.views import plotly_charts as pc
from pages.views.common import show_error
from pages.views.markup import NOT_AVAILABLE, escape_markdown, fmt_pct, fmt_score, plural
from pages.views.tables import score_column, table
from pipeline.calibration.agreement import (
    MIN_RELIABLE,
    Agreement,
    agreement,
    claim_agreement,
    disagreements,
    inter_annotator,
    rejudge,
)
from pipeline.calibration.annotations import add_corrections, current_corrections, judged_pairs
from pipeline.errors import WorkbenchError
from pipeline.evaluation.judge import CRITERIA
from pipeline.evaluation.judge_variance import CriterionVariance, scope_variance, self_vs_people
from pipeline.history.evaluations import list_eval_runs, run_ids_of, run_ids_under_pin


def scopes(db) -> dict[str, tuple[str, tuple]]:
    """Calibration's scopes by label, the first shown by default: all runs under each judge pin ("pin", (model,
    digest, prompt version)), then each evaluation ("run", (its id,))."""
    runs = list_eval_runs(db)
    pins = sorted({(r["judge_model"], r["judge_digest"], r["judge_prompt_version"]) for r in runs})
    labelled = {f"all runs judged by {m}@{d[:12]} / {v}": ("pin", (m, d, v)) for m, d, v in pins}
    return labelled | {f"run: {r['name']}": ("run", (r["id"],)) for r in runs}


def scope_run_ids(db, scope: tuple[str, tuple]) -> list[int]:
    """The runs of a scope as `scopes` gives it."""
    kind, key = scope
    return run_ids_of(db, *key) if kind == "run" else run_ids_under_pin(db, *key)


def choose_scope(db) -> tuple[str, list[int]]:
    options = scopes(db)
    if not options:
        return "", []
    choice = st.selectbox("Scope", list(options))
    return choice.removeprefix("run: "), scope_run_ids(db, options[choice])


def agreement_by_criterion(db, run_ids: list[int]) -> tuple[dict[str, list[dict]], dict[str, Agreement]]:
    """(each criterion's judge-human pairs in the scope, their agreement statistics)."""
    pairs = {c: judged_pairs(db, run_ids, c) for c in CRITERIA}
    return pairs, {c: agreement([p["judge"] for p in ps], [p["human"] for p in ps]) for c, ps in pairs.items()}


def figure(s: Agreement, name: str) -> str:
    """The statistic, or n/a with the reason it is undefined."""
    value = getattr(s, name)
    if value is not None:
        return fmt_score(value)
    reason = s.why_not(name)
    return f"{NOT_AVAILABLE} ({reason})" if reason else NOT_AVAILABLE


NOT_AVAILABLE_WHY = re.compile(rf"^{NOT_AVAILABLE} \((.+)\)$")


def stats_table(rows: list[dict]) -> None:
    """The statistics' rows as a static table, each undefined figure a plain n/a in its cell and its reason said
    once under the table (one sentence repeated in fifteen cells was a wall of text), with where it applies."""
    frame = pd.DataFrame(rows).set_index("")
    reasons: dict[str, list[str]] = {}
    for row_name, row in frame.iterrows():
        for column, cell in row.items():
            found = NOT_AVAILABLE_WHY.match(str(cell))
            if found:
                reasons.setdefault(found.group(1), []).append(f"{row_name}: {column}")
                frame.loc[row_name, column] = NOT_AVAILABLE
    st.table(frame)
    if reasons:
        st.caption(
            escape_markdown(
                "n/a: "
                + "; ".join(f"{why} ({', '.join(dict.fromkeys(where))})" for why, where in reasons.items())
                + "."
            )
        )


KEPT_CHARTS = 32


@st.cache_resource(max_entries=KEPT_CHARTS, show_spinner=False)
def agreement_heatmap(matrix: tuple[tuple[int, ...], ...], criterion: str):
    """The judge x human grid of one criterion's pairs (a plotly figure, kept by its counts: a rerun sends it
    again without building it)."""
    scores = [str(s) for s in range(1, 6)]
    return pc.heatmap(matrix, scores, scores, "human score", "judge score", f"{criterion}: judge x human")


@st.cache_resource(max_entries=KEPT_CHARTS, show_spinner=False)
def base_rates_chart(judge: tuple[float, ...], people: tuple[float, ...]):
    """Each score's share among the judge's scores and people's ratings, side by side (a plotly figure)."""
    frame = pd.DataFrame(
        {
            "score": [str(s) for s in range(1, 6)] * 2,
            "share": list(judge) + list(people),
            "share_text": [fmt_pct(v) for v in list(judge) + list(people)],
            "rater": ["judge"] * 5 + ["people"] * 5,
        }
    )
    return pc.grouped_bars(frame, "score", "share", "rater", "Base rates", "share_text")


@st.cache_resource(max_entries=KEPT_CHARTS, show_spinner=False)
def claims_heatmap(matrix, labels: tuple[str, ...]):
    """People's verdicts on claims against the verifier's, counted in a grid (a plotly figure)."""
    return pc.heatmap(matrix, list(labels), list(labels), "verifier", "people", "People vs the verifier")


def stats_row(name: str, s: Agreement) -> dict:
    low, high = s.kappa_low, s.kappa_high
    interval = f"[{fmt_score(low)}, {fmt_score(high)}]" if low is not None else figure(s, "kappa_low")
    return {
        "": name,
        "n": s.n,
        "exact match": figure(s, "exact"),
        "within one": figure(s, "within_one"),
        "mean abs diff": figure(s, "mean_abs_diff"),
        "weighted kappa": figure(s, "kappa"),
        "95% interval": interval,
        "Spearman": figure(s, "spearman"),
    }


def self_row(v: CriterionVariance) -> dict:
    """The judge's agreement with itself over its repeats, in the columns of stats_row (n: items)."""
    low, high = v.kappa_low, v.kappa_high
    interval = f"[{fmt_score(low)}, {fmt_score(high)}]" if low is not None else figure(v, "kappa_low")
    return {
        "": f"judge vs itself ({v.repeats} repeats)",
        "n": v.items,
        "exact match": figure(v, "exact"),
        "within one": figure(v, "within_one"),
        "mean abs diff": figure(v, "mean_abs_diff"),
        "weighted kappa": figure(v, "kappa"),
        "95% interval": interval,
        "Spearman": f"{NOT_AVAILABLE} (repeats have no order)",
    }


CRITERION = "calibration_criterion"  # session state: the criterion shown in detail


def overview(stats: dict[str, Agreement], scope: str) -> None:
    """Judge vs people, one row per criterion that has pairs; the ones without are named below the table."""
    st.subheader("Judge vs people, by criterion")
    rows = [stats_row(c.capitalize(), s) for c, s in stats.items() if s.n]
    stats_table(rows)
    missing = [c for c, s in stats.items() if not s.n]  # e.g. a criterion added after these answers were rated
    if missing:
        st.caption(
            f"{', '.join(c.capitalize() for c in missing)}: no answer in {escape_markdown(scope)} has both a "
            "person's rating and a judge score yet."
        )


def choose_criterion(criteria: list[str]) -> str:
    """The criterion whose details (self-agreement, people with each other, charts, disagreements) are drawn: one
    at a time, as five criteria's tables and ten charts made the browser's every visit of the page slow."""
    return st.radio("Details of", criteria, format_func=str.capitalize, horizontal=True, key=CRITERION)


def criterion_section(db, run_ids: list[int], criterion: str, pairs: list[dict], stats: Agreement) -> None:
    st.subheader(criterion.capitalize())
    if not stats.reliable:
        st.warning(
            f"Only {plural(stats.n, 'judge-human pair')}: with fewer than {MIN_RELIABLE} these figures are unreliable."
        )
    itself = scope_variance(db, run_ids, criterion)  # None unless the scope's evaluations judged with repeats
    rows = [
        stats_row("judge vs people", stats),
        *([self_row(itself)] if itself is not None else []),
        stats_row("annotator vs annotator", inter_annotator(db, run_ids, criterion)),
    ]
    stats_table(rows)
    if itself is not None:
        sentence = self_vs_people(stats, itself)
        if sentence:
            st.info(escape_markdown(sentence))
        st.caption(
            escape_markdown(
                f"Judge vs itself: every pair of repeats of the same item, over the {plural(itself.items, 'item')} "
                f"of this scope judged {itself.repeats} times; {fmt_pct(itself.changed_share or 0)} of them changed "
                "score between repeats. Judge vs people compares people's ratings with the mean of the repeats, "
                "rounded to a whole score."
            ),
            help="Self-agreement is the quadratic-weighted kappa of all pairs of repeats pooled over items (each item "
            "weighs the same); its interval is a jackknife over items, withheld under 20 items. A judge that picks "
            "at random between two scores has a kappa near 0 with itself; one that never changes its score, 1.",
        )
    left, right = st.columns(2)
    n = max(len(pairs), 1)
    shares = [tuple(sum(p[rater] == s for p in pairs) / n for s in range(1, 6)) for rater in ("judge", "human")]
    matrix = tuple(tuple(int(n) for n in row) for row in stats.matrix)
    # keyed: two criteria may draw alike
    pc.draw(agreement_heatmap(matrix, criterion), f"heat-{criterion}", left)
    pc.draw(base_rates_chart(*shares), f"rates-{criterion}", right)
    wide = disagreements(pairs)
    if wide:
        with st.expander(f"Disagreements by 2 or more ({len(wide)})"):
            table(
                pd.DataFrame(wide)[["run_id", "annotator", "judge", "human", "question", "explanation"]].rename(
                    columns={"run_id": "run", "explanation": "judge's reasoning"}
                ),
                hide_index=True,
                width="stretch",
            )


def claim_section(db, run_ids: list[int]) -> None:
    result = claim_agreement(db, run_ids)
    st.subheader("Claims: people vs the verifier")
    if not result["n"]:
        st.info("No claim verdicts rated yet.")
        return
    if result["n"] < MIN_RELIABLE:
        st.warning(f"Only {plural(result['n'], 'rated claim')}: these figures are unreliable.")
    left, right = st.columns(2)
    per_verdict = pd.DataFrame(result["per_verdict"])
    table(
        per_verdict,
        where=left,
        hide_index=True,
        width="stretch",
        column_config={c: score_column(c) for c in per_verdict.select_dtypes("float").columns},
    )
    labels = result["labels"]
    pc.draw(claims_heatmap(result["matrix"], tuple(labels)), "claims-heatmap", right)


SAVED = "calibration_saved"  # the correction set version just saved, said once after the rerun that shows it


def corrections_form(db, pairs_by_criterion: dict[str, list[dict]]) -> None:
    version, corrections = current_corrections(db)
    st.subheader("Corrections for the judge")
    saved = st.session_state.pop(SAVED, None)
    if saved is not None:
        st.success(f"Correction set version {saved} saved.")
    st.caption(
        f"Correction set version {version or 0}: {plural(len(corrections), 'correction')}. The judge's prompt "
        "carries the most relevant ones; scores judged with another set are not compared with these.",
        help="The correction set's version is part of the judge pin (judge model, its digest and prompt version): "
        "Trends, Compare and the regression check compare scores only under the same pin.",
    )
    corrected = {(c.criterion, c.run_id, c.human_score) for c in corrections}  # not offered twice
    candidates = [
        (c, p)
        for c in CRITERIA
        for p in disagreements(pairs_by_criterion[c])
        if (c, p["run_id"], p["human"]) not in corrected
    ]
    if not candidates:
        st.caption("No disagreements of 2 or more to turn into corrections.")
        return
    # cleared once submitted, so pressing the button again does not save the same corrections as a new version
    with st.form("corrections", clear_on_submit=True):

        def label(i: int) -> str:
            criterion, pair = candidates[i]
            return (
                f"{criterion} · run {pair['run_id']} · judge {pair['judge']} vs {pair['human']} by {pair['annotator']}"
            )

        chosen = st.multiselect("Disagreements to turn into corrections", range(len(candidates)), format_func=label)
        why = st.text_area("Why the human score is right")
        if st.form_submit_button("Add corrections"):
            if not chosen:
                st.warning("Choose at least one disagreement to turn into a correction; nothing was saved.")
                return
            try:
                new = add_corrections(
                    db,
                    [
                        {
                            "criterion": candidates[i][0],
                            "run_id": candidates[i][1]["run_id"],
                            "question": candidates[i][1]["question"],
                            "answer_excerpt": (candidates[i][1]["answer"] or "")[:300],
                            "human_score": candidates[i][1]["human"],
                            "judge_score": candidates[i][1]["judge"],
                            "why": why,
                        }
                        for i in chosen
                    ],
                )
            except WorkbenchError as exc:
                show_error(exc)
            else:  # run again, so the count above and the disagreements offered include this set
                st.session_state[SAVED] = new
                st.rerun()


def rejudge_section(settings, db, run_ids: list[int], before: dict[str, Agreement]) -> None:
    version, _ = current_corrections(db)
    if version is None:
        return
    st.subheader("Re-judge with corrections")
    st.caption(
        "Each rated answer is judged again with the corrections, never with its own (leave-one-out), so "
        "any improvement is measured on answers whose correction the judge did not see."
    )
    if st.button(f"Re-judge the rated answers with correction set v{version}"):
        bar = st.progress(0.0, text="re-judging")
        try:
            rejudge(settings, db, run_ids, on_progress=lambda d, n: bar.progress(d / n, text=f"{d} of {n}"))
        except WorkbenchError as exc:
            show_error(exc)
            return
    rows = []
    for criterion in CRITERIA:
        after_pairs = judged_pairs(db, run_ids, criterion, version=version)
        if not after_pairs:
            continue
        after = agreement([p["judge"] for p in after_pairs], [p["human"] for p in after_pairs])
        rows += [
            stats_row(f"{criterion}: before", before[criterion]),
            stats_row(f"{criterion}: after (v{version}, leave-one-out)", after),
        ]
    if rows:
        stats_table(rows)
        st.caption(
            escape_markdown(
                "Compare the intervals, not only the point values: overlapping intervals mean the change may be noise."
            )
        )
