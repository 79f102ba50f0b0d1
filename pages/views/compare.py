"""Widgets of the Compare page: choosing run A and run B, the metric tiles, latency, tokens and cost with B − A,
the item diff, every item's costs and two answers side by side with their claims' verdicts. Run names, questions,
answers and claims are untrusted text: escaped or shown in tables."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from pages.views.drilldown import show_claims
from pages.views.kept import keep_widget_values
from pages.views.markup import (
    NOT_AVAILABLE,
    annotated_markdown,
    escape_markdown,
    fmt_change,
    fmt_cost,
    fmt_count,
    fmt_ms,
    fmt_on_scale,
    plural,
    status_markdown,
)
from pages.views.tables import delta_column, score_column, table
from pipeline.answering.events import AnswerResult
from pipeline.answering.status import status_label
from pipeline.evaluation.compare_items import ItemPair, Usage, difference
from pipeline.evaluation.compare_runs import ItemChange, RunComparison, Side, Tile
from pipeline.vocabulary import Status

TILES_PER_ROW = 4


def choose_runs(names: list[str], default_a: str | None, default_b: str | None) -> tuple[str, str]:
    """Run A and run B: from the link (?a=NAME&b=NAME; an unknown name is explained), else the defaults. The
    link follows the choice, so it can be shared."""
    for key, default in (("a", default_a), ("b", default_b)):
        asked = st.query_params.get(key)
        if asked is not None and asked not in names:
            st.error(
                f"There is no evaluation named {escape_markdown(repr(asked))} (run {key.upper()} of the link): "
                "it may have been renamed or deleted. Choose a run below.",
                icon=":material/error:",
            )
            asked = None
        state = f"compare_{key}"
        if st.session_state.get(state) not in names:
            st.session_state[state] = asked or default or names[0]
    left, right = st.columns(2)
    a = left.selectbox("Run A (before)", names, key="compare_a")
    b = right.selectbox("Run B (after)", names, key="compare_b")
    st.query_params["a"], st.query_params["b"] = a, b
    return a, b


def compare_link(a: str, b: str) -> str:
    """The address of the Compare page with run A and run B chosen (the link choose_runs reads), names encoded."""
    return "/compare?" + urlencode({"a": a, "b": b})


def show_comparison(result: RunComparison) -> None:
    show_sides(result)
    if not result.same_dataset:
        a, b = result.a, result.b
        st.warning(
            "**Different datasets.** "
            + escape_markdown(
                f"A ran {a.dataset_text}, B ran {b.dataset_text}. "
                f"Items are matched by golden id: {len(result.shared)} in both, {len(result.only_a)} only in A, "
                f"{len(result.only_b)} only in B; each mean is over its own run's items."
            ),
            icon=":material/warning:",
        )
    if not result.same_pin:
        st.warning(
            "**Judge pins differ** "
            + escape_markdown(f"(A: {result.a.pin}; B: {result.b.pin}): ")
            + "judge scores are shown for each run but not compared.",
            icon=":material/gavel:",
        )
    show_settings_diff(result.settings_diff)
    show_tiles(result.tiles)


def show_settings_diff(diff: dict) -> None:
    """The settings the runs differ in (their effect is what the tiles below show), or that they are the same."""
    if not diff:
        st.caption("Both runs used the same settings and prompt versions.")
        return
    # a setting in words, as on Settings & health (its key joins them with _)
    rows = [
        {"setting": key.replace("_", " "), "A": _setting_text(a), "B": _setting_text(b)} for key, (a, b) in diff.items()
    ]
    with st.expander(f"Settings that differ ({len(rows)})", expanded=True):
        table(pd.DataFrame(rows), hide_index=True, width="stretch")


def _setting_text(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "—" if value is None else str(value)


def show_sides(result: RunComparison) -> None:
    for column, side, which in zip(st.columns(2), (result.a, result.b), "AB", strict=True):
        with column:
            show_side(side, which)


def show_side(side: Side, which: str) -> None:
    run = side.run
    st.markdown(f"**{which}: {escape_markdown(run.name)}**")
    st.caption(
        escape_markdown(f"{side.dataset_text} · {run.status} · judge {side.pin} · {side.claims} · {side.latency_text}")
    )
    st.page_link(
        "pages/evaluate.py",
        label=f"Open run {which} on Evaluate",
        icon=":material/science:",
        query_params={"eval": run.name},
    )


def paired_text(tile: Tile) -> str | None:
    """The tile's help: the regression check's paired change over the items both runs scored."""
    paired = tile.paired
    if paired is None:
        return None
    if paired.ci_low is None:
        return f"Paired over shared items: {paired.message}"
    return (
        f"Paired change over the {paired.n} items both runs scored: {paired.delta:+.3f}, "
        f"95% interval [{paired.ci_low:+.3f}, {paired.ci_high:+.3f}]"
    )


def show_tiles(tiles: list[Tile]) -> None:
    st.subheader("Metrics: B − A")
    for start in range(0, len(tiles), TILES_PER_ROW):
        for column, tile in zip(st.columns(TILES_PER_ROW), tiles[start : start + TILES_PER_ROW], strict=False):
            with column:
                show_tile(tile)


def show_tile(tile: Tile) -> None:
    if not tile.comparable:
        delta, colour, arrow = tile.not_comparable, "off", "off"
    elif tile.delta is None:
        delta, colour, arrow = None, "off", "auto"
    elif round(tile.delta, 2) == 0:
        delta, colour, arrow = f"{tile.delta:+.2f}", "off", "off"  # no change: neither green nor red
    else:
        delta, colour, arrow = f"{tile.delta:+.2f}", "normal" if tile.higher_is_better else "inverse", "auto"
    st.metric(
        tile.label,
        fmt_on_scale(tile.b_mean, tile.scale),
        delta=delta,
        delta_color=colour,
        delta_arrow=arrow,
        help=paired_text(tile),
    )
    st.caption(
        f"A {fmt_on_scale(tile.a_mean, tile.scale)} (n={tile.a_n}) → B {fmt_on_scale(tile.b_mean, tile.scale)} "
        f"(n={tile.b_n})"
    )


METRIC, WAY = "compare_metric", "compare_way"  # session state: the item diff's metric and direction
WORSE, BETTER = "got worse", "got better"


def diff_metrics(result: RunComparison) -> dict[str, str]:
    """The metrics an item diff can be shown for (both runs comparable on them), by label."""
    return {t.metric: t.label for t in result.tiles if t.comparable}


def chosen_changes(result: RunComparison, state) -> tuple[str | None, bool]:
    """(the item diff's metric, whether it lists the items that got worse), as last chosen or the first."""
    labels = diff_metrics(result)
    metric = state.get(METRIC) if state.get(METRIC) in labels else next(iter(labels), None)
    return metric, not str(state.get(WAY, WORSE)).startswith(BETTER)


def preferred_change(result: RunComparison, state) -> ItemChange | None:
    """The first item of the diff as chosen: the item the side-by-side view opens first."""
    metric, worse = chosen_changes(result, state)
    changes = result.changed(metric, worse=worse) if metric and result.changes else []
    return changes[0] if changes else None


def show_changes(result: RunComparison) -> None:
    """The item diff for one metric: the items that got worse (or better), each linked to both runs."""
    labels = diff_metrics(result)
    if not result.changes:
        st.info(f"No item that both runs scored changed its score ({plural(len(result.shared), 'item')} in both).")
        return
    left, right = st.columns(2)
    metric = left.selectbox("Metric", list(labels), format_func=labels.get, key=METRIC)
    worse, better = result.changed(metric, worse=True), result.changed(metric, worse=False)
    direction = right.radio("Show", [f"{WORSE} ({len(worse)})", f"{BETTER} ({len(better)})"], horizontal=True, key=WAY)
    changes = worse if direction.startswith(WORSE) else better
    if not changes:
        st.info(f"No item {direction.split(' (')[0]} on {labels[metric]}.")
        return
    table(change_table(changes), hide_index=True, width="stretch", column_config=CHANGE_COLUMNS)


ITEM_TABS = ("Items that changed", "Item by item")
ITEM_TAB = "compare_tab"  # session state: the chosen tab


# A fragment: a tab's click (or a widget in a tab) reruns the tabs alone. Only the chosen tab is drawn: with both
# drawn, a first render of the page took 0.1-0.3 s longer on two cores (the items' costs table, a chooser of every
# shared item and the two answers with their claims).
@st.fragment
def item_tabs(result: RunComparison, answers: Callable[[ItemPair], tuple]) -> None:
    """The items that changed, and item by item: each item's costs and two answers side by side (opening on the
    first item of the diff as chosen in the first tab)."""
    keep_widget_values(st.session_state, (METRIC, WAY))
    changed_tab, item_tab = st.tabs(list(ITEM_TABS), key=ITEM_TAB, on_change="rerun")
    if changed_tab.open:
        with changed_tab:
            show_changes(result)
    if item_tab.open:
        with item_tab:
            pair = choose_pair(result, preferred_change(result, st.session_state))
            if pair is not None:
                show_side_by_side(pair, result, answers(pair))


CHANGE_COLUMNS = {
    "A": score_column("A"),
    "B": score_column("B"),
    "B − A": delta_column("B − A"),
    "run A": st.column_config.LinkColumn("run A", display_text=r"/runs\?run_id=(\d+)"),
    "run B": st.column_config.LinkColumn("run B", display_text=r"/runs\?run_id=(\d+)"),
}


def run_link(run_id: int | None) -> str | None:
    return f"/runs?run_id={int(run_id)}" if run_id is not None else None


def change_table(changes: list[ItemChange]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "item": c.item_id,
                "question": c.question,
                "A": c.a,
                "B": c.b,
                "B − A": c.delta,
                "run A": run_link(c.a_run_id),
                "run B": run_link(c.b_run_id),
            }
            for c in changes
        ]
    )


