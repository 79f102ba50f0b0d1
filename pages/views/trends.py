"""The Trends page's figures: metric means as small multiples (one panel per metric, on its own scale, the x axis
shared), and latency, tokens and cost per question. Every number in a hover is the text the other pages show
(pages.views.markup), not Plotly's own rounding of the value."""

from __future__ import annotations

import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from pages.views.markup import fmt_cost, fmt_count, fmt_ms, fmt_score
from pipeline.evaluation.registry import label_of, scale_of
from pipeline.regression.trends import Measure

PANEL_HEIGHT = 260
# the legend above the panels, in rows: a series' name (pipeline · judge pin · dataset · size) is long, and a legend
# at the side took half the chart's width from the panels
LEGEND = {"orientation": "h", "yanchor": "bottom", "y": 1.03, "x": 0}
MARGIN = {"t": 60}  # the legend above pushes it as far as it needs
PALETTE = plotly.colors.qualitative.Plotly
FORMAT = {"ms": fmt_ms, "cost": fmt_cost, "tokens": lambda v: fmt_count(None if v is None else round(v))}


def colors(names) -> dict[str, str]:
    """One colour per series name, the same in every panel and figure."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _value(v):
    return None if v is None or pd.isna(v) else float(v)


def metrics_figure(
    data: pd.DataFrame, metrics: list[str], floors: dict[str, float], pinned: int | None, pinned_name: str | None
) -> go.Figure:
    """One panel per metric (rows of eval_run_id, created_at, name, metric, mean, n, failed, series, changed), each
    with its own y axis over the metric's scale (0-1 scores and 1-5 judge means never share one), a line per
    series in the same colour in every panel, the metric's floor and the pinned baseline's point."""
    palette = colors(data["series"])
    chart = make_subplots(
        rows=len(metrics),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=60 / (120 + PANEL_HEIGHT * len(metrics)),
        subplot_titles=[label_of(m) for m in metrics],
    )
    legend = set()
    for row, metric in enumerate(metrics, start=1):
        shown = data[data["metric"] == metric]
        for name, group in shown.groupby("series"):
            hover = [
                [r.name, r.changed, fmt_count(int(r.n)), fmt_count(int(r.failed)), fmt_score(_value(r.mean))]
                for r in group.itertuples()
            ]
            chart.add_trace(
                go.Scatter(
                    x=group["created_at"],
                    y=group["mean"],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in legend,
                    line={"color": palette[name]},
                    customdata=hover,
                    hovertemplate="%{customdata[0]}<br>" + metric + " mean %{customdata[4]} (n=%{customdata[2]}, "
                    "failed items %{customdata[3]})<br>changed: %{customdata[1]}<extra></extra>",
                ),
                row=row,
                col=1,
            )
            legend.add(name)
        baseline_point = shown[shown["eval_run_id"] == pinned]
        if not baseline_point.empty:
            chart.add_trace(
                go.Scatter(
                    x=baseline_point["created_at"],
                    y=baseline_point["mean"],
                    mode="markers",
                    marker={"symbol": "star", "size": 16, "color": "gold", "line": {"width": 1, "color": "black"}},
                    name=f"pinned baseline: {pinned_name}",
                    legendgroup="pinned baseline",
                    showlegend="pinned baseline" not in legend,
                    customdata=[fmt_score(_value(v)) for v in baseline_point["mean"]],
                    hovertemplate=f"pinned baseline: {pinned_name}<br>{metric} mean %{{customdata}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
            legend.add("pinned baseline")
        if metric in floors:
            chart.add_hline(
                y=floors[metric],
                line_dash="dash",
                line_color="red",
                annotation_text=f"floor {fmt_score(floors[metric])}",
                row=row,
                col=1,
            )
        low, high = scale_of(metric)
        pad = (high - low) * 0.05
        chart.update_yaxes(title_text=metric, range=[low - pad, high + pad], row=row, col=1)
    chart.update_xaxes(title_text="run time", row=len(metrics), col=1)
    chart.update_layout(
        height=120 + PANEL_HEIGHT * len(metrics),
        legend={**LEGEND, "title": "pipeline · judge pin · dataset · size"},
        margin=MARGIN,
        hovermode="closest",
    )
    return chart


def costs_figure(rows: pd.DataFrame, by: str, x: str, label: str, measures: list[Measure], x_title: str) -> go.Figure:
    """Latency (mean solid, p95 dashed; p50 in the hover), tokens and, when priced, cost per question over time:
    a panel each, the x axis shared, a line per group (`by`), each point's hover naming it (`label`) and every
    measure's figure as the other pages write it."""
    keys = [m.key for m in measures]
    panels = [("latency per question (solid: mean, dashed: p95)", ["latency_ms", "p95_latency_ms"])]
    panels += [(m.label, [m.key]) for m in measures if m.unit != "ms"]
    palette = colors(rows[by])
    chart = make_subplots(
        rows=len(panels),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=60 / (120 + PANEL_HEIGHT * len(panels)),
        subplot_titles=[t for t, _ in panels],
    )
    template = (
        "%{customdata[0]}<br>questions %{customdata[1]}<br>"
        + "<br>".join(f"{m.label} %{{customdata[{i + 2}]}}" for i, m in enumerate(measures))
        + "<extra></extra>"
    )
    for name, group in rows.groupby(by):
        hover = [
            [str(r[label]), fmt_count(int(r["questions"]))] + [FORMAT[m.unit](_value(r[m.key])) for m in measures]
            for _, r in group.iterrows()
        ]
        for row, (_, shown) in enumerate(panels, start=1):
            for key in shown:
                if key not in keys:
                    continue
                chart.add_trace(
                    go.Scatter(
                        x=group[x],
                        y=group[key],
                        mode="lines+markers",
                        name=str(name) if key != "p95_latency_ms" else f"{name} (p95)",
                        legendgroup=str(name),
                        showlegend=row == 1 and key == "latency_ms",
                        line={"color": palette[name], "dash": "dash" if key == "p95_latency_ms" else "solid"},
                        customdata=hover,
                        hovertemplate=template,
                    ),
                    row=row,
                    col=1,
                )
    for row, (_, shown) in enumerate(panels, start=1):
        unit = next(m.unit for m in measures if m.key == shown[0])
        chart.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    chart.update_xaxes(title_text=x_title, row=len(panels), col=1)
    chart.update_layout(height=120 + PANEL_HEIGHT * len(panels), legend=LEGEND, margin=MARGIN, hovermode="closest")
    return chart


def costs_table(rows: pd.DataFrame, first: list[str], measures: list[Measure]) -> tuple[pd.DataFrame, dict]:
    """The figures behind costs_figure as a table (its first columns, questions, then each measure) and the
    column formats the other pages use for them."""
    fmt = {"ms": "%.0f", "tokens": "%.0f", "cost": "%.4f"}
    config = {m.key: st.column_config.NumberColumn(m.label, format=fmt[m.unit]) for m in measures}
    config["questions"] = st.column_config.NumberColumn("questions", format="%d")
    config["created_at"] = st.column_config.DatetimeColumn("run time", format="YYYY-MM-DD HH:mm")
    return rows[[*first, "questions", *(m.key for m in measures)]], config
