"""The app's plotly figures (Calibration's heatmaps and base rates, Trends' panels over time, the sweep's Pareto
front, a run's calls over time), built on one layout: times on 24-hour axes (pipeline.formatting's d3 pattern),
the app's palette, no plotly logo or mode bar (CONFIG, for st.plotly_chart).

plotly renders a subset of HTML in hover labels, trace names and text (<b>, <a href>, <br>): every piece of text
that may come from a model, a document or a user (run, series, service, combination names, figures written by
pages.views.markup) goes through `safe`, so it reads as text. Each trace keeps the names of what it plots in its
`meta` ({"x": ..., "y": ..., "columns": [the hover's customdata columns]}), so its points can be read back as a
table."""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipeline.formatting import D3_TIME_FORMAT

# Plotly's qualitative palette: one colour per series, the same in every panel
PALETTE = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52"]
FLOOR_COLOR = "red"
HEIGHT = 300
PANEL_HEIGHT = 200
CONFIG = {"displaylogo": False, "displayModeBar": False}  # st.plotly_chart(..., config=CONFIG)
Hover = Sequence[tuple[str, str]]  # (column of the frame, title shown in the hover)


def draw(figure: go.Figure, key: str, where=None) -> None:
    """Show a figure at the container's width, with the shared CONFIG (`where`: a column; the page by default)."""
    import streamlit as st

    (where or st).plotly_chart(figure, width="stretch", config=CONFIG, key=key)


def safe(text) -> str:
    """Text as plotly shows it literally: its pseudo-HTML tags escaped (plotly decodes &amp; &lt; &gt;)."""
    return html.escape(str(text), quote=False)


def series_colors(names) -> dict[str, str]:
    """One colour per series name (sorted), the same in every panel and chart given the same names."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted({str(n) for n in names}))}


def hover(frame: pd.DataFrame, fields: Hover, x: str, y: str) -> dict:
    """A trace's hover over `fields` of the frame (text written as the other pages write it, escaped), and the
    meta that names its points' columns."""
    columns = [column for column, _ in fields]
    lines = [f"{safe(title)}: %{{customdata[{i}]}}" for i, (_, title) in enumerate(fields)]
    return {
        "customdata": [[safe(v) for v in row] for row in frame[columns].itertuples(index=False)],
        "hovertemplate": "<br>".join(lines) + "<extra></extra>",
        "meta": {"x": x, "y": y, "columns": columns},
    }


# Fixed margins (pixels): plotly would otherwise widen its margins to fit labels and legends by drawing the figure
# again, a second draw of every chart on every page load (about a third of their drawing time, measured in Chromium)
MARGIN = {"l": 70, "r": 20, "b": 55, "autoexpand": False}
TITLE_SPACE, LEGEND_ROW = 40, 24


def styled(figure: go.Figure, title: str | None, height: int, legend: bool = False) -> go.Figure:
    """The shared layout: the title at the top left, the legend (when `legend`) in a row above the plot, fixed
    margins, left-aligned hovers."""
    top = (TITLE_SPACE if title else 15) + (LEGEND_ROW if legend else 0)
    figure.update_layout(
        title={"text": safe(title), "x": 0, "xref": "container", "xanchor": "left", "pad": {"l": 10}}
        if title
        else None,
        height=height + top,
        margin=MARGIN | {"t": top},
        showlegend=legend,
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
        hoverlabel={"align": "left"},
    )
    return figure


def time_axes(figure: go.Figure) -> None:
    """Every x axis a time axis in 24-hour time (ticks and hover)."""
    figure.update_xaxes(type="date", tickformat=D3_TIME_FORMAT, hoverformat=D3_TIME_FORMAT)


def iso(times) -> list[str]:
    return [pd.Timestamp(t).isoformat() for t in times]


def numbers(values) -> list:
    """Plain floats (None for a gap): lists are sent as JSON numbers, arrays as base64 typed arrays."""
    return [None if v is None or pd.isna(v) else float(v) for v in values]


