"""The Vega-Lite charts of Calibration and Detector (pages/views/charts.py) hold the figures they are given."""

from __future__ import annotations

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
