"""Widgets of the Experiments page: the form that starts a sweep in the background (one progress bar across its
combinations, redrawn while it runs), the choice
of a sweep, its leaderboard, the best combination per metric, the paired tests against a reference (Holm), and quality
against latency with the Pareto front. Sweep names, labels, settings' values and dataset names are untrusted text:
escaped, or shown in tables, select boxes and charts, which do not read Markdown."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from pages.views import plotly_charts as pc
from pages.views.common import escape_keeping_code, show_error
from pages.views.compare import compare_link
from pages.views.evaluation import choose_dataset, fresh_checkbox, show_mapping
from pages.views.job_notices import follow_jobs
from pages.views.markup import escape_markdown, fmt_ms, fmt_score, plural
from pages.views.tables import count_column, delta_column, ms_column, table
from pipeline.errors import WorkbenchError
from pipeline.evaluation.registry import label_of, metric_names
from pipeline.experiments import (
    Leaderboard,
    SweepOutcome,
    SweepProgress,
    get_sweep,
    sweepable_settings,
)
from pipeline.experiments.grid import ALTERNATIVE_SEPARATOR, value_text
from pipeline.experiments.jobs import SweepJob, start_sweep_job, sweep_jobs
from pipeline.experiments.leaderboard import Interval, default_quality_metric

GRID_AXES = 3  # grid settings the form offers; the CLI takes any number
AXIS_EXAMPLES = ("top_k=3,5,8", "chunk_size=256,512", "temperature=0,0.5")
PICKED = "experiments_sweep"  # session state: the Sweep select box's key
CLI = "python -m pipeline sweep DATASET --name NAME --grid top_k=3,5,8 --grid chunk_size=256,512"


# -- running a sweep -----------------------------------------------------------------------------------------------


def sweep_form(settings, db, expanded: bool) -> None:
    """The "Run a sweep" expander: a sweep it starts runs in the background (live_sweeps shows its progress)."""
    with st.expander("Run a sweep", expanded=expanded, icon=":material/play_arrow:"):
        st.caption(
            "One evaluation per combination of the grid's values, over the same items. The sweep runs in the "
            "background: leaving the page or closing the browser does not stop it, Cancel does (the same name then "
            f"continues it, skipping the combinations that finished). From the command line: `{CLI}`."
        )
        dataset = choose_dataset(Path(settings.kb_path).parent / "eval", db)
        if dataset is None:
            return
        show_mapping(dataset)
        with st.form("sweep"):
            name = st.text_input(
                "Sweep name (the same name continues a sweep)",
                value=f"{Path(dataset.name).stem}-sweep-{time.strftime('%Y%m%d-%H%M')}",
                key="sweep_name",
            )
            axes = [
                st.text_input(
                    f"Grid setting {n + 1}" + (" (optional)" if n else ""),
                    placeholder=example,
                    key=f"sweep_axis_{n}",
                    help="SETTING=VALUE,VALUE: every combination of the settings' values runs, the first setting "
                    f"varying slowest; values that hold commas are separated with {ALTERNATIVE_SEPARATOR}",
                )
                for n, example in enumerate(AXIS_EXAMPLES[:GRID_AXES])
            ]
            st.caption(escape_markdown("Settings a grid may vary: " + ", ".join(sweepable_settings())))
            cols = st.columns(4)
            reference = cols[0].text_input(
                "Reference combination",
                key="sweep_reference",
                placeholder="the first",
                help="The combination every other is tested against, by its label (e.g. top_k=5); empty: the "
                "first. The leaderboard below can test against another.",
            )
            concurrency = cols[1].number_input("Concurrency", 1, 32, settings.eval_concurrency, key="sweep_concurrency")
            limit = cols[2].number_input(
                "Only the first N items (0 = all)", 0, len(dataset.items), 0, key="sweep_limit"
            )
            tags = cols[3].multiselect("Only items with tags", dataset.tags, key="sweep_tags")
            every = metric_names()
            metrics = st.multiselect(
                "Metrics",
                every,
                default=every,
                format_func=label_of,
                key="sweep_metrics",
                help="Every metric by default; a continued sweep measures the metrics it was started with.",
            )
            fresh = fresh_checkbox("sweep_fresh")
            submitted = st.form_submit_button("Run sweep", type="primary", icon=":material/play_arrow:")
        if not submitted:
            return
        grid = [text.strip() for text in axes if text.strip()]
        chosen = None if set(metrics) == set(every) else metrics  # None: a continued sweep keeps its own
        try:
            job = start_sweep_job(
                dataclasses.replace(settings, cache_read=False) if fresh else settings,
                db,
                dataset,
                name,
                grid,
                reference=reference.strip() or None,
                metrics=chosen,
                concurrency=int(concurrency),
                limit=limit or None,
                tags=tags,
            )
        except WorkbenchError as exc:
            show_error(exc)
            return
        st.session_state.setdefault(WATCHED, set()).add(job.serial)
        st.session_state[SHOW] = job.name


# Session state: the sweep jobs this session started or saw running, how those that ended ended (shown until
# dismissed), and the sweep to select (the one started or finished last). Jobs are per process, these per session.
WATCHED, ENDED, SHOW = "sweep_watched", "sweep_ended", "sweep_show"
REFRESH_S = 1.0  # how often a running sweep's progress is redrawn


def live_sweeps() -> None:
    """Progress of the running sweeps, redrawn every REFRESH_S while one runs and never otherwise (a timed
    fragment would rerun the page forever); when a watched one ends the whole page reruns with its leaderboard."""
    running = any(job.running for job in sweep_jobs())
    st.fragment(sweeps_body, run_every=REFRESH_S if running else None)()


def sweeps_body() -> None:
    follow_jobs(sweep_jobs(), WATCHED, ENDED, running_sweep, show_ended, show_next)


def running_sweep(job: SweepJob) -> None:
    sweep_bar(job.progress)
    if st.button("Cancel", key=f"cancel-sweep-{job.serial}"):
        job.cancel.set()
        st.info("Cancelling: items in progress finish, then the sweep stops. The same name continues it.")


def show_next(job: SweepJob) -> None:
    """A sweep that ended is the one the page shows next (its leaderboard, or how far it got)."""
    st.session_state[SHOW] = job.name


def sweep_bar(progress: SweepProgress | None) -> None:
    if progress is None:
        st.progress(0.0, text="Preparing the sweep")
        return
    done = progress.finished / progress.total if progress.total else 0.0
    st.progress(min(done, 1.0), text=escape_markdown(progress_text(progress)))


def show_ended(job: SweepJob) -> None:
    """How a sweep this session watched ended: its outcome and last progress, or the error that stopped it."""
    if job.error is not None:
        if isinstance(job.error, WorkbenchError):
            show_error(WorkbenchError(f"Sweep {job.name} stopped: {job.error.message}", job.error.fix))
        else:
            st.error(escape_markdown(f"Sweep {job.name} stopped by an unexpected error: {job.error!r}"))
        return
    sweep_bar(job.outcome.progress)
    show_outcome(job.outcome)


def progress_text(progress: SweepProgress) -> str:
    left = progress.combinations - sum(
        1 for n in progress.finished_items.values() if n >= progress.items_per_combination
    )
    text = (
        f"{progress.finished} of {plural(progress.total, 'item')} across {plural(progress.combinations, 'combination')}"
        f" · {progress.failed} failed · {plural(left, 'combination')} left"
    )
    return text + (f" · now {progress.current}" if progress.current else "")


def show_outcome(outcome: SweepOutcome) -> None:
    failed = outcome.progress.failed
    text = (
        f"Sweep {outcome.name}: {outcome.status} · {plural(len(outcome.ran), 'combination')} run now"
        + (f", {len(outcome.skipped)} finished before" if outcome.skipped else "")
        + (f" · {plural(failed, 'item')} failed: run it again under the same name to retry them" if failed else "")
    )
    (st.success if outcome.status == "finished" else st.warning)(escape_markdown(text))


# -- choosing a sweep and what to test it against ------------------------------------------------------------------


def empty_state() -> None:
    st.info(
        "No sweeps yet. Run one with the form above, or from the command line (better for long ones): "
        + escape_keeping_code(f"`{CLI}`")
        + ". Each combination runs as an ordinary evaluation, and its leaderboard shows here."
    )


def pick_sweep(rows: list[dict]) -> str:
    """The sweep to show: the one started or finished last, else the one chosen before, else the newest."""
    by_name = {r["name"]: r for r in rows}
    ran = st.session_state.pop(SHOW, None)
    if ran in by_name:
        st.session_state[PICKED] = ran
    elif st.session_state.get(PICKED) not in by_name:
        st.session_state.pop(PICKED, None)
    return st.selectbox("Sweep", list(by_name), key=PICKED, format_func=lambda n: sweep_text(by_name[n]))


def sweep_text(row: dict) -> str:
    dataset = row["dataset"] if row["dataset_version"] is None else f"{row['dataset']}@{row['dataset_version']}"
    return (
        f"{row['name']} · {dataset} · {row['finished']} of {plural(row['combinations'], 'combination')} finished "
        f"· {row['status']}"
    )


def choose_view(settings, db, name: str) -> tuple[str, str | None]:
    """The reference combination (default the sweep's own) and the quality metric of the chart."""
    sweep = get_sweep(db, name)
    labels = [c.label for c in sweep.combinations]
    metrics = sweep.metrics or metric_names()
    left, right = st.columns(2)
    reference = left.selectbox(
        "Reference (every other combination is tested against it)",
        labels,
        index=labels.index(sweep.reference) if sweep.reference in labels else 0,
        key=f"experiments_reference:{name}",
    )
    default = default_quality_metric(settings, metrics)
    quality = right.selectbox(
        "Quality metric (the chart and its Pareto front)",
        metrics,
        index=metrics.index(default) if default in metrics else 0,
        format_func=label_of,
        key=f"experiments_quality:{name}",
    )
    return reference, quality


# -- the leaderboard -----------------------------------------------------------------------------------------------


def interval_text(interval: Interval | None) -> str | None:
    """A mean with its 95% interval: 0.82 [0.71, 0.93]; the mean alone with fewer than 2 items."""
    if interval is None or interval.mean is None:
        return None
    if interval.low is None:
        return fmt_score(interval.mean)
    return f"{fmt_score(interval.mean)} [{fmt_score(interval.low)}, {fmt_score(interval.high)}]"


def show_summary(board: Leaderboard) -> None:
    significant = sum(t.significant for r in board.rows for t in r.tests.values())
    st.caption(
        escape_markdown(
            f"Over {board.dataset} · {board.status} · reference {board.reference} · "
            f"{plural(board.n_tests, 'paired test')}, Holm-adjusted at alpha {board.alpha:g}: "
            + (f"{significant} significant" if significant else "no significant difference")
        )
    )


def leaderboard_frame(board: Leaderboard) -> pd.DataFrame:
    """One row per combination: its settings, each metric's mean [95% interval], calls, tokens, latency, what it is
    best on, whether it is on the Pareto front, its evaluation, and the link opening it in Compare against the
    reference."""
    reference = next(r for r in board.rows if r.is_reference)
    setting_names = list(dict.fromkeys(name for r in board.rows for name in r.settings))
    priced = any(r.cost is not None for r in board.rows)
    records = []
    for r in board.rows:
        record = {"combination": r.label, "reference": r.is_reference}
        record |= {name: value_text(r.settings[name]) if name in r.settings else None for name in setting_names}
        record["status"] = r.status
        record["items"] = r.items_done
        record |= {label_of(m): interval_text(r.metrics.get(m)) for m in board.metrics}
        record["calls"] = r.calls
        record["cache hits"] = r.cache_hits
        record["tokens"] = r.prompt_tokens + r.completion_tokens
        if priced:
            record["cost"] = r.cost
        record["p50 latency (ms)"] = r.latency_p50_ms
        record["p95 latency (ms)"] = r.latency_p95_ms
        record["replayed"] = r.replayed
        record["best on"] = ", ".join(label_of(m) for m in r.best_for) or None
        record["Pareto front"] = r.pareto
        record["evaluation"] = r.eval_name
        comparable = not r.is_reference and r.eval_run_id is not None and reference.eval_run_id is not None
        record["compare"] = compare_link(reference.eval_name, r.eval_name) if comparable else None
        records.append(record)
    return pd.DataFrame(records)


COST_COLUMNS = ["calls", "cache hits", "tokens", "cost", "p50 latency (ms)", "p95 latency (ms)", "replayed"]


def leaderboard_table(board: Leaderboard) -> None:
    """The leaderboard in three tables that each fit 1280 px (in one, its two dozen columns scrolled sideways): the
    combinations with their settings, status and standing; each metric's interval, a metric a row and a combination
    a column; and what each cost."""
    st.subheader("Leaderboard")
    frame = leaderboard_frame(board)
    metrics = [label_of(m) for m in board.metrics]
    costs = [c for c in COST_COLUMNS if c in frame.columns]
    table(
        frame.drop(columns=[*metrics, *costs]),
        hide_index=True,
        width="stretch",
        column_config={
            "reference": st.column_config.CheckboxColumn("reference"),
            "items": count_column("items"),
            "Pareto front": st.column_config.CheckboxColumn("Pareto front"),
            "compare": st.column_config.LinkColumn(
                "against the reference", display_text="Open in Compare", help="Compare: A the reference, B this one"
            ),
        },
    )
    st.caption("Each metric: mean [95% t interval] over the items scored.")
    quality = frame.set_index("combination")[metrics].T
    quality.index.name = "metric"
    table(quality, width="stretch")
    st.caption(
        "Latency, tokens and cost are original costs: a question answered from the shared response cache counts "
        "what it cost when first computed, and replayed is the share of its calls the cache answered."
    )
    table(
        frame[["combination", *costs]],
        hide_index=True,
        width="stretch",
        column_config={
            "calls": count_column("calls"),
            "cache hits": count_column("cache hits"),
            "tokens": count_column("tokens"),
            "cost": st.column_config.NumberColumn("cost", format="%.4f", help="estimated, at the prices set"),
            "p50 latency (ms)": ms_column("p50 latency (ms)"),
            "p95 latency (ms)": ms_column("p95 latency (ms)"),
            "replayed": st.column_config.NumberColumn(
                "replayed", format="percent", help="the share of calls replayed from the response cache"
            ),
        },
    )


def best_frame(board: Leaderboard) -> pd.DataFrame:
    rows = {r.label: r for r in board.rows}
    return pd.DataFrame(
        [
            {
                "metric": label_of(metric),
                "best combination": label,
                "mean [95% interval]": interval_text(rows[label].metrics.get(metric)),
                "evaluation": rows[label].eval_name,
            }
            for metric, label in board.best.items()
        ],
        columns=["metric", "best combination", "mean [95% interval]", "evaluation"],
    )


def best_table(board: Leaderboard) -> None:
    st.subheader("Best combination per metric")
    if not board.best:
        st.info("No combination has scores yet.")
        return
    table(best_frame(board), hide_index=True, width="stretch")


def tests_frame(board: Leaderboard) -> pd.DataFrame:
    records = []
    for r in board.rows:
        for metric, t in r.tests.items():
            records.append(
                {
                    "metric": label_of(metric),
                    "combination": r.label,
                    "shared items": t.n,
                    "difference": t.delta,
                    "95% interval": None if t.ci_low is None else f"[{t.ci_low:+.2f}, {t.ci_high:+.2f}]",
                    "p": t.p_value,
                    "Holm-adjusted p": t.p_adjusted,
                    "verdict": t.verdict,
                }
            )
    columns = ["metric", "combination", "shared items", "difference", "95% interval", "p", "Holm-adjusted p", "verdict"]
    return pd.DataFrame(records, columns=columns)


def tests_table(board: Leaderboard) -> None:
    st.subheader("Against the reference")
    st.caption(
        escape_markdown(
            f"Each combination against {board.reference}, per metric, over the items both scored: the paired tests "
            "of the regression check (a paired t-test, or the claim-level test for faithfulness), two-sided, with "
            f"Holm's correction across all {plural(board.n_tests, 'test')} at alpha {board.alpha:g}. Better or worse: "
            "significant after the correction; negligible: significant but smaller than the setting min effect. A "
            "test needs at least 5 shared items."
        )
    )
    untested = [r.label for r in board.rows if not r.is_reference and not r.tests]
    if untested:
        st.caption(
            escape_markdown("Not tested (not run yet, or judged under another judge pin): " + ", ".join(untested))
        )
    frame = tests_frame(board)
    if frame.empty:
        return
    table(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "shared items": count_column("shared items"),
            "difference": delta_column("difference", help="combination − reference"),
            "p": st.column_config.NumberColumn("p", format="%.3f", help="two-sided, before the correction"),
            "Holm-adjusted p": st.column_config.NumberColumn("Holm-adjusted p", format="%.3f"),
        },
    )


