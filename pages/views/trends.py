"""The Trends page's charts (plotly, pages.views.plotly_charts): metric means as small multiples (one panel per
metric, on its own scale, the x axis shared), latency, tokens and cost per question, and traced runs' daily
faithfulness. Every number in a hover is the text the other pages show (pages.views.markup), put in a column of the
chart's data, never the chart's own rounding of the value."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.views import plotly_charts as pc
from pages.views.markup import fmt_cost, fmt_count, fmt_ms, fmt_score
from pipeline.evaluation.registry import label_of, scale_of
from pipeline.regression.trends import Measure

FORMAT = {"ms": fmt_ms, "cost": fmt_cost, "tokens": lambda v: fmt_count(None if v is None else round(v))}
LATENCY = "latency per question (solid: mean, dashed: p95)"
SERIES_LEGEND = "pipeline · judge pin · dataset · size"


def _value(v):
    return None if v is None or pd.isna(v) else float(v)


METRIC_COLUMNS = ["eval_run_id", "created_at", "name", "metric", "mean", "n", "failed", "series", "changed"]


def metrics_figure(
    data: pd.DataFrame, metrics: list[str], floors: dict[str, float], pinned: int | None, pinned_name: str | None
) -> go.Figure:
    """One panel per metric (rows of METRIC_COLUMNS), each with its own y axis over the metric's scale (0-1 scores
    and 1-5 judge means never share one), a line per series in the same colour in every panel, the metric's floor
    and the pinned baseline's point (a star)."""
    shown = data[data["metric"].isin(metrics)]
    points = pd.DataFrame(
        {
            "metric": shown["metric"],
            "series": shown["series"],
            "run": shown["name"],
            "created_at": pd.to_datetime(shown["created_at"]),
            "mean": [_value(v) for v in shown["mean"]],
            "mean_text": [fmt_score(_value(v)) for v in shown["mean"]],
            "n": [fmt_count(int(v)) for v in shown["n"]],
            "failed": [fmt_count(int(v)) for v in shown["failed"]],
            "changed": shown["changed"],
            "baseline": [f"pinned baseline: {pinned_name}" if r == pinned else None for r in shown["eval_run_id"]],
        }
    ).reset_index(drop=True)
    colors = pc.series_colors(points["series"])
    figure = pc.panels([label_of(m) for m in metrics], SERIES_LEGEND, "run time")
    in_legend: set[str] = set()
    for row, metric in enumerate(metrics, start=1):
        panel = points[points["metric"] == metric]
        fields = [
            ("run", "run"),
            ("mean_text", f"{metric} mean"),
            ("n", "n"),
            ("failed", "failed items"),
            ("changed", "changed"),
            ("series", "series"),
        ]
        pc.add_lines(figure, row, panel, "created_at", "mean", "series", colors, fields, in_legend)
        baseline = panel[panel["baseline"].notna()]
        if not baseline.empty:
            pc.add_star(
                figure, row, baseline, "created_at", "mean", [("baseline", "baseline"), ("mean_text", f"{metric} mean")]
            )
        if metric in floors:
            pc.add_floor(figure, row, floors[metric], f"floor {fmt_score(floors[metric])}")
        low, high = scale_of(metric)
        pad = (high - low) * 0.05
        figure.update_yaxes(title_text=pc.safe(metric), range=[low - pad, high + pad], row=row, col=1)
    return figure


