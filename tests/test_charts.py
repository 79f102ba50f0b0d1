"""The charts hold the figures they are given: Detector's Vega-Lite charts (pages/views/charts.py), and the plotly
figures of Calibration, Trends and the sweep's front (pages/views/plotly_charts.py), whose hover text is escaped."""

from __future__ import annotations

import json

import pandas as pd

from pages.views import charts, plotly_charts


def rows(chart) -> list[dict]:
    spec = chart.to_dict()
    (data,) = spec["datasets"].values()
    return data


def test_a_heatmap_puts_each_count_in_its_row_and_column():
    chart = charts.heatmap([[1, 0], [2, 3]], ["no", "yes"], ["faithful", "hallucinated"], "flagged", "label", "T")
    cells = {(r["row"], r["column"]): r["count"] for r in rows(chart)}
    assert cells == {
        ("faithful", "no"): 1,
        ("faithful", "yes"): 0,
        ("hallucinated", "no"): 2,
        ("hallucinated", "yes"): 3,
    }
    rect = chart.to_dict()["layer"][0]["encoding"]
    assert rect["x"]["sort"] == ["no", "yes"] and rect["y"]["sort"] == ["faithful", "hallucinated"]
    assert rect["color"]["scale"]["domain"] == [0, 3]


def test_lines_draw_one_series_per_measure_over_the_threshold():
    sweep = pd.DataFrame({"threshold": [0.5, 0.9], "precision": [0.8, 0.6], "recall": [0.4, 0.9]})
    chart = charts.lines(sweep, "threshold", ["precision", "recall"], "T")
    points = {(r["measure"], r["threshold"]): r["value"] for r in rows(chart)}
    assert points == {("precision", 0.5): 0.8, ("precision", 0.9): 0.6, ("recall", 0.5): 0.4, ("recall", 0.9): 0.9}


def test_bars_keep_their_values():
    point = pd.DataFrame({"measure": ["precision", "recall"], "value": [1.0, 0.5]})
    assert [r["value"] for r in rows(charts.bars(point, "measure", "value", "T"))] == [1.0, 0.5]


def chart_data(element) -> tuple[dict, list[pd.DataFrame]]:
    """A page's Vega-Lite chart as AppTest holds it (at.get("vega_lite_chart")[i]): its spec, and its datasets
    (Arrow, as Streamlit sends them) as frames."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    spec = json.loads(element.proto.spec)
    return spec, [convert_arrow_bytes_to_pandas_df(d.data.data) for d in element.proto.datasets]


def frame_with(element, column: str) -> pd.DataFrame:
    """The chart's points with this column: a plotly chart's traces that carry it in their hover, or a Vega-Lite
    chart's one dataset with it (the lines' points, not a floor's)."""
    if not hasattr(element.proto, "datasets"):
        return plotly_points(element, column)
    (frame,) = [f for f in chart_data(element)[1] if column in f.columns]
    return frame


def plotly_spec(element) -> dict:
    """A page's plotly chart as AppTest holds it (at.get("plotly_chart")[i]): the figure's JSON (data, layout)."""
    return json.loads(element.proto.spec)


def trace_points(trace: dict, panels: list[str]) -> pd.DataFrame:
    """A trace's points as a table: its x and y under the names its meta gives them, each hover column, the
    trace's name, its line's dash and its panel (by title, when the figure has panels)."""
    meta = trace["meta"]
    frame = pd.DataFrame({meta["x"]: trace["x"], meta["y"]: trace["y"]})
    for i, column in enumerate(meta["columns"]):
        frame[column] = [row[i] for row in trace["customdata"]]
    axis = trace.get("yaxis", "y")
    frame["trace"] = trace.get("name")
    frame["dash"] = trace.get("line", {}).get("dash")
    frame["panel"] = panels[int(axis[1:] or 1) - 1] if panels else None
    return frame


def plotly_points(element_or_spec, column: str | None = None) -> pd.DataFrame:
    """Every trace's points (of the traces with this hover column), one table."""
    spec = element_or_spec if isinstance(element_or_spec, dict) else plotly_spec(element_or_spec)
    titles = plotly_panels(spec)
    frames = [trace_points(t, titles) for t in spec["data"] if column is None or column in t["meta"]["columns"]]
    return pd.concat(frames, ignore_index=True)


def plotly_panels(spec: dict) -> list[str]:
    """The titles of a plotly figure's panels, top to bottom (the subplot titles: annotations placed on the paper)."""
    return [a["text"] for a in spec["layout"].get("annotations", []) if a.get("yref") == "paper"]


def plotly_floors(spec: dict) -> list[tuple[float, str]]:
    """The floors drawn across panels: (value, label) of each horizontal line and its annotation."""
    lines = [s["y0"] for s in spec["layout"].get("shapes", [])]
    labels = [a["text"] for a in spec["layout"].get("annotations", []) if a.get("yref") != "paper"]
    return list(zip(lines, labels, strict=True))


