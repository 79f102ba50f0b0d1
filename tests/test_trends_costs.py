"""Trends with several metrics (issue 29): latency, tokens and cost per question over evaluation runs and traced
days (pipeline.regression.trends, counted as the Runs page counts a run's), and the page drawing several metrics at
once, each on its own scale, with the hover's numbers written as the other pages write them (read from the
plotly figures' JSON)."""

from __future__ import annotations

from datetime import date, datetime, time

import pandas as pd
import pytest
from test_app import app, fresh_streamlit_caches  # noqa: F401 - the fixture
from test_charts import plotly_panels, plotly_points, plotly_spec

from pages.views.markup import fmt_score
from pages.views.trends import LATENCY
from pipeline.config import load_settings
from pipeline.formatting import D3_TIME_FORMAT
from pipeline.regression.trends import daily_costs, run_costs
from store.evals import create_eval_run, mark_eval_run
from store.records import LLMCallRecord, RunLog, RunRecord
from store.runs import save_run

WHEN = datetime(2026, 3, 2, 9, 0)


def call(prompt: int, completion: int, cache_hit: bool = False) -> LLMCallRecord:
    return LLMCallRecord(
        stage="generate",
        model="llama3.2",
        digest="d",
        prompt_hash="h",
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_ms=5.0,
        cache_hit=cache_hit,
        error=None,
        started_at=WHEN,
    )


def question(db, latency_ms, calls, kind="eval", pipeline=None, started_at=WHEN) -> int:
    run = RunRecord(
        kind=kind,
        question="q",
        status="accepted",
        started_at=started_at,
        answer="a",
        latency_ms=latency_ms,
        pipeline=pipeline,
        n_calls=len(calls),
        n_replayed=sum(c.cache_hit for c in calls),
        trace_id=f"t{latency_ms}-{started_at}" if kind == "traced" else None,
    )
    return save_run(db, RunLog(run, calls=calls))


def evaluation(db, name, questions, scores, dataset="golden.jsonl", status="finished") -> int:
    """An evaluation run over real runs (question(): latency and calls), scored per metric item by item."""
    run_ids = [question(db, ms, calls) for ms, calls in questions]
    eval_id = create_eval_run(db, name, dataset, "h", {"top_k": 5}, "llama3.2", "d1", "judge-v1", len(run_ids), 1)
    with db.cursor() as cur:
        for k, run_id in enumerate(run_ids):
            cur.execute(
                "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question) VALUES (?, ?, ?, 'done', 'q')",
                [eval_id, f"i{k}", run_id],
            )
            for metric, values in scores.items():
                cur.execute(
                    "INSERT INTO scores (eval_run_id, item_id, run_id, metric, value, status) "
                    "VALUES (?, ?, ?, ?, ?, 'ok')",
                    [eval_id, f"i{k}", run_id, metric, values[k]],
                )
    mark_eval_run(db, eval_id, status)
    return eval_id


# "mon": latencies 100, 200, 600 ms; tokens 10+5 and a replayed 20+5 (40), 30+10 (40), 50+30 (80): 53.3 a question;
# at 1 per 1000 prompt and 2 per 1000 completion tokens, cost 0.050 (the replayed call at its original cost, 0.030),
# 0.050, 0.110: 0.070; one of its four calls replayed (25%).
MON = [(100.0, [call(10, 5), call(20, 5, cache_hit=True)]), (200.0, [call(30, 10)]), (600.0, [call(50, 30)])]
# "tue": 1000, 3000 and 2000 ms; one question with a call of 100+50 tokens (cost 0.2), two with none (answers not
# made here): they count in the latency, not in the tokens' or the cost's mean.
TUE = [(1000.0, [call(100, 50)]), (3000.0, []), (2000.0, [])]
MON_SCORES = {"faithfulness": [0.5, 0.75, 0.625], "judge_correctness": [4, 5, 3]}  # means 0.625 and 4
TUE_SCORES = {"faithfulness": [0.9, 0.8, 0.85], "judge_correctness": [2, 3, 3]}  # 0.85 and 2.67


def priced(monkeypatch):
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_PROMPT_TOKENS", "1")
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_COMPLETION_TOKENS", "2")
    return load_settings()


