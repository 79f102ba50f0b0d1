"""Small Vega-Lite charts (Altair) for pages that must open fast: a new browser tab loads Plotly's scripts (4.7 MB)
the first time it shows a Plotly chart, ~0.9 s on 2 cores, against ~0.1 s for Vega-Lite's (bench page_speed's
floor figures). No page draws with Plotly: the trace's waterfall and the calls' timeline are Vega-Lite too."""

from __future__ import annotations

import altair as alt
import pandas as pd

from pipeline.formatting import D3_TIME_FORMAT

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


def grouped_bars(frame: pd.DataFrame, x: str, y: str, group: str, title: str, y_format: str = ".2f") -> alt.Chart:
    """One bar per x and group, side by side, the value in the tooltip."""
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", title=x, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset(f"{group}:N"),
            y=alt.Y(f"{y}:Q", title=y),
            color=alt.Color(f"{group}:N", title=group),
            tooltip=[f"{x}:N", f"{group}:N", alt.Tooltip(f"{y}:Q", format=y_format)],
        )
        .properties(height=HEIGHT)
    )


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


# Panels over time (Trends): one colour per series in every panel, each panel's y on its own scale, x shared.
# Plotly's qualitative palette, the colours Trends drew in before
PALETTE = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52"]
# a five-pointed star (Vega's symbols have none) as an SVG path in the unit square
STAR = (
    "M0,-1L0.235,-0.324L0.951,-0.309L0.38,0.124L0.588,0.809L0,0.4L-0.588,0.809L-0.38,0.124L-0.951,-0.309L-0.235,-0.324Z"
)
PANEL_HEIGHT = 200
SOLID, DASHED = [1, 0], [6, 4]


def series_colors(names) -> alt.Scale:
    """One colour per series name (sorted), the same in every panel and chart given the same names."""
    domain = sorted({str(n) for n in names})
    return alt.Scale(domain=domain, range=[PALETTE[i % len(PALETTE)] for i in range(len(domain))])


def line_panel(
    frame: pd.DataFrame,
    x: str,
    y: str,
    series: str,
    colors: alt.Scale,
    tooltip: list,
    title: str | None,
    y_title: str,
    y_scale: alt.Scale | None = None,
    x_title: str | None = None,
    legend_title: str | None = None,
    dash: str | None = None,
) -> alt.Chart:
    """Lines with points of `y` over the time `x`, one per `series` in its colour (`colors`); with `dash`, a line
    per value of that column too, its first value solid and the others dashed. The hover shows `tooltip`: put the
    text the other pages write in columns of the frame and name them here, never the raw number."""
    encoding = {
        # 24-hour, as the tables (Vega-Lite's default time axis is on a 12-hour clock)
        "x": alt.X(f"{x}:T", title=x_title, axis=alt.Axis(title=x_title, labels=True, format=D3_TIME_FORMAT)),
        "y": alt.Y(f"{y}:Q", title=y_title, scale=y_scale or alt.Scale(zero=True)),
        "color": alt.Color(
            f"{series}:N",
            scale=colors,
            legend=alt.Legend(title=legend_title, orient="top", direction="vertical", labelLimit=0, titleLimit=0),
        ),
        "tooltip": tooltip,
    }
    if dash is not None:
        kinds = list(dict.fromkeys(frame[dash]))
        encoding["strokeDash"] = alt.StrokeDash(
            f"{dash}:N", scale=alt.Scale(domain=kinds, range=[SOLID] + [DASHED] * (len(kinds) - 1)), legend=None
        )
    chart = alt.Chart(frame) if title is None else alt.Chart(frame, title=title)
    return chart.mark_line(point=True).encode(**encoding).properties(height=PANEL_HEIGHT)


def floor_rule(value: float, text: str) -> alt.Chart:
    """A red dashed line across a panel at `value`, labelled `text`; layer it over the panel's lines."""
    floor = pd.DataFrame({"floor": [value], "floor_text": [text]})
    base = alt.Chart(floor).encode(y=alt.Y("floor:Q"))
    return base.mark_rule(color="red", strokeDash=DASHED) + base.mark_text(
        color="red", align="left", dx=4, dy=-7
    ).encode(x=alt.value(0), text="floor_text:N")


def stacked(panels: list) -> alt.VConcatChart:
    """Panels one above the other, sharing the x (time) axis and the series' colours, each y on its own scale.
    Sized to fit the width (axes and legend included): Streamlit gives each panel the container's width, and a
    layered panel (lines with a floor) would otherwise overflow it by its axis."""
    return (
        alt.vconcat(*panels)
        .resolve_scale(x="shared", y="independent", color="shared", strokeDash="independent")
        .properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    )


PARETO_FRONT, DOMINATED = "on the Pareto front", "not on the front"


def pareto_scatter(
    frame: pd.DataFrame,
    x: str,
    y: str,
    front: str,
    label: str,
    title: str,
    tooltip: list,
    x_title: str | None = None,
    y_title: str | None = None,
) -> alt.LayerChart:
    """One point per row at (`x`, `y`); the rows on the Pareto front (the boolean column `front`) in a colour of their
    own, joined by a dashed line in order of `x` and labelled with their `label` column. The hover shows `tooltip`
    (columns of the frame holding the text the tables write) for every point."""
    encoding = {
        "x": alt.X(f"{x}:Q", title=x_title or x, scale=alt.Scale(zero=False, nice=True), axis=alt.Axis(format=",.0f")),
        "y": alt.Y(f"{y}:Q", title=y_title or y, scale=alt.Scale(zero=False, nice=True), axis=alt.Axis(format=".2f")),
    }
    base = alt.Chart(frame, title=title).encode(**encoding)
    kinds = [PARETO_FRONT, DOMINATED]
    points = (
        base.transform_calculate(kind=f"datum[{front!r}] ? {PARETO_FRONT!r} : {DOMINATED!r}")
        .mark_point(size=90, filled=True)
        .encode(
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=[PALETTE[1], PALETTE[0]]),
                legend=alt.Legend(title=None, orient="top"),
            ),
            tooltip=tooltip,
        )
    )
    line = base.transform_filter(alt.datum[front]).mark_line(color=PALETTE[1], strokeDash=DASHED).encode(order=f"{x}:Q")
    labels = (
        base.transform_filter(alt.datum[front])
        .mark_text(align="left", dx=7, dy=-7, fontSize=11)
        .encode(text=f"{label}:N")
    )
    return (line + points + labels).properties(height=HEIGHT)