def usage_text(usage: Usage | None, priced: bool) -> str:
    """One answer's (or run's) latency, tokens and cost in a few words."""
    if usage is None:
        return "no run"
    cost = f" · cost {fmt_cost(usage.cost)}" if priced else ""
    return f"{fmt_ms(usage.latency_ms)} · {fmt_count(usage.tokens)} tokens{cost}"


def show_costs(result: RunComparison) -> None:
    """Latency p50 and p95 per question, tokens and cost of the runs' answers: B's, with B − A (lower is better)."""
    st.subheader("Latency, tokens and cost: B − A")
    a, b = result.a.costs, result.b.costs
    priced = a.usage.cost is not None
    figures = [
        ("latency p50", a.usage.latency_ms, b.usage.latency_ms, fmt_ms),
        ("latency p95", a.p95_ms, b.p95_ms, fmt_ms),
        ("tokens", a.usage.tokens, b.usage.tokens, fmt_count),
    ] + ([("cost", a.usage.cost, b.usage.cost, fmt_cost)] if priced else [])
    for column, (label, va, vb, fmt) in zip(st.columns(TILES_PER_ROW), figures, strict=False):
        change = difference(va, vb)
        with column:
            st.metric(
                label,
                fmt(vb),
                delta=None if change is None else fmt_change(change, fmt),
                delta_color="off" if not change else "inverse",  # less time, fewer tokens, lower cost: better
                delta_arrow="off" if not change else "auto",
            )
            st.caption(f"A {fmt(va)} → B {fmt(vb)}")
    st.caption(
        f"Of the answers' model calls ({plural(a.items, 'item')} in A, {plural(b.items, 'item')} in B), at the "
        "costs first measured (a reply replayed from the cache counts what it cost then). "
        + (
            "Cost at the prices set now."
            if priced
            else "No cost: no price per 1,000 tokens is set (see Settings & health)."
        )
    )