@pytest.mark.slow
def test_run_costs_are_each_runs_latency_tokens_and_cost_per_question(db, monkeypatch):
    mon = evaluation(db, "mon", MON, MON_SCORES)
    tue = evaluation(db, "tue", TUE, TUE_SCORES)
    evaluation(db, "elsewhere", MON[:1], {"faithfulness": [1.0]}, dataset="other.jsonl")
    evaluation(db, "unfinished", MON[:1], {"faithfulness": [1.0]}, status="running")
    settings = priced(monkeypatch)
    rows = run_costs(settings, db, "golden.jsonl")
    assert [(r["eval_run_id"], r["name"], r["questions"]) for r in rows] == [(mon, "mon", 3), (tue, "tue", 3)]
    first, second = rows
    assert first["latency_ms"] == pytest.approx(300.0) and first["p50_latency_ms"] == pytest.approx(200.0)
    assert first["p95_latency_ms"] == pytest.approx(560.0)  # interpolated: 200 + 0.9 * (600 - 200)
    assert first["tokens"] == pytest.approx(160 / 3) and first["cost"] == pytest.approx(0.07)
    assert first["replayed"] == pytest.approx(0.25)
    assert second["latency_ms"] == pytest.approx(2000.0) and second["p50_latency_ms"] == pytest.approx(2000.0)
    assert second["p95_latency_ms"] == pytest.approx(2900.0)  # 2000 + 0.9 * (3000 - 2000)
    assert second["tokens"] == pytest.approx(150.0) and second["cost"] == pytest.approx(0.2)
    assert second["replayed"] == 0
    assert [r["name"] for r in run_costs(settings, db)] == ["mon", "tue", "elsewhere"]  # every dataset's
    monkeypatch.delenv("WORKBENCH_PRICE_PER_1K_PROMPT_TOKENS")
    monkeypatch.delenv("WORKBENCH_PRICE_PER_1K_COMPLETION_TOKENS")
    unpriced = run_costs(load_settings(), db, "golden.jsonl")
    assert [r["cost"] for r in unpriced] == [None, None]  # no prices: no cost, as on the Runs page
    assert [r["tokens"] for r in unpriced] == pytest.approx([160 / 3, 150.0])


def test_daily_costs_are_each_services_days_figures(db, monkeypatch):
    day, next_day = date(2026, 3, 2), date(2026, 3, 3)
    at = lambda d: datetime.combine(d, time(9))  # noqa: E731
    question(db, 100.0, [call(10, 10)], kind="traced", pipeline="tower", started_at=at(day))
    question(db, 300.0, [call(30, 10)], kind="traced", pipeline="tower", started_at=at(day))
    question(db, 800.0, [call(40, 0)], kind="traced", pipeline="tower", started_at=at(next_day))
    question(db, 50.0, [call(1, 1)], kind="traced", pipeline="bridge", started_at=at(day))
    question(db, 999.0, [call(1000, 1000)], kind="chat", started_at=at(day))  # not traced: in no series
    rows = daily_costs(priced(monkeypatch), db)
    assert [(r["service"], r["day"], r["questions"]) for r in rows] == [
        ("bridge", day, 1),
        ("tower", day, 2),
        ("tower", next_day, 1),
    ]
    assert [r["latency_ms"] for r in rows] == pytest.approx([50.0, 200.0, 800.0])
    assert [r["p95_latency_ms"] for r in rows] == pytest.approx([50.0, 290.0, 800.0])
    assert [r["tokens"] for r in rows] == pytest.approx([2.0, 30.0, 40.0])
    assert [r["cost"] for r in rows] == pytest.approx([0.003, 0.04, 0.04])  # tower's day: 0.03 and 0.05
    assert [r["service"] for r in daily_costs(priced(monkeypatch), db, since=next_day)] == ["tower"]


def figure(at, title: str) -> tuple[dict, pd.DataFrame]:
    """The page's plotly chart with a panel of this title: its JSON and its lines' points (one row a point, with
    its panel's title and the hover's columns)."""
    for chart in at.get("plotly_chart"):
        spec = plotly_spec(chart)
        if title in plotly_panels(spec):
            return spec, plotly_points(spec)
    raise AssertionError(f"no chart with a panel {title!r}")


@pytest.mark.slow
def test_trends_draws_two_metrics_on_their_own_scales_with_the_pages_rounding(db, monkeypatch):
    evaluation(db, "mon", MON, MON_SCORES)
    evaluation(db, "tue", TUE, TUE_SCORES)
    at = app("pages/trends.py")
    metrics = next(m for m in at.multiselect if m.label == "Metrics")
    assert metrics.value == ["faithfulness"]  # the first metric, as the one metric drawn before
    metrics.set_value(["faithfulness", "judge_correctness"]).run()
    assert not at.exception, at.exception
    spec, points = figure(at, "judge correctness")
    assert plotly_panels(spec) == ["faithfulness", "judge correctness"]  # one panel per metric
    # each panel draws its own metric's points only
    lines = points[points["trace"] != "pinned baseline"]
    faithfulness = lines[lines["panel"] == "faithfulness"]
    judge = lines[lines["panel"] == "judge correctness"]
    assert list(faithfulness["mean"]) == pytest.approx([0.625, 0.85])
    assert list(judge["mean"]) == pytest.approx([4.0, 8 / 3])
    # a 0-1 score and a 1-5 judge mean never share an axis; the panels share the time axis and the colours
    layout = spec["layout"]
    assert layout["yaxis"]["range"] == pytest.approx([-0.05, 1.05])
    assert layout["yaxis2"]["range"] == pytest.approx([0.8, 5.2])
    assert layout["xaxis"]["matches"] == "x2"  # one time axis
    assert layout["xaxis2"]["tickformat"] == D3_TIME_FORMAT  # 24-hour times, as the tables write them
    by_panel = {t["yaxis"]: t["line"]["color"] for t in spec["data"] if t.get("name") != "pinned baseline"}
    assert by_panel["y"] == by_panel["y2"]  # the series' colour in both panels
    # the hover writes the mean as every page does: 0.625 is 0.62 (Python's rounding), never the chart's 0.63
    template = spec["data"][0]["hovertemplate"]
    assert "faithfulness mean: %{customdata[1]}" in template and "%{y" not in template
    assert list(faithfulness["mean_text"]) == ["0.62", "0.85"] == [fmt_score(0.625), fmt_score(0.85)]
    assert list(judge["mean_text"]) == ["4.00", "2.67"]
    metrics.set_value(["faithfulness"]).run()
    spec, points = figure(at, "faithfulness")
    assert plotly_panels(spec) == ["faithfulness"] and set(points["mean_text"]) == {"0.62", "0.85"}