def chart_frame(board: Leaderboard) -> pd.DataFrame:
    """The combinations with a mean of the quality metric and a p50 latency: the chart's points."""
    quality = board.quality_metric
    records = [
        {
            "combination": r.label,
            "quality": r.metrics[quality].mean,
            "latency_ms": r.latency_p50_ms,
            "front": r.pareto,
            "quality_text": fmt_score(r.metrics[quality].mean),
            "latency_text": fmt_ms(r.latency_p50_ms),
            "cache_hits": f"{r.cache_hits:,} of {r.calls:,} calls replayed",
        }
        for r in board.rows
        if quality in r.metrics and r.metrics[quality].mean is not None and r.latency_p50_ms is not None
    ]
    return pd.DataFrame(records)


def quality_chart(board: Leaderboard) -> None:
    st.subheader("Quality against latency")
    quality = board.quality_metric
    frame = chart_frame(board) if quality else pd.DataFrame()
    if frame.empty:
        st.info("No combination has both a mean and a latency yet.")
        return
    name = label_of(quality)
    fields = [
        ("combination", "combination"),
        ("quality_text", name),
        ("latency_text", "p50 latency"),
        ("cache_hits", "replayed from the cache"),
    ]
    pc.draw(pareto_figure(frame, name, fields), "pareto")
    st.caption(
        escape_markdown(
            f"Pareto front (no other combination is at least as good on both {name} and latency, and better on "
            "one), fastest first, by latencies first measured (never a replay's): "
            + (", ".join(board.pareto) or "none")
        )
    )


@st.cache_resource(max_entries=8, show_spinner=False)
def pareto_figure(frame: pd.DataFrame, name: str, fields: list[tuple[str, str]]):
    """The combinations' quality against p50 latency, the front marked (a plotly figure, kept by its points)."""
    return pc.pareto_scatter(
        frame,
        "latency_ms",
        "quality",
        "front",
        "combination",
        f"{name} against p50 latency",
        fields,
        x_title="p50 latency per question (ms)",
        y_title=name,
    )
