"""Metrics over evaluation runs, several at once (a panel each, on its own scale), floors drawn in, one series per
judge pin, dataset and size; the pinned baseline; latency, tokens and cost per question per run; traced runs' daily
faithfulness, latency, tokens and cost per service; regression alerts, and apart from them the metrics below their
floors."""

import pandas as pd
import streamlit as st

from pages.views.common import page_setup
from pages.views.markup import escape_markdown
from pages.views.plotly_charts import draw
from pages.views.tables import table
from pages.views.trends import METRIC_COLUMNS, costs_table, figure_of
from pipeline.collect.traced import check_day, daily_series, faithfulness_floor, latest_complete_day
from pipeline.evaluation.datasets import version_label
from pipeline.evaluation.given import OWN_PIPELINE
from pipeline.evaluation.judge import recorded_version
from pipeline.evaluation.regression import BASELINE_RULE, METRICS, config_diff, parse_floors
from pipeline.regression.alerts import (
    FLOOR,
    acknowledge,
    clean_runs,
    list_alerts,
    metric_series,
    pin_baseline,
    pinned_baseline,
)
from pipeline.regression.trends import daily_costs, measures, run_costs

settings, db = page_setup(__file__)

series = pd.DataFrame(metric_series(db))
if series.empty:
    st.info("No finished evaluation runs yet. Run one on the Evaluate page or with `python -m pipeline eval`.")
else:
    datasets = sorted(series["dataset"].unique())
    dataset = st.selectbox("Dataset", datasets)
    data = series[series["dataset"] == dataset].copy()
    with_failures = data.loc[data["failed"] > 0, "eval_run_id"].nunique()
    if with_failures and not st.checkbox(
        f"Include runs with failed items ({with_failures})",
        help="A run some of whose items failed measures fewer questions than its series; it is left out unless you "
        "include it.",
    ):
        data = data[data["failed"] == 0]
    # a judge criterion with a prompt version of its own is drawn under that version (pipeline.evaluation.judge)
    versions = [
        recorded_version(r.metric, r.judge_prompt_version, r.config)
        for r in data[["metric", "judge_prompt_version", "config"]].itertuples()
    ]
    data["pin"] = data["judge_model"] + "@" + data["judge_digest"].str[:12] + " / " + pd.Series(versions, data.index)
    # runs are comparable only of the same pipeline, under the same judge pin, over the same dataset content (for a
    # golden set kept in the store, the same version: NAME@VERSION) and size
    data["series"] = (
        data["pipeline"].fillna(OWN_PIPELINE)
        + " · "
        + data["pin"]
        + " · "
        + data["dataset_hash"].map(lambda h: version_label(h) or f"data {(h or '?')[:8]}")
        + " · "
        + data["n_items"].astype(str)
        + " items"
    )
    runs = data.drop_duplicates("eval_run_id").sort_values("created_at")
    pinned = pinned_baseline(db, dataset)
    pinned_name = next((r.name for r in runs.itertuples() if r.eval_run_id == pinned), None)
    if pinned_name:
        st.info(
            f"Pinned baseline for {escape_markdown(dataset)}: **{escape_markdown(pinned_name)}**. "
            "Every run over the same dataset content (for a golden set kept in the store, the same version) is "
            "compared with it."
        )
    else:
        st.info(f"No baseline pinned for {escape_markdown(dataset)}. {BASELINE_RULE}")
    previous = {}
    for _, group in runs.groupby("series"):
        configs = list(group.itertuples())
        for before, after in zip([None] + configs[:-1], configs, strict=True):
            diff = config_diff(before.config, after.config) if before is not None else {}
            previous[after.eval_run_id] = ", ".join(f"{k}: {a} → {b}" for k, (a, b) in diff.items()) or (
                "first run of this series" if before is None else "no configuration change"
            )
    data["changed"] = data["eval_run_id"].map(previous)
    floors = parse_floors(settings.floors)
    offered = [m for m in METRICS if m in set(data["metric"])]
    chosen_metrics = st.multiselect(
        "Metrics",
        offered,
        default=offered[:1],
        help="Each metric gets a panel on its own scale (0-1 scores and 1-5 judge means never share an axis); the "
        "panels share the run-time axis, and a series keeps its colour in every panel.",
    )
    if not chosen_metrics:
        st.caption("Choose one or more metrics to draw.")
    else:
        draw(figure_of("metrics", data[METRIC_COLUMNS], chosen_metrics, floors, pinned, pinned_name), "metric_trends")
    st.caption(
        "Runs of different pipelines, under different judge pins, or over a different dataset content or size, are "
        "separate series; "
        "their scores are never compared."
    )
    names = list(runs["name"])
    clean = clean_runs(db, [int(i) for i in runs["eval_run_id"]])
    eligible = [r.name for r in runs.itertuples() if r.eval_run_id in clean]
    default = pinned_name or (eligible[-1] if eligible else names[-1])
    left, right = st.columns([3, 1])
    chosen = left.selectbox(
        "Pin a baseline for this dataset",
        names,
        index=names.index(default),
        help="Defaults to the pinned run, else the newest run with no failed item and no open regression alert "
        "(a metric below its floor does not count).",
    )
    if right.button("Pin as baseline"):
        pin_baseline(db, dataset, int(runs[runs["name"] == chosen]["eval_run_id"].iloc[0]))
        st.success(f"{escape_markdown(chosen)} is now the baseline for {escape_markdown(dataset)}.")
    st.markdown("**Latency, tokens and cost per question**")
    costs = pd.DataFrame(run_costs(settings, db, dataset))
    costs = runs[["eval_run_id", "series"]].merge(costs, on="eval_run_id") if not costs.empty else costs
    if costs.empty:
        st.caption("These runs' answers carry no latency, tokens or cost (their runs are not logged here).")
    else:
        shown_measures = measures(settings)
        draw(figure_of("costs", costs, "series", "created_at", "name", shown_measures, "run time"), "run_costs")
        rows, config = costs_table(costs, ["name", "created_at"], shown_measures)
        table(rows, hide_index=True, width="stretch", column_config=config, key="run_costs_table")
    st.caption(
        "Per run, over its questions: latency (mean, p50, p95), tokens (prompt + completion) and, with prices per "
        "1000 tokens set, the estimated cost of a question, counted as the Runs page counts a run's."
    )

