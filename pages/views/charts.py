"""Small Vega-Lite charts (Altair) of the Detector page, and the bar ends the drilldown's time charts share.
Calibration, Trends and the sweep's front draw with plotly (pages.views.plotly_charts)."""

from __future__ import annotations

import altair as alt
import pandas as pd

HEIGHT = 300
MIN_BAR_SHARE = 0.003  # of a time axis: the shortest bar drawn


def visible_ends(starts: pd.Series, ends: pd.Series) -> pd.Series:
    """Bars' ends, each at least MIN_BAR_SHARE of the axis after its start, so that a span or a call of no
    measurable duration is still seen (numbers or times alike)."""
    least = (ends.max() - starts.min()) * MIN_BAR_SHARE
    return ends.where(ends >= starts + least, starts + least)


def heatmap(matrix, columns: list[str], rows: list[str], x_title: str, y_title: str, title: str) -> alt.Chart:
    """Counts in a grid: `matrix[i][j]` is the cell of rows[i] and columns[j], its count written in it."""
    cells = pd.DataFrame(
        [{"row": r, "column": c, "count": int(matrix[i][j])} for i, r in enumerate(rows) for j, c in enumerate(columns)]
    )
    base = alt.Chart(cells, title=title).encode(
        x=alt.X("column:N", sort=columns, title=x_title, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("row:N", sort=rows, title=y_title),
    )
    top = max(int(cells["count"].max()), 1)
    rects = base.mark_rect().encode(
        color=alt.Color("count:Q", scale=alt.Scale(scheme="blues", domain=[0, top]), title="count"),
        tooltip=[alt.Tooltip("row:N", title=y_title), alt.Tooltip("column:N", title=x_title), "count:Q"],
    )
    labels = base.mark_text().encode(
        text="count:Q",
        color=alt.condition(alt.datum.count > top / 2, alt.value("white"), alt.value("black")),
    )
    return (rects + labels).properties(height=HEIGHT)


def lines(frame: pd.DataFrame, x: str, series: list[str], title: str, y_title: str = "value") -> alt.Chart:
    """One line with points per column in `series`, over x; values in [0, 1]."""
    long = frame.melt(id_vars=[x], value_vars=series, var_name="measure", value_name=y_title)
    return (
        alt.Chart(long, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{x}:Q", title=x),
            y=alt.Y(f"{y_title}:Q", title=y_title, scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("measure:N", sort=series, title="measure"),
            tooltip=[alt.Tooltip(f"{x}:Q", format=".2f"), "measure:N", alt.Tooltip(f"{y_title}:Q", format=".2f")],
        )
        .properties(height=HEIGHT)
    )


def bars(frame: pd.DataFrame, x: str, y: str, title: str) -> alt.Chart:
    """One bar per x, its value (in [0, 1]) written above it."""
    base = alt.Chart(frame, title=title).encode(
        x=alt.X(f"{x}:N", sort=list(frame[x]), title=x, axis=alt.Axis(labelAngle=0)),
        y=alt.Y(f"{y}:Q", title=y, scale=alt.Scale(domain=[0, 1])),
        tooltip=[f"{x}:N", alt.Tooltip(f"{y}:Q", format=".2f")],
    )
    return (base.mark_bar() + base.mark_text(dy=-8).encode(text=alt.Text(f"{y}:Q", format=".2f"))).properties(
        height=HEIGHT
    )