def heatmap(matrix, columns: list[str], rows: list[str], x_title: str, y_title: str, title: str) -> go.Figure:
    """Counts in a grid: `matrix[i][j]` is the cell of rows[i] and columns[j], its count written in it, rows[0]
    on top."""
    counts = [[int(matrix[i][j]) for j in range(len(columns))] for i in range(len(rows))]
    top = max((max(row) for row in counts), default=0) or 1
    cells = go.Heatmap(
        z=counts,
        x=[safe(c) for c in columns],
        y=[safe(r) for r in rows],
        text=counts,
        texttemplate="%{text}",
        colorscale="Blues",
        zmin=0,
        zmax=top,
        showscale=False,  # each cell writes its count
        hovertemplate=f"{safe(y_title)}: %{{y}}<br>{safe(x_title)}: %{{x}}<br>count: %{{z}}<extra></extra>",
        meta={"x": x_title, "y": y_title, "columns": []},
    )
    figure = styled(go.Figure(cells), title, HEIGHT)
    figure.update_xaxes(title_text=safe(x_title), type="category")
    figure.update_yaxes(title_text=safe(y_title), type="category", autorange="reversed")
    return figure


def grouped_bars(frame: pd.DataFrame, x: str, y: str, group: str, title: str, y_text: str) -> go.Figure:
    """One bar per x and group, side by side; the hover shows the frame's `y_text` column."""
    figure = go.Figure()
    colors = series_colors(frame[group])
    for name, rows in frame.groupby(group, sort=True):
        figure.add_bar(
            x=[safe(v) for v in rows[x]],
            y=numbers(rows[y]),
            name=safe(name),
            marker_color=colors[str(name)],
            **hover(rows, [(x, x), (group, group), (y_text, y)], x, y),
        )
    styled(figure, title, HEIGHT, legend=True)
    figure.update_layout(barmode="group")
    figure.update_xaxes(title_text=safe(x), type="category")
    figure.update_yaxes(title_text=safe(y))
    return figure


def panels(titles: list[str], legend_title: str | None, x_title: str) -> go.Figure:
    """Panels one above the other sharing the time axis (titled under the last), each y on its own scale, each
    titled above; the legend at the figure's foot, a row per series (add_lines makes room for each)."""
    figure = make_subplots(
        rows=len(titles),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.12, 0.5 / len(titles)),
        subplot_titles=[safe(t) for t in titles],
    )
    bottom = MARGIN["b"] + LEGEND_ROW * (legend_title is not None)
    figure.update_layout(
        height=PANEL_HEIGHT * len(titles) + 30 + bottom,
        margin=MARGIN | {"t": 30, "b": bottom},
        legend={
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "title": {"text": safe(legend_title) if legend_title else "", "side": "top"},
        },
        hoverlabel={"align": "left"},
    )
    time_axes(figure)
    figure.update_xaxes(title_text=safe(x_title), row=len(titles), col=1)
    return figure


def add_lines(
    figure: go.Figure,
    row: int,
    frame: pd.DataFrame,
    x: str,
    y: str,
    series: str,
    colors: dict[str, str],
    fields: Hover,
    shown_in_legend: set[str],
    dash: str = "solid",
) -> None:
    """A line with points of `y` over the time `x` per `series` in its colour, in panel `row`; a series is in the
    legend once (its first line), and clicking it hides its lines in every panel."""
    for name, points in frame.groupby(series, sort=True):
        key = str(name)
        figure.add_scatter(
            x=iso(points[x]),
            y=numbers(points[y]),
            mode="lines+markers",
            name=safe(key),
            legendgroup=safe(key),
            showlegend=key not in shown_in_legend,
            line={"color": colors[key], "dash": dash},
            row=row,
            col=1,
            **hover(points, fields, x, y),
        )
        if key not in shown_in_legend:  # a row of the legend at the foot: the figure grows by it
            figure.layout.height += LEGEND_ROW
            figure.layout.margin.b += LEGEND_ROW
        shown_in_legend.add(key)


def add_floor(figure: go.Figure, row: int, value: float, text: str) -> None:
    """A red dashed line across panel `row` at `value`, labelled `text`."""
    figure.add_hline(
        y=value,
        line={"color": FLOOR_COLOR, "dash": "dash", "width": 1.5},
        annotation={"text": safe(text), "font": {"color": FLOOR_COLOR}},
        annotation_position="top left",
        row=row,
        col=1,
    )