def pair_table(pairs: list[ItemPair], priced: bool) -> pd.DataFrame:
    rows = []
    for p in pairs:
        u = p.usage
        row = {
            "item": p.item_id,  # the question is in the chooser below: the table fits 1280 px
            "status A → B": f"{p.a_status or NOT_AVAILABLE} → {p.b_status or NOT_AVAILABLE}",
            "latency A → B": f"{fmt_ms(u.a and u.a.latency_ms)} → {fmt_ms(u.b and u.b.latency_ms)}",
            "latency B − A": fmt_change(u.latency_ms, fmt_ms),
            "tokens A → B": f"{fmt_count(u.a and u.a.tokens)} → {fmt_count(u.b and u.b.tokens)}",
            "tokens B − A": fmt_change(u.tokens, fmt_count),
        }
        if priced:
            row["cost B − A"] = fmt_change(u.cost, fmt_cost)
        rows.append(row)
    return pd.DataFrame(rows)


def choose_pair(result: RunComparison, preferred: ItemChange | None) -> ItemPair | None:
    """Every item both runs answered, with what each answer cost; returns the item chosen for the side-by-side
    view (first: the item the diff shows first, else one that got worse)."""
    if not result.pairs:
        st.info("The runs share no item that both answered.")
        return None
    priced = result.a.costs.usage.cost is not None
    table(pair_table(result.pairs, priced), hide_index=True, width="stretch")
    pairs = result.pairs
    if preferred is not None:
        pairs = sorted(pairs, key=lambda p: p.item_id != preferred.item_id)
    return st.selectbox(
        "Open an item side by side",
        pairs,
        format_func=lambda p: f"{p.item_id}: {p.question[:80]}",
        key=f"compare_item_{preferred.item_id if preferred else ''}",
    )


def show_side_by_side(pair: ItemPair, result: RunComparison, answers: tuple) -> None:
    st.markdown(f"**Question** ({escape_markdown(pair.item_id)})")
    st.text(pair.question)
    priced = result.a.costs.usage.cost is not None
    usages = (pair.usage.a, pair.usage.b)
    for column, side, which, usage, answer, run_id in zip(
        st.columns(2, gap="large"),
        (result.a, result.b),
        "AB",
        usages,
        answers,
        (pair.a_run_id, pair.b_run_id),
        strict=True,
    ):
        with column:
            st.markdown(f"**{which}: {escape_markdown(side.run.name)}**")
            st.caption(escape_markdown(usage_text(usage, priced)))
            show_answer(answer, run_id)


def show_answer(answer: AnswerResult | None, run_id: int | None) -> None:
    if run_id is not None:
        st.page_link(
            "pages/runs.py",
            label=f"Open run {run_id}",
            icon=":material/open_in_new:",
            query_params={"run_id": str(run_id)},
        )
    if answer is None:
        st.caption("This run is no longer stored.")
        return
    st.caption(status_markdown(status_label(answer.status), answer.status))  # the icon every page shows
    if answer.status == Status.ABSTAINED:
        st.markdown(escape_markdown(f"{answer.answer} ({answer.abstain_reason})"))
    else:
        st.markdown(annotated_markdown(answer.answer or "", answer.final_claims))
    show_claims(answer)  # each claim with its verdict and evidence, as the drilldown shows them
