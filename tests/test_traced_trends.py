"""Traced runs on Runs and Trends (issue 28): the filter by pipeline or service (store, CLI, page); the daily
faithfulness per service; the alerts of a complete day against floors and the day before, under the evaluations'
statistics rules, each opened once; the Trends page's section."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, datetime, time, timedelta

import numpy as np
import pytest
from test_app import app, fresh_streamlit_caches  # noqa: F401 - the fixture
from test_charts import frame_with, plotly_floors, plotly_spec

from pages.views.run_filters import OPEN as FILTERS_OPEN
from pipeline.cli.main import main
from pipeline.collect.traced import check_traced, daily_series, latest_complete_day, welch
from pipeline.collect.worker import OnlineWorker
from pipeline.evaluation.family import SPENT
from pipeline.regression.alerts import acknowledge, count_below_floor, count_open_alerts, list_alerts
from store.history import RunFilter, filter_choices, find_runs
from store.records import RunLog, RunRecord
from store.runs import save_run

TODAY = date(2026, 3, 10)
DAY, BEFORE = TODAY - timedelta(days=1), TODAY - timedelta(days=2)
SPREAD = np.linspace(0.7, 1.0, 8)  # a day's faithfulness: mean 0.85


def traced(db, service, day, values, kind="traced"):
    """Runs of one service and day with these faithfulness values (None: kept without verdicts); their ids."""
    ids = []
    for i, value in enumerate(values):
        run = RunRecord(
            kind=kind,
            question=f"{service} question {i} of {day}",
            status="not_evaluated" if value is None else "accepted",
            started_at=datetime.combine(day, time(8, i % 60)),
            answer="an answer",
            faithfulness=None if value is None else float(value),
            pipeline=service if kind in ("traced", "imported") else None,
            trace_id=f"{service}-{day}-{i}" if kind == "traced" else None,
        )
        ids.append(save_run(db, RunLog(run)))
    return ids


def mixed_runs(db):
    return {
        "tower": traced(db, "tower-app", DAY, [0.9, 0.8]),
        "bridge": traced(db, "bridge-app", DAY, [0.5]),
        "vendor": traced(db, "vendor", DAY, [0.7], kind="imported"),
        "chat": traced(db, "chat", DAY, [1.0], kind="chat"),
    }


def test_the_store_filters_runs_by_pipeline_and_offers_the_services_and_the_traced_kind(db):
    ids = mixed_runs(db)
    assert sorted(r["id"] for r in find_runs(db, RunFilter(pipelines=["tower-app"])).rows) == ids["tower"]
    both = find_runs(db, RunFilter(pipelines=["tower-app", "vendor"])).rows
    assert sorted(r["id"] for r in both) == sorted(ids["tower"] + ids["vendor"])
    assert [r["id"] for r in find_runs(db, RunFilter(kinds=["traced"], pipelines=["vendor"])).rows] == []
    assert find_runs(db, RunFilter(pipelines=["bridge-app"])).total == 1
    choices = filter_choices(db)
    assert choices["pipelines"] == ["bridge-app", "tower-app", "vendor"]  # a run of this workbench has none
    assert choices["kinds"] == ["chat", "imported", "traced"]


def test_the_runs_command_filters_by_pipeline_and_names_the_traced_kind(db, capsys):
    ids = mixed_runs(db)
    assert main(["runs", "--json", "--pipeline", "tower-app"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["id"] for r in rows) == ids["tower"] and {r["pipeline"] for r in rows} == {"tower-app"}
    assert main(["runs", "--json", "--pipeline", "bridge-app", "--pipeline", "vendor"]) == 0
    assert sorted(r["id"] for r in json.loads(capsys.readouterr().out)) == sorted(ids["bridge"] + ids["vendor"])
    with pytest.raises(SystemExit):
        main(["runs", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(chat, eval, imported, traced)" in help_text and "--pipeline NAME" in help_text


@pytest.mark.slow
def test_the_runs_page_filters_by_pipeline_or_service(db):
    ids = mixed_runs(db)
    at = app("pages/runs.py")
    assert len(at.dataframe[0].value) == 5
    at.session_state[FILTERS_OPEN] = True  # the filters are drawn when opened
    at.run()
    assert "traced" in next(m for m in at.multiselect if m.label == "Kind").options
    service = next(m for m in at.multiselect if m.label == "Pipeline / service")
    assert service.options == ["bridge-app", "tower-app", "vendor"]
    service.set_value(["tower-app"]).run()
    assert not at.exception, at.exception
    assert sorted(at.dataframe[0].value["id"]) == ids["tower"]
    assert any("2 runs match" in c.value for c in at.caption)


def test_the_daily_series_is_each_services_mean_over_its_verified_traced_runs(db):
    traced(db, "tower-app", BEFORE, [0.9, 0.7, None])  # a trace kept without verdicts has no faithfulness
    traced(db, "tower-app", DAY, [1.0, 0.5, 0.6, 0.9])
    traced(db, "bridge-app", DAY, [0.25])
    traced(db, "tower-app", DAY, [0.0], kind="imported")  # another kind of run: not in the series
    traced(db, "chat", DAY, [0.0], kind="chat")
    series = [(r["service"], r["day"], round(r["mean"], 6), r["n"]) for r in daily_series(db)]
    assert series == [
        ("tower-app", BEFORE, 0.8, 2),
        ("bridge-app", DAY, 0.25, 1),
        ("tower-app", DAY, 0.75, 4),
    ]
    assert [r["day"] for r in daily_series(db, since=DAY)] == [DAY, DAY]


def kinds(db):
    return sorted((a["run_name"], a["kind"], a["status"]) for a in list_alerts(db))


def test_a_real_drop_opens_one_regression_alert_and_a_second_check_opens_none(db, settings):
    traced(db, "tower-app", BEFORE, SPREAD + 0.1)  # mean 0.95
    traced(db, "tower-app", DAY, SPREAD - 0.05)  # mean 0.80: a drop of 0.15, above the floor
    checks, opened = check_traced(db, settings, TODAY)
    assert opened == 1 and kinds(db) == [(f"tower-app · {DAY}", "drop", "open")]
    (check,) = checks
    assert check.delta == pytest.approx(-0.15) and check.regression and not check.below_floor
    (alert,) = list_alerts(db)
    assert alert["service"] == "tower-app" and alert["service_day"] == DAY and alert["eval_run_id"] is None
    assert alert["baseline_name"] == f"tower-app · {BEFORE}" and alert["n"] == 8
    assert alert["baseline_value"] == pytest.approx(0.95) and alert["new_value"] == pytest.approx(0.80)
    assert "Welch" in alert["message"] and "over 1 service (Holm)" in alert["message"]
    assert [w["faithfulness"] for w in alert["worst_items"]] == pytest.approx(list(SPREAD[:5] - 0.05))
    assert count_open_alerts(db) == 1 and count_below_floor(db) == 0  # the sidebar's counts
    # checked again (the worker after every batch): nothing opens twice, open or acknowledged
    assert check_traced(db, settings, TODAY)[1] == 0 and len(list_alerts(db)) == 1
    assert acknowledge(db, alert["id"], "known: a new prompt")
    assert check_traced(db, settings, TODAY)[1] == 0 and kinds(db) == [(f"tower-app · {DAY}", "drop", "acknowledged")]


def test_a_day_below_the_floor_opens_a_below_floor_alert_not_a_regression(db, settings):
    traced(db, "tower-app", BEFORE, SPREAD - 0.25)  # mean 0.60 both days: no drop
    traced(db, "tower-app", DAY, SPREAD - 0.25)
    traced(db, "bridge-app", DAY, [0.5, 0.6])  # too few runs for a test: the floor holds all the same
    checks, opened = check_traced(db, settings, TODAY)
    assert opened == 2
    assert kinds(db) == [(f"bridge-app · {DAY}", "floor", "open"), (f"tower-app · {DAY}", "floor", "open")]
    assert count_below_floor(db) == 2 and count_open_alerts(db) == 0
    bridge = next(c for c in checks if c.service == "bridge-app")
    assert bridge.p_value is None and "at least 5 a day" in bridge.note
    tower = next(a for a in list_alerts(db) if a["service"] == "tower-app")
    assert tower["baseline_value"] == 0.70 and tower["delta"] == pytest.approx(-0.10)
    assert tower["baseline_name"] is None and "below its floor 0.70" in tower["message"]
    assert check_traced(db, settings, TODAY)[1] == 0 and len(list_alerts(db)) == 2


@pytest.mark.slow
def test_equal_days_and_a_drop_smaller_than_min_effect_open_nothing(db, settings):
    traced(db, "tower-app", BEFORE, SPREAD)
    traced(db, "tower-app", DAY, SPREAD)
    traced(db, "bridge-app", BEFORE, [0.95] * 10)
    traced(db, "bridge-app", DAY, [0.93] * 10)  # certainly lower (no spread), but by 0.02 < min_effect 0.05
    checks, opened = check_traced(db, settings, TODAY)
    assert opened == 0 and list_alerts(db) == []
    bridge = next(c for c in checks if c.service == "bridge-app")
    assert bridge.p_adjusted < 1e-9 and bridge.delta == pytest.approx(-0.02) and not bridge.regression
    assert check_traced(db, replace(settings, min_effect=0.01), TODAY)[1] == 1


@pytest.mark.slow
def test_the_services_of_a_day_are_one_family(db, settings):
    """A drop with p = 0.019 is an alert alone, and not among three services (Holm at the 90% of alpha the
    evaluations' family spends: 3 × 0.019 / 0.9 > 0.05)."""
    assert welch(SPREAD, SPREAD - 0.12)[1] == pytest.approx(0.0192, abs=1e-4)
    traced(db, "tower-app", BEFORE, SPREAD)
    traced(db, "tower-app", DAY, SPREAD - 0.12)
    alone = {c.service: c for c in check_traced(db, replace(settings, floors=""), TODAY)[0]}
    assert alone["tower-app"].regression and alone["tower-app"].family_size == 1
    db_alerts = list_alerts(db)
    acknowledge(db, db_alerts[0]["id"], "")
    for service in ("bridge-app", "lake-app"):
        traced(db, service, BEFORE, SPREAD)
        traced(db, service, DAY, SPREAD)
    three = {c.service: c for c in check_traced(db, settings, TODAY)[0]}
    assert three["tower-app"].family_size == 3
    assert three["tower-app"].p_adjusted == pytest.approx(3 * three["tower-app"].p_value / SPENT)
    assert not three["tower-app"].regression


@pytest.mark.slow
def test_the_online_worker_checks_yesterday_when_it_runs(db, settings):
    today = date.today()
    assert latest_complete_day() == today - timedelta(days=1)
    traced(db, "tower-app", today - timedelta(days=2), SPREAD + 0.1)
    traced(db, "tower-app", today - timedelta(days=1), SPREAD - 0.05)
    worker = OnlineWorker(settings, db, settle_s=0)
    assert worker.run_once() == 0  # nothing waiting: the day turned (its first look), so it checks
    assert worker.state.alerts_opened == 1 and kinds(db)[0][1] == "drop"
    assert worker.checked_on == today


@pytest.mark.slow
def test_the_trends_page_draws_each_services_days_with_the_floor_and_lists_their_alerts(db, settings):
    yesterday = latest_complete_day()
    traced(db, "tower-app", yesterday - timedelta(days=1), SPREAD + 0.1)
    traced(db, "tower-app", yesterday, SPREAD - 0.05)
    traced(db, "bridge-app", yesterday, [0.5, 0.6])
    check_traced(db, settings)
    at = app("pages/trends.py")
    assert not at.exception, at.exception
    assert any(s.value == "Traced runs: daily faithfulness per service" for s in at.subheader)
    # no evaluation runs: the traced faithfulness chart comes first, then the traced runs' latency, tokens and cost
    chart, _ = at.get("plotly_chart")
    points = frame_with(chart, "mean_text")
    lines = {s: (list(g["mean"]), list(g["n"]), list(g["mean_text"])) for s, g in points.groupby("service")}
    assert lines["tower-app"][:2] == (pytest.approx([0.95, 0.80]), ["8", "8"])
    assert lines["bridge-app"] == (pytest.approx([0.55]), ["2"], ["0.55"])
    assert lines["tower-app"][2] == ["0.95", "0.80"]  # the hover's text, as the other pages write a mean
    assert plotly_floors(plotly_spec(chart)) == [(0.7, "floor 0.70")]
    table = at.dataframe[0].value
    assert list(table["service"]) == ["bridge-app", "tower-app"]
    assert list(table["verdict"]) == ["below floor", "drop"]
    labels = sorted(e.label.replace("\\", "") for e in at.expander)
    assert labels == [
        f"bridge-app · {yesterday}: faithfulness (traced runs) — below floor",
        f"tower-app · {yesterday}: faithfulness (traced runs) — regression (drop)",
    ]
    links = [link.value for link in at.sidebar.page_link]
    assert "1 open regression alert" in links and "1 metric below floor" in links
    next(m for m in at.multiselect if m.label == "Services").set_value(["bridge-app"]).run()
    assert list(frame_with(at.get("plotly_chart")[0], "mean_text")["service"]) == ["bridge-app"]


def test_collect_drain_checks_yesterday_and_says_what_it_opened(db, capsys):
    today = date.today()
    traced(db, "tower-app", today - timedelta(days=1), [0.4, 0.5])  # below the floor
    assert main(["collect", "--drain"]) == 0
    assert "1 alert opened on traced runs' daily faithfulness: see Trends" in capsys.readouterr().out
    assert kinds(db) == [(f"tower-app · {today - timedelta(days=1)}", "floor", "open")]
    assert main(["collect", "--drain"]) == 0
    assert "opened on traced runs" not in capsys.readouterr().out