def panel_titles(spec: dict) -> list[str]:
    """The titles of a chart's panels, top to bottom."""
    return [p.get("title") or p["layer"][0].get("title") for p in spec["vconcat"]]


# plotly: what each figure plots, read back from its JSON as the browser gets it


def figure_json(figure) -> dict:
    return json.loads(figure.to_json())


UNTRUSTED = "<b>bold</b> & <a href='javascript:alert(1)'>x</a>"
ESCAPED = "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;a href='javascript:alert(1)'&gt;x&lt;/a&gt;"


def test_a_plotly_heatmap_puts_each_count_in_its_row_and_column_first_row_on_top():
    spec = figure_json(
        plotly_charts.heatmap([[1, 0], [2, 3]], ["no", "yes"], ["faithful", "hallucinated"], "flagged", "label", "T")
    )
    (cells,) = spec["data"]
    assert cells["type"] == "heatmap" and cells["x"] == ["no", "yes"] and cells["y"] == ["faithful", "hallucinated"]
    assert cells["z"] == [[1, 0], [2, 3]] and cells["text"] == [[1, 0], [2, 3]]  # the count written in each cell
    assert (cells["zmin"], cells["zmax"]) == (0, 3)
    assert spec["layout"]["yaxis"]["autorange"] == "reversed"  # rows[0] on top, as the table reads


def test_plotly_grouped_bars_keep_their_values_and_hover_text():
    frame = pd.DataFrame(
        {"score": ["1", "1"], "share": [0.25, 0.5], "share_text": ["25%", "50%"], "rater": ["judge", "people"]}
    )
    spec = figure_json(plotly_charts.grouped_bars(frame, "score", "share", "rater", "T", "share_text"))
    bars = plotly_points(spec)
    assert bars[["rater", "share", "share_text"]].values.tolist() == [["judge", 0.25, "25%"], ["people", 0.5, "50%"]]
    assert spec["layout"]["barmode"] == "group"


def test_plotly_hover_text_and_names_are_escaped_not_rendered_as_html():
    frame = pd.DataFrame(
        {
            "latency_ms": [100.0, 300.0, 200.0],
            "quality": [0.5, 0.9, 0.4],
            "front": [True, True, False],
            "combination": [UNTRUSTED, "b", "c"],
            "quality_text": ["0.50", "0.90", "0.40"],
        }
    )
    fields = [("combination", "combination"), ("quality_text", "quality <i>mean</i>")]
    spec = figure_json(
        plotly_charts.pareto_scatter(frame, "latency_ms", "quality", "front", "combination", "T", fields, "x", "y")
    )
    dominated, front = spec["data"]
    assert front["text"] == [ESCAPED, "b"]  # the front's labels, fastest first
    assert front["customdata"][0] == [ESCAPED, "0.50"]
    assert "<i>" not in front["hovertemplate"] and "quality &lt;i&gt;mean&lt;/i&gt;" in front["hovertemplate"]
    assert (front["x"], front["y"]) == ([100.0, 300.0], [0.5, 0.9])
    assert (dominated["x"], dominated["y"]) == ([200.0], [0.4])
    assert plotly_charts.CONFIG == {"displaylogo": False, "displayModeBar": False}


def test_plotly_panels_share_a_24_hour_time_axis_and_each_series_keeps_its_colour():
    frame = pd.DataFrame(
        {"t": pd.to_datetime(["2026-03-01 14:05", "2026-03-02 09:00"]), "v": [0.5, 4.0], "s": [UNTRUSTED, "a"]}
    )
    figure = plotly_charts.panels(["score", "judge"], "series", "run time")
    colors = plotly_charts.series_colors(frame["s"])
    shown: set[str] = set()
    plotly_charts.add_lines(figure, 1, frame, "t", "v", "s", colors, [("s", "series")], shown)
    plotly_charts.add_lines(figure, 2, frame, "t", "v", "s", colors, [("s", "series")], shown)
    plotly_charts.add_floor(figure, 2, 0.7, "floor 0.70")
    spec = figure_json(figure)
    assert plotly_panels(spec) == ["score", "judge"] and plotly_floors(spec) == [(0.7, "floor 0.70")]
    assert spec["layout"]["xaxis"]["tickformat"] == spec["layout"]["xaxis2"]["tickformat"] == "%Y-%m-%d %H:%M"
    points = plotly_points(spec)
    assert points[["panel", "trace", "v"]].values.tolist() == [
        ["score", ESCAPED, 0.5],
        ["score", "a", 4.0],
        ["judge", ESCAPED, 0.5],
        ["judge", "a", 4.0],
    ]
    assert list(points["t"]) == ["2026-03-01T14:05:00", "2026-03-02T09:00:00"] * 2
    lines = spec["data"]
    assert lines[0]["line"]["color"] == lines[2]["line"]["color"] != lines[1]["line"]["color"]
    assert [t["showlegend"] for t in lines] == [True, True, False, False]  # a series in the legend once