def costs_figure(rows: pd.DataFrame, by: str, x: str, label: str, measures: list[Measure], x_title: str) -> go.Figure:
    """Latency (mean solid, p95 dashed; p50 in the hover), tokens and, when priced, cost per question over time:
    a panel each, the x axis shared, a line per group (`by`), each point's hover naming it (`label`) and every
    measure's figure as the other pages write it."""
    keys = [m.key for m in measures]
    shown_panels = [(LATENCY, ["latency_ms", "p95_latency_ms"])]
    shown_panels += [(m.label, [m.key]) for m in measures if m.unit != "ms"]
    label_title = "run" if label == "name" else label
    frame = pd.DataFrame(
        {
            "group": rows[by].astype(str),
            "time": pd.to_datetime(rows[x]),
            "label": rows[label].astype(str),
            "questions": [fmt_count(int(q)) for q in rows["questions"]],
            "replayed": [_replayed(r) for _, r in rows.iterrows()],
        }
        | {m.label: [FORMAT[m.unit](_value(v)) for v in rows[m.key]] for m in measures}
        | {key: [_value(v) for v in rows[key]] for key in keys}
    ).reset_index(drop=True)
    fields = [("label", label_title), ("group", by), ("questions", "questions")]
    fields += [(m.label, m.label) for m in measures] + [("replayed", "replayed from the cache")]
    colors = pc.series_colors(frame["group"])
    figure = pc.panels([title for title, _ in shown_panels], by, x_title)
    in_legend: set[str] = set()
    for row, (_, shown) in enumerate(shown_panels, start=1):
        unit = next(m.unit for m in measures if m.key == shown[0])
        for key in (k for k in shown if k in keys):
            dash = "dash" if key == "p95_latency_ms" else "solid"
            pc.add_lines(figure, row, frame, "time", key, "group", colors, fields, in_legend, dash)
        figure.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    return figure


def daily_figure(daily: pd.DataFrame, floor: float | None) -> go.Figure:
    """Traced runs' mean faithfulness per service and day (rows of service, day, mean, n), a line per service, the
    floor drawn in; the hover writes the mean as the other pages do."""
    frame = pd.DataFrame(
        {
            "service": daily["service"],
            "day": pd.to_datetime(daily["day"]),
            "day_text": daily["day"].astype(str),
            "mean": [_value(v) for v in daily["mean"]],
            "mean_text": [fmt_score(_value(v)) for v in daily["mean"]],
            "n": [fmt_count(int(v)) for v in daily["n"]],
        }
    ).reset_index(drop=True)
    fields = [("day_text", "day"), ("service", "service"), ("mean_text", "mean faithfulness"), ("n", "n")]
    figure = pc.panels(["faithfulness (mean of the day)"], "service", "day")
    figure.update_layout(height=figure.layout.height + pc.HEIGHT - pc.PANEL_HEIGHT)
    pc.add_lines(figure, 1, frame, "day", "mean", "service", pc.series_colors(frame["service"]), fields, set())
    if floor is not None:
        pc.add_floor(figure, 1, floor, f"floor {fmt_score(floor)}")
    figure.update_xaxes(tickformat="%Y-%m-%d", hoverformat="%Y-%m-%d")
    return figure


KEPT_FIGURES = 16
FIGURES = {"metrics": metrics_figure, "costs": costs_figure, "daily": daily_figure}


@st.cache_resource(max_entries=KEPT_FIGURES, show_spinner=False)
def figure_of(figure: str, *args) -> go.Figure:
    """A FIGURES chart, kept by its inputs: a rerun over the same data sends the kept figure (st.plotly_chart
    copies it; it is never changed)."""
    return FIGURES[figure](*args)


def _replayed(row) -> str:
    """The share of a point's calls the cache answered, as its hover says it."""
    share = _value(row.get("replayed"))
    return "n/a" if share is None else f"{share:.0%}"


def costs_table(rows: pd.DataFrame, first: list[str], measures: list[Measure]) -> tuple[pd.DataFrame, dict]:
    """The figures behind costs_figure as a table (its first columns, questions, then each measure) and the
    column formats the other pages use for them."""
    fmt = {"ms": "%.0f", "tokens": "%.0f", "cost": "%.4f"}
    config = {m.key: st.column_config.NumberColumn(m.label, format=fmt[m.unit]) for m in measures}
    config["questions"] = st.column_config.NumberColumn("questions", format="%d")
    config["created_at"] = st.column_config.DatetimeColumn("run time", format="YYYY-MM-DD HH:mm")
    config["replayed"] = st.column_config.NumberColumn(
        "replayed", format="percent", help="the share of the questions' model calls replayed from the response cache"
    )
    return rows[[*first, "questions", *(m.key for m in measures), "replayed"]], config
