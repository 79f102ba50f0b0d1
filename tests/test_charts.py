"""The Vega-Lite charts of Calibration and Detector (pages/views/charts.py) hold the figures they are given."""

from __future__ import annotations

import json

import pandas as pd

from pages.views import charts


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


def test_grouped_bars_and_bars_keep_their_values():
    frame = pd.DataFrame({"score": ["1", "1"], "share": [0.25, 0.5], "rater": ["judge", "people"]})
    assert [(r["rater"], r["share"]) for r in rows(charts.grouped_bars(frame, "score", "share", "rater", "T"))] == [
        ("judge", 0.25),
        ("people", 0.5),
    ]
    point = pd.DataFrame({"measure": ["precision", "recall"], "value": [1.0, 0.5]})
    assert [r["value"] for r in rows(charts.bars(point, "measure", "value", "T"))] == [1.0, 0.5]


def chart_data(element) -> tuple[dict, list[pd.DataFrame]]:
    """A page's Vega-Lite chart as AppTest holds it (at.get("vega_lite_chart")[i]): its spec, and its datasets
    (Arrow, as Streamlit sends them) as frames."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    spec = json.loads(element.proto.spec)
    return spec, [convert_arrow_bytes_to_pandas_df(d.data.data) for d in element.proto.datasets]


def frame_with(element, column: str) -> pd.DataFrame:
    """The chart's one dataset with this column (the lines' points, not a floor's)."""
    (frame,) = [f for f in chart_data(element)[1] if column in f.columns]
    return frame


def panel_titles(spec: dict) -> list[str]:
    """The titles of a chart's panels, top to bottom."""
    return [p.get("title") or p["layer"][0].get("title") for p in spec["vconcat"]]


def test_stacked_panels_share_the_time_axis_and_colours_and_keep_their_own_y_scales():
    frame = pd.DataFrame(
        {
            "t": pd.to_datetime(["2026-03-01", "2026-03-02"]),
            "v": [0.5, 4.0],
            "s": ["b", "a"],
            "v_text": ["0.50", "4.00"],
        }
    )
    colors = charts.series_colors(["b", "a", "b"])
    assert colors.to_dict() == {"domain": ["a", "b"], "range": charts.PALETTE[:2]}  # one colour per name
    one = charts.line_panel(frame, "t", "v", "s", colors, ["v_text:N"], "score", "score")
    floor = charts.floor_rule(0.7, "floor 0.70")
    spec = charts.stacked([one, one + floor]).to_dict()
    assert spec["resolve"]["scale"]["x"] == "shared" and spec["resolve"]["scale"]["y"] == "independent"
    assert spec["resolve"]["scale"]["color"] == "shared"
    top, bottom = spec["vconcat"][0], spec["vconcat"][1]["layer"][0]
    assert top["encoding"]["color"]["scale"] == bottom["encoding"]["color"]["scale"] == colors.to_dict()
    assert [t["field"] for t in top["encoding"]["tooltip"]] == ["v_text"]  # the hover shows the text given
    assert top["encoding"]["x"]["axis"]["format"] == "%Y-%m-%d %H:%M"  # 24-hour, as the tables
    datasets = list(spec["datasets"].values())
    assert [(r["s"], r["v"]) for r in next(d for d in datasets if "s" in d[0])] == [("b", 0.5), ("a", 4.0)]
    assert next(d for d in datasets if "floor" in d[0]) == [{"floor": 0.7, "floor_text": "floor 0.70"}]