st.subheader("Traced runs: daily faithfulness per service")
daily = pd.DataFrame(daily_series(db))
if daily.empty:
    st.info(
        "No verified traced runs yet. `python -m pipeline collect` receives an application's OpenTelemetry traces "
        "and verifies them as they arrive."
    )
else:
    services = sorted(daily["service"].unique())
    chosen_services = st.multiselect("Services", services, default=services)
    floor = faithfulness_floor(settings)
    draw(figure_of("daily", daily[daily["service"].isin(chosen_services)], floor), "traced_daily")
    day = latest_complete_day()
    checks = [c for c in check_day(db, settings, day) if c.service in chosen_services]
    st.markdown(f"**{day}** (the latest complete day) against the day before")
    if not checks:
        st.caption(f"No verified traced runs on {day}.")
    else:
        table(
            pd.DataFrame(
                [
                    {
                        "service": c.service,
                        "mean": c.mean,
                        "n": c.n,
                        "day before": c.previous_mean,
                        "n before": c.previous_n,
                        "change": c.delta,
                        "adjusted p": c.p_adjusted,
                        "verdict": ", ".join(
                            v for v, hit in (("drop", c.regression), ("below floor", c.below_floor)) if hit
                        )
                        or (c.note or "no drop"),
                    }
                    for c in checks
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={
                name: st.column_config.NumberColumn(format="%.3f")
                for name in ("mean", "day before", "change", "adjusted p")
            },
        )
    st.caption(
        "Each point is a service's mean faithfulness over its verified traced runs of that day (n in the hover); "
        "a day is compared with the day before by Welch's test, the services one family (Holm, as evaluations' "
        "primary endpoints), an alert when the "
        "drop is significant and at least `min_effect`, or when the mean is below the faithfulness floor. The "
        "online worker opens these alerts (listed below, named service · day), each once."
    )
traced_costs = pd.DataFrame(daily_costs(settings, db))
if not (traced_costs.empty or daily.empty):  # the services chosen above
    traced_costs = traced_costs[traced_costs["service"].isin(chosen_services)]
if not traced_costs.empty:  # traced runs kept without verdicts have a latency too
    st.markdown("**Traced runs: latency, tokens and cost per question, per service and day**")
    shown_measures = measures(settings)
    draw(figure_of("costs", traced_costs, "service", "day", "day", shown_measures, "day"), "daily_costs")
    rows, config = costs_table(traced_costs, ["service", "day"], shown_measures)
    table(rows, hide_index=True, width="stretch", column_config=config, key="daily_costs_table")

KIND_LABEL = {"drop": "regression (drop)", FLOOR: "below floor"}


def show_alert(alert: dict) -> None:
    title = (
        f"{alert['run_name']}: {alert['metric']} ({alert['slice']}) — {KIND_LABEL.get(alert['kind'], alert['kind'])}"
    )
    icon = ":material/notifications_active:" if alert["status"] == "open" else ":material/check:"
    with st.expander(escape_markdown(title), icon=icon):
        st.markdown(escape_markdown(alert["message"]))
        st.caption(
            escape_markdown(
                f"baseline {alert['baseline_name'] or '—'} · likely component: {alert['component']} · "
                f"configuration change: "
                + (", ".join(f"{k}: {a} → {b}" for k, (a, b) in alert["config_diff"].items()) or "none")
            )
        )
        if alert["worst_items"]:
            worst = pd.DataFrame(alert["worst_items"])
            worst["run"] = worst["run_id"].map(lambda r: f"/runs?run_id={r}")
            table(
                worst,
                hide_index=True,
                width="stretch",
                column_config={"run": st.column_config.LinkColumn("run", display_text="open")},
            )
        if alert["status"] == "open":
            with st.form(f"ack-{alert['id']}"):
                comment = st.text_input("Comment")
                if st.form_submit_button("Acknowledge"):
                    acknowledge(db, alert["id"], comment)
                    st.rerun()
        elif alert["comment"]:
            st.caption(escape_markdown(f"Acknowledged: {alert['comment']}"))


st.subheader("Alerts")
show = st.radio("Show", ["open", "acknowledged", "all"], horizontal=True)
alerts = list_alerts(db, None if show == "all" else show)
which = "" if show == "all" else show + " "
st.markdown("**Regressions**: drops against the baseline")
regressions = [a for a in alerts if a["kind"] != FLOOR]
if not regressions:
    st.caption(f"No {which}regression alerts.")
for alert in regressions:
    show_alert(alert)
st.markdown(
    "**Below floor**: a metric's mean under its floor (setting `floors`); not a regression, and no reason to skip "
    "a run as the baseline"
)
below = [a for a in alerts if a["kind"] == FLOOR]
if not below:
    st.caption(
        f"No {which}metric below its floor." if settings.floors.strip() else "Floors are off (`floors` is empty)."
    )
for alert in below:
    show_alert(alert)
