"""The Trends page's charts (Vega-Lite, pages.views.charts): metric means as small multiples (one panel per metric,
on its own scale, the x axis shared), latency, tokens and cost per question, and traced runs' daily faithfulness.
Every number in a hover is the text the other pages show (pages.views.markup), put in a column of the chart's data,
never the chart's own rounding of the value."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pages.views.charts import STAR, floor_rule, line_panel, series_colors, stacked
from pages.views.markup import fmt_cost, fmt_count, fmt_ms, fmt_score
from pipeline.evaluation.registry import label_of, scale_of
from pipeline.regression.trends import Measure

FORMAT = {"ms": fmt_ms, "cost": fmt_cost, "tokens": lambda v: fmt_count(None if v is None else round(v))}
LATENCY = "latency per question (solid: mean, dashed: p95)"


def _value(v):
    return None if v is None or pd.isna(v) else float(v)


def _x_titles(panels: list, x_title: str) -> list:
    """The time axis titled under the last panel only (the panels share it)."""
    return [None] * (len(panels) - 1) + [x_title]


METRIC_COLUMNS = ["eval_run_id", "created_at", "name", "metric", "mean", "n", "failed", "series", "changed"]


def metrics_figure(
    data: pd.DataFrame, metrics: list[str], floors: dict[str, float], pinned: int | None, pinned_name: str | None
) -> alt.VConcatChart:
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
    colors = series_colors(points["series"])
    panels = []
    for metric, x_title in zip(metrics, _x_titles(metrics, "run time"), strict=True):
        low, high = scale_of(metric)
        pad = (high - low) * 0.05
        tooltip = [
            alt.Tooltip("run:N", title="run"),
            alt.Tooltip("mean_text:N", title=f"{metric} mean"),
            alt.Tooltip("n:N", title="n"),
            alt.Tooltip("failed:N", title="failed items"),
            alt.Tooltip("changed:N", title="changed"),
            alt.Tooltip("series:N", title="series"),
        ]
        base = alt.Chart(points).transform_filter(alt.datum.metric == metric)
        lines = line_panel(
            points,
            "created_at",
            "mean",
            "series",
            colors,
            tooltip,
            None,
            metric,
            y_scale=alt.Scale(domain=[low - pad, high + pad], zero=False, nice=False),
            x_title=x_title,
            legend_title="pipeline · judge pin · dataset · size",
        ).transform_filter(alt.datum.metric == metric)
        star = (
            base.transform_filter("isValid(datum.baseline)")
            .mark_point(shape=STAR, size=320, filled=True, color="gold", stroke="black", strokeWidth=1, opacity=1)
            .encode(
                x="created_at:T",
                y="mean:Q",
                tooltip=[
                    alt.Tooltip("baseline:N", title="baseline"),
                    alt.Tooltip("mean_text:N", title=f"{metric} mean"),
                ],
            )
        )
        layers = [lines, star]
        if metric in floors:
            layers.append(floor_rule(floors[metric], f"floor {fmt_score(floors[metric])}"))
        panels.append(alt.layer(*layers, title=label_of(metric)))
    return stacked(panels)


def costs_figure(
    rows: pd.DataFrame, by: str, x: str, label: str, measures: list[Measure], x_title: str
) -> alt.VConcatChart:
    """Latency (mean solid, p95 dashed; p50 in the hover), tokens and, when priced, cost per question over time:
    a panel each, the x axis shared, a line per group (`by`), each point's hover naming it (`label`) and every
    measure's figure as the other pages write it."""
    keys = [m.key for m in measures]
    panels = [(LATENCY, ["latency_ms", "p95_latency_ms"])]
    panels += [(m.label, [m.key]) for m in measures if m.unit != "ms"]
    label_title = "run" if label == "name" else label
    records = []
    for _, r in rows.iterrows():
        hover = {"label": str(r[label]), "questions": fmt_count(int(r["questions"])), "replayed": _replayed(r)}
        hover |= {m.label: FORMAT[m.unit](_value(r[m.key])) for m in measures}
        for title, shown in panels:
            for key in shown:
                if key in keys:
                    line = "p95" if key == "p95_latency_ms" else "mean"
                    records.append(
                        {"group": str(r[by]), "time": r[x], "panel": title, "line": line, "value": _value(r[key])}
                        | hover
                    )
    frame = pd.DataFrame(records)
    frame["time"] = pd.to_datetime(frame["time"])
    colors = series_colors(frame["group"])
    tooltip = [
        alt.Tooltip("label:N", title=label_title),
        alt.Tooltip("group:N", title=by),
        alt.Tooltip("questions:N", title="questions"),
    ] + [alt.Tooltip(f"{m.label}:N", title=m.label) for m in measures]
    tooltip.append(alt.Tooltip("replayed:N", title="replayed from the cache"))
    charts = []
    for (title, shown), title_x in zip(panels, _x_titles(panels, x_title), strict=True):
        unit = next(m.unit for m in measures if m.key == shown[0])
        charts.append(
            line_panel(
                frame,
                "time",
                "value",
                "group",
                colors,
                tooltip,
                title,
                unit,
                x_title=title_x,
                legend_title=by,
                dash="line" if len(shown) > 1 else None,
            ).transform_filter(alt.datum.panel == title)
        )
    return stacked(charts)


def daily_figure(daily: pd.DataFrame, floor: float | None) -> alt.LayerChart:
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
    tooltip = [
        alt.Tooltip("day_text:N", title="day"),
        alt.Tooltip("service:N", title="service"),
        alt.Tooltip("mean_text:N", title="mean faithfulness"),
        alt.Tooltip("n:N", title="n"),
    ]
    lines = line_panel(
        frame,
        "day",
        "mean",
        "service",
        series_colors(frame["service"]),
        tooltip,
        None,
        "faithfulness (mean of the day)",
        y_scale=alt.Scale(zero=False),
        x_title="day",
        legend_title="service",
    )
    layers = [lines] if floor is None else [lines, floor_rule(floor, f"floor {fmt_score(floor)}")]
    return alt.layer(*layers).properties(height=300)


KEPT_SPECS = 16
FIGURES = {"metrics": metrics_figure, "costs": costs_figure, "daily": daily_figure}


@st.cache_data(max_entries=KEPT_SPECS, show_spinner=False)
def figure_spec(figure: str, *args) -> dict:
    """A FIGURES chart's Vega-Lite spec, kept by its inputs: Altair validates a chart against the schema each time
    it is converted (~0.1 s of a Trends visit on two cores), so a rerun over the same data sends the kept spec."""
    return FIGURES[figure](*args).to_dict()


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