@pytest.mark.slow
def test_trends_shows_latency_tokens_and_cost_per_question_of_each_run(db, monkeypatch):
    priced(monkeypatch)
    evaluation(db, "mon", MON, MON_SCORES)
    evaluation(db, "tue", TUE, TUE_SCORES)
    at = app("pages/trends.py")
    assert not at.exception, at.exception
    spec, points = figure(at, "cost per question")
    assert plotly_panels(spec) == [LATENCY, "tokens per question", "cost per question"]
    latency = points[points["panel"] == LATENCY]
    mean, p95 = latency[latency["dash"] == "solid"], latency[latency["dash"] == "dash"]  # mean solid, p95 dashed
    assert list(mean["latency_ms"]) == pytest.approx([300.0, 2000.0])
    assert list(p95["p95_latency_ms"]) == pytest.approx([560.0, 2900.0])
    tokens = points[points["panel"] == "tokens per question"]
    assert list(tokens["tokens"]) == pytest.approx([160 / 3, 150.0])
    assert list(points[points["panel"] == "cost per question"]["cost"]) == pytest.approx([0.07, 0.2])
    # the hover: run, questions, then mean, p50, p95 latency, tokens and cost as the other pages write them
    shown = ["label", "questions", "mean latency", "p50 latency", "p95 latency", "tokens per question"]
    hover = spec["data"][0]["meta"]["columns"]
    assert [f for f in hover if f in [*shown, "cost per question"]] == [*shown, "cost per question"]
    assert mean[[*shown, "cost per question"]].values.tolist() == [
        ["mon", "3", "300 ms", "200 ms", "560 ms", "53", "0.0700"],
        ["tue", "3", "2.0 s", "2.0 s", "2.9 s", "150", "0.2000"],
    ]
    assert list(mean["replayed"]) == ["25%", "0%"]  # the share of calls replayed from the cache, in the hover
    table = next(d.value for d in at.dataframe if "p95_latency_ms" in d.value.columns)
    assert list(table["name"]) == ["mon", "tue"] and list(table["questions"]) == [3, 3]
    assert list(table["p50_latency_ms"]) == pytest.approx([200.0, 2000.0])
    assert list(table["replayed"]) == pytest.approx([0.25, 0.0])
    assert list(table["cost"]) == pytest.approx([0.07, 0.2])


@pytest.mark.slow
def test_trends_has_no_cost_panel_without_prices(db):
    evaluation(db, "mon", MON, MON_SCORES)
    at = app("pages/trends.py")
    spec, points = figure(at, "tokens per question")
    assert plotly_panels(spec) == [LATENCY, "tokens per question"] and "cost per question" not in points.columns
    assert set(points["panel"]) == {LATENCY, "tokens per question"}
    table = next(d.value for d in at.dataframe if "p95_latency_ms" in d.value.columns)
    assert "cost" not in table.columns and list(table["tokens"]) == pytest.approx([160 / 3])


@pytest.mark.slow
def test_trends_keeps_each_charts_spec_by_its_inputs(db, monkeypatch):
    """A rerun over the same data sends the kept plotly figure: no chart is built again (issue 29:
    computed results kept by their inputs, not recomputed per render); other inputs draw anew."""
    import pages.views.trends as views

    built = []
    for name, build in list(views.FIGURES.items()):
        monkeypatch.setitem(views.FIGURES, name, lambda *a, _build=build, _name=name: built.append(_name) or _build(*a))
    evaluation(db, "mon", MON, MON_SCORES)
    at = app("pages/trends.py")
    assert sorted(built) == ["costs", "metrics"]
    at.run()
    assert not at.exception and sorted(built) == ["costs", "metrics"]  # nothing built again
    next(m for m in at.multiselect if m.label == "Metrics").set_value(["faithfulness", "judge_correctness"]).run()
    assert sorted(built) == ["costs", "metrics", "metrics"]
    spec, _ = figure(at, "judge correctness")
    assert plotly_panels(spec) == ["faithfulness", "judge correctness"]