def add_star(figure: go.Figure, row: int, frame: pd.DataFrame, x: str, y: str, fields: Hover) -> None:
    """A gold star at each of the frame's points (a pinned baseline), in panel `row`."""
    figure.add_scatter(
        x=iso(frame[x]),
        y=numbers(frame[y]),
        mode="markers",
        name="pinned baseline",
        showlegend=False,
        marker={"symbol": "star", "size": 18, "color": "gold", "line": {"color": "black", "width": 1}},
        row=row,
        col=1,
        **hover(frame, fields, x, y),
    )


PARETO_FRONT, DOMINATED = "on the Pareto front", "not on the front"


def pareto_scatter(
    frame: pd.DataFrame,
    x: str,
    y: str,
    front: str,
    label: str,
    title: str,
    fields: Hover,
    x_title: str,
    y_title: str,
) -> go.Figure:
    """One point per row at (`x`, `y`); the rows on the Pareto front (the boolean column `front`) in a colour of their
    own, joined by a dashed line in order of `x` and labelled with their `label` column. The hover shows `fields`
    (columns of the frame holding the text the tables write) for every point."""
    figure = go.Figure()
    dominated = frame[~frame[front]]
    on_front = frame[frame[front]].sort_values(x)
    figure.add_scatter(
        x=numbers(dominated[x]),
        y=numbers(dominated[y]),
        mode="markers",
        name=DOMINATED,
        marker={"color": PALETTE[0], "size": 11},
        **hover(dominated, fields, x, y),
    )
    figure.add_scatter(
        x=numbers(on_front[x]),
        y=numbers(on_front[y]),
        mode="lines+markers+text",
        name=PARETO_FRONT,
        text=[safe(v) for v in on_front[label]],
        textposition="top right",
        marker={"color": PALETTE[1], "size": 11},
        line={"color": PALETTE[1], "dash": "dash"},
        **hover(on_front, fields, x, y),
    )
    styled(figure, title, HEIGHT + 60, legend=True)
    figure.update_xaxes(title_text=safe(x_title), tickformat=",.0f")
    figure.update_yaxes(title_text=safe(y_title), tickformat=".2f")
    return figure


def timeline(
    frame: pd.DataFrame, start: str, end: str, row: str, color: str, rows: list[str], fields: Hover, title: str
) -> go.Figure:
    """One bar per frame row from its `start` to its `end` (times), on the line of its `row` value (`rows`: their
    order, the first at the top), one colour per `color` value; zoomable along the time axis."""
    figure = go.Figure()
    colors = series_colors(frame[color])
    for name, part in frame.groupby(color, sort=True):
        figure.add_bar(
            y=[safe(v) for v in part[row]],
            x=[(b - a).total_seconds() * 1000 for a, b in zip(part[start], part[end], strict=True)],
            base=iso(part[start]),
            orientation="h",
            name=safe(name),
            marker_color=colors[str(name)],
            **hover(part, fields, start, row),
        )
    styled(figure, title, max(60, 28 * len(rows)), legend=True)
    time_axes(figure)
    figure.update_yaxes(
        type="category", categoryorder="array", categoryarray=[safe(r) for r in rows][::-1], fixedrange=True
    )
    figure.update_layout(margin_l=160)  # the stage names, beside the bars
    return figure


def prepare() -> None:
    """Build one figure of each kind and throw it away: plotly imports the classes of a trace or layout part the
    first time one is made (~0.6 s of the first chart on two cores), so a server calls this before its first page."""
    frame = pd.DataFrame({"t": pd.to_datetime(["2026-01-01"]), "v": [1.0], "s": ["a"], "f": [True]})
    heatmap([[1]], ["a"], ["a"], "x", "y", "t")
    grouped_bars(frame, "s", "v", "s", "t", "s")
    figure = panels(["a", "b"], "s", "t")
    add_lines(figure, 1, frame, "t", "v", "s", series_colors(["a"]), [("s", "s")], set())
    add_star(figure, 2, frame, "t", "v", [("s", "s")])
    add_floor(figure, 2, 0.5, "floor")
    pareto_scatter(frame, "v", "v", "f", "s", "t", [("s", "s")], "x", "y").to_dict()
    timeline(frame.assign(e=frame["t"]), "t", "e", "s", "s", ["a"], [("s", "s")], "t").to_dict()
