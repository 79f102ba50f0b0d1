"""Widgets of the Evaluate page: the start form, live progress, and a run's report."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import streamlit as st

from pages.views.call_stats import show_evaluation_call_stats
from pages.views.common import show_error
from pages.views.job_notices import follow_jobs
from pages.views.markup import escape_markdown, fmt_count, fmt_ms, fmt_on_scale, fmt_pct, fmt_score, plural
from pages.views.tables import score_column, table
from pipeline.errors import WorkbenchError
from pipeline.evaluation import datasets
from pipeline.evaluation.causes import depends_on_text
from pipeline.evaluation.conversation_report import per_turn_rows, share_sentence
from pipeline.evaluation.dataset import Dataset, checked, load_dataset, parse_file
from pipeline.evaluation.jobs import EvalJob, jobs, start_job
from pipeline.evaluation.registry import UNIT, get_metric, label_of, metric_names, scale_of
from pipeline.evaluation.runner import EvalReport, pipeline_of, weak_slices, what_it_measured, worst_items
from pipeline.verification.sentence_first import claims_label
from pipeline.vocabulary import status_word

TILES_PER_ROW = 5


FOLDER, UPLOAD, STORED = "From data/eval", "Upload", "Stored dataset"


def choose_dataset(folder: Path, db) -> Dataset | None:
    """A file from data/eval, an uploaded file (either is kept as a dataset version when the evaluation starts), or
    a version of a dataset kept in the store."""
    files = sorted(p for p in folder.glob("*") if p.suffix.lower() in (".jsonl", ".csv", ".parquet"))
    source = st.radio("Dataset", [FOLDER, UPLOAD, STORED], horizontal=True)
    try:
        if source == STORED:
            return choose_stored(db)
        if source == UPLOAD:
            upload = st.file_uploader(
                "JSONL, CSV or Parquet: a golden set (id, question, reference, tags), or rows that carry their answer "
                "and contexts (our, Ragas's or DeepEval's column names)",
                type=["jsonl", "csv", "parquet"],
            )
            if upload is None:
                return None
            return checked(parse_file(upload.getvalue(), upload.name), upload.name)
        if not files:
            st.info("No datasets in data/eval yet; upload one.")
            return None
        path = st.selectbox("File", files, format_func=lambda p: p.name)
        return load_dataset(path)
    except WorkbenchError as exc:
        show_error(exc)
        return None


def choose_stored(db) -> Dataset | None:
    """A dataset kept in the store, by name, and one of its versions (the latest by default)."""
    listed = {info.name: (info, count) for info, count in datasets.listing(db)}
    if not listed:
        st.info(
            "No datasets kept in the store yet. A file evaluated here or with `python -m pipeline eval` is kept as "
            "one, and so is one imported with `python -m pipeline datasets import FILE`."
        )
        return None
    left, right = st.columns([3, 1])
    name = left.selectbox(
        "Stored dataset",
        list(listed),
        key="eval_stored_name",
        format_func=lambda n: f"{n} ({plural(listed[n][1], 'version')}, latest {plural(listed[n][0].n_items, 'item')})",
    )
    numbers = [v.version for v in datasets.versions(db, name)]  # newest first
    version = right.selectbox(
        "Version",
        numbers,
        key=f"eval_stored_version:{name}",
        format_func=lambda v: f"{v} (latest)" if v == numbers[0] else str(v),
        help="Each version is a dataset of its own: runs are compared (baselines, Trends) only with runs of the same "
        "version.",
    )
    return datasets.load(db, name, version)


def show_mapping(dataset: Dataset) -> None:
    """How the file's columns were read, whether its answers are scored as given, and its bad rows by line. Every
    name from the file is shown as text: escaped, or in a table, which does not read Markdown."""
    mapping = dataset.mapping
    if mapping is not None:
        st.caption(escape_markdown(f"{dataset.name}: {mapping.convention} column names · {dataset.how_answered}"))
        table(
            pd.DataFrame(mapping.describe(), columns=["field", "read from the file's column"]),
            hide_index=True,
        )
        for note in mapping.notes:
            st.caption(escape_markdown(f"Note: {note}"))
        if mapping.unused:
            st.caption(escape_markdown(f"Columns not read: {', '.join(mapping.unused)}"))
    if dataset.bad_rows:
        st.warning(escape_markdown(f"{plural(len(dataset.bad_rows), 'bad row')} skipped (listed by line below)"))
        table(
            pd.DataFrame([(b.line, b.reason) for b in dataset.bad_rows], columns=["line", "reason"]),
            hide_index=True,
        )


def start_form(settings, db, dataset: Dataset) -> None:
    show_mapping(dataset)
    default_name = f"{Path(dataset.name).stem}-{time.strftime('%Y%m%d-%H%M')}"
    with st.form("start"):
        # keyed, so what the user typed survives reruns (the default name changes every minute)
        name = st.text_input("Run name (the same name resumes a run)", value=default_name, key="eval_name")
        pipeline = None
        if dataset.given_answers:  # keyed by the file: another file starts from its own default
            pipeline = st.text_input(
                "Pipeline",
                value=pipeline_of(dataset, None),
                key=f"eval_pipeline:{dataset.name}",
                help="The pipeline that wrote these answers (default: the file's name). Trends and baselines keep "
                "each pipeline's runs apart.",
            )
        cols = st.columns(3)
        concurrency = cols[0].number_input("Concurrency", 1, 32, settings.eval_concurrency, key="eval_concurrency")
        limit = cols[1].number_input("Only the first N items (0 = all)", 0, len(dataset.items), 0, key="eval_limit")
        tags = cols[2].multiselect("Only items with tags", dataset.tags, key="eval_tags")
        every = metric_names()
        metrics = st.multiselect(
            "Metrics",
            every,
            default=every,
            format_func=label_of,
            key="eval_metrics",
            help="Every metric by default. A run resumed under the same name measures the metrics it was started "
            "with; choosing others for it is refused.",
        )
        fresh = fresh_checkbox("eval_fresh")
        where = dataset.name if dataset.version is None else f"{dataset.name}@{dataset.version}"
        st.caption(f"{len(dataset.items)} valid items in {escape_markdown(where)}")
        if st.form_submit_button("Start evaluation"):
            chosen = None if set(metrics) == set(every) else metrics  # None: a resumed run keeps its own
            run_settings = dataclasses.replace(settings, cache_read=False) if fresh else settings
            try:  # a file is kept as a dataset version (or pins the one with its content), so the run pins it
                job, line = start_job(
                    run_settings, db, dataset, name, int(concurrency), chosen, pipeline, limit or None, tags
                )
            except WorkbenchError as exc:
                show_error(exc)
                return
            st.caption(escape_markdown(f"Evaluating {line}"))
            watch(job)
            st.session_state[NOTICES] = {}  # a new run replaces the messages of earlier ones


def fresh_checkbox(key: str) -> bool:
    """The Fresh run checkbox of a start form: True bypasses the response cache for reading (and refills it)."""
    return st.checkbox(
        "Fresh run: ask the model every time",
        key=key,
        help="Do not read the response cache: every call reaches the model and its reply refills the cache, so the "
        "latency figures are this run's own. Unticked, calls the cache holds are replayed, and their latency and "
        "cost are reported as first measured.",
    )


def job_progress(job: EvalJob) -> None:
    p = job.progress
    done = p.finished if p else 0
    total = p.total if p else job.total
    left = p.remaining_s() if p else None
    label = (
        f"{job.name}: {done} of {total} items · {fmt_ms((p.elapsed_s() if p else 0) * 1000)} elapsed · "
        f"{'?' if left is None else fmt_ms(left * 1000)} left · {p.failed if p else 0} failed"
    )
    st.progress(done / total if total else 0.0, text=escape_markdown(label))
    if p and p.last_error:
        st.caption(escape_markdown(f"Last failure: {p.last_error}"))
    if job.running and st.button("Cancel", key=f"cancel-{job.name}"):
        job.cancel.set()
        st.info("Cancelling: items in progress finish, then the run stops. Start it again to resume.")


# Session state: the jobs this session started or saw running, and how those that ended ended (shown until
# dismissed or replaced). Jobs live in the process, shared by every browser session; these are per session.
WATCHED, NOTICES, SHOW = "eval_watched", "eval_notices", "eval_show"
SELECTED = "eval_selected"  # the Evaluation selectbox's key


def watch(job: EvalJob) -> None:
    st.session_state.setdefault(WATCHED, set()).add(job.serial)


REFRESH_S = 1.0  # how often the progress of a running evaluation is redrawn


def live_progress() -> None:
    """Progress of the running evaluations, redrawn every REFRESH_S while one runs, and how watched ones ended.
    Only while one runs: a timed fragment reruns in the browser until the next full run, so one set up with
    nothing running reran the page every second forever (issue 29). When the last job ends its fragment run
    reruns the whole page, which sets it up again without a timer. A job another browser session starts shows
    here at this session's next full run (any click), then refreshes."""
    running = any(job.running for job in jobs())
    st.fragment(progress_body, run_every=REFRESH_S if running else None)()


def progress_body() -> None:
    follow_jobs(jobs(), WATCHED, NOTICES, job_progress, show_notice, show_when_reported)


def show_when_reported(job: EvalJob) -> None:
    """An evaluation that ended with an outcome is the one the report shows next."""
    if job.outcome is not None:
        st.session_state[SHOW] = job.name


def show_notice(job: EvalJob) -> None:
    """How a job this session watched ended: its outcome, or the error that stopped it with its fix."""
    if job.error is not None:
        if isinstance(job.error, WorkbenchError):
            show_error(WorkbenchError(f"Evaluation {job.name} stopped: {job.error.message}", job.error.fix))
        else:
            st.error(escape_markdown(f"Evaluation {job.name} stopped by an unexpected error: {job.error!r}"))
        return
    outcome = job.outcome
    p = outcome.progress
    text = f"Evaluation {job.name}: {outcome.status} · {p.done} done, {p.failed} failed of {p.total} items"
    if isinstance(outcome.regressions, str):
        text += f" · not compared with a baseline: {outcome.regressions}"
    elif outcome.regressions:
        text += f" · {plural(len(outcome.regressions), 'regression alert')} opened: see Trends"
    elif outcome.status == "finished":
        text += " · no regression alert"
    if outcome.below_floor:  # apart from the regressions: a floor breach is not one
        text += " · below floor: " + ", ".join(floor_text(c) for c in outcome.below_floor)
    shown = st.success if outcome.status == "finished" else st.warning  # failures, or cancelled
    shown(escape_markdown(text))


def choose_evaluation(names: list[str]) -> str | None:
    """The evaluation to report: the one that just finished, else the one the URL names (?eval=NAME, kept in
    step with the choice so the address can be shared or reloaded), else the newest."""
    wanted = st.query_params.get("eval")
    if wanted is not None and wanted not in names:
        st.error(
            f"There is no evaluation {escape_markdown(repr(wanted))}: it may have been renamed, or the link is "
            "mistyped. Choose one below."
        )
    if not names:
        return None
    shown = st.session_state.pop(SHOW, None) or wanted
    if shown in names:
        st.session_state[SELECTED] = shown
    elif st.session_state.get(SELECTED) not in names:
        st.session_state.pop(SELECTED, None)
    name = st.selectbox("Evaluation", names, key=SELECTED, on_change=follow_choice)
    if name != wanted and (wanted is None or wanted in names):
        st.query_params["eval"] = name
    return name


def follow_choice() -> None:
    st.query_params["eval"] = st.session_state[SELECTED]


def show_report(result: EvalReport) -> None:
    e = result.eval_run
    st.caption(
        escape_markdown(
            f"{e.dataset_label} · {e.status} · judge {e.judge_model} ({e.judge_prompt_version}) · "
            f"{fmt_count(e.n_items)} items · wall {fmt_ms(e.wall_s * 1000)} · {claims_label(e.config)}"
        )
    )
    # a metric that applied to no item (judge rewrite on single questions) gets no tile
    tiles = [row for row in result.metrics if row["n"] or row["invalid"] or not row["not_applicable"]]
    # at most TILES_PER_ROW tiles a row: nine in one row cut their labels off at 1280 px
    for start in range(0, len(tiles), TILES_PER_ROW):
        row_metrics = tiles[start : start + TILES_PER_ROW]
        for col, row in zip(st.columns(TILES_PER_ROW), row_metrics, strict=False):
            col.metric(
                label_of(row["metric"]), fmt_on_scale(row["mean"], scale_of(row["metric"])), help=metric_help(row)
            )
    if result.below_floor:
        st.warning(
            escape_markdown("Below the floor you set: " + "; ".join(floor_text(c) for c in result.below_floor))
            + " (not a regression)",
            icon=":material/vertical_align_bottom:",
        )
        st.caption(
            "Floors are minimum means you set on Settings & health.",
            help="The setting `floors` (e.g. faithfulness=0.7): a metric whose mean falls below its floor is flagged "
            "whatever its baseline.",
        )
        st.page_link("pages/settings.py", label="Change the floors", icon=":material/tune:")
    if result.cause is not None:  # what changed since the baseline comes first: levels alone mislead
        st.warning(escape_markdown(f"Since the baseline {result.baseline}: {result.cause.sentence}"))
    if result.detectable:  # what the comparison could have seen: "no regression" means little without it
        st.caption(
            escape_markdown(f"Against the baseline {result.baseline}: " + "; ".join(result.detectable)),
            help="The minimum detectable drop: the true drop the regression check would alert on with 80% "
            "probability, for this run's number of shared items and their variance (`python -m pipeline gate`).",
        )
    st.info(f"Diagnosis: {escape_markdown(result.diagnosis.sentence)}")
    usage, rate = result.usage, result.judge_invalid_rate
    st.caption(
        f"Judge replies invalid after a retry: {result.judge_invalid} of {result.judge_total}"
        + (f" ({fmt_pct(rate, 1)})" if rate is not None else "")
        + f" · claim extraction errors {extraction_line(result)}"
        + f" · tokens {fmt_count(usage['prompt_tokens'])} + {fmt_count(usage['completion_tokens'])} · model time "
        f"{fmt_ms(usage['model_s'] * 1000)} · {escape_markdown(what_it_measured(result))}"
    )
    show_evaluation_call_stats(e.id)
    show_judge_variance(result)
    show_conversations(result)
    show_slices(result)
    show_items(result)


def show_judge_variance(result: EvalReport) -> None:
    """Per criterion, how far the judge agrees with itself over its repeats (only for a run judged K > 1 times)."""
    if not result.judge_variance:
        return
    st.subheader("Judge variance")
    rows = []
    for v in result.judge_variance:
        interval = (
            f"[{fmt_score(v.kappa_low)}, {fmt_score(v.kappa_high)}]"
            if v.kappa_low is not None
            else f"n/a ({v.why_not('kappa_low') or 'no interval'})"
        )
        rows.append(
            {
                "criterion": label_of(v.metric),
                "items": v.items,
                "repeats": v.repeats,
                "changed": fmt_pct(v.changed_share),
                "mean SD": fmt_score(v.mean_sd),
                "pooled SD": fmt_score(v.pooled_sd),
                "max range": fmt_score(v.max_range),
                "self-agreement κ": fmt_score(v.kappa) if v.kappa is not None else "n/a",
                "95% interval": interval,
                "invalid repeats": v.invalid_repeats,
            }
        )
    st.table(pd.DataFrame(rows).set_index("criterion"))
    st.caption(
        "Each item was judged several times per criterion; its score is the mean of its valid repeats. Changed: the "
        "share of items whose score differed between repeats.",
        help="Mean SD: the mean of the items' standard deviations over their repeats; pooled SD: the root of their "
        "mean variance (the judge's noise on one score). Self-agreement: the quadratic-weighted kappa of every pair "
        "of repeats of the same item, pooled over items (1: it never changes its score; near 0: no better than "
        "chance); its interval is a jackknife over items, withheld under 20 items.",
    )
    spread = [
        {"criterion": label_of(v.metric), "item": s.item_id, "repeats": ", ".join(f"{x:g}" for x in s.values)}
        for v in result.judge_variance
        for s in sorted(v.per_item, key=lambda s: -(s.range or 0))
        if s.range
    ]
    if spread:
        with st.expander(f"Items whose score changed between repeats ({len(spread)})"):
            table(pd.DataFrame(spread), hide_index=True, width="stretch")


def show_conversations(result: EvalReport) -> None:
    """Per turn and per conversation, for an evaluation whose items include turns of conversations."""
    figures = result.conversations
    if figures is None:
        return
    st.subheader("Conversations")
    numbers, rows = per_turn_rows(figures)
    per_turn = pd.DataFrame(
        [{"metric": label_of(row["metric"]), **{f"turn {n}": turn_cell(row, n) for n in numbers}} for row in rows]
    ).set_index("metric")
    st.caption("Per turn: each metric's mean over the turns with that number (n: turns scored).")
    st.table(per_turn)
    per_conversation = pd.DataFrame(
        [
            {
                "conversation": c["conversation"],
                "turns": c["turns"],
                "mean faithfulness": fmt_score(c["mean_faithfulness"]),
                "worst turn": "n/a"
                if c["worst_turn"] is None
                else f"turn {c['worst_turn']} ({fmt_score(c['worst_faithfulness'])})",
                "every turn faithful": "yes" if c["all_faithful"] else f"no ({c['faithful_turns']} of {c['turns']})",
                "link": f"/runs?conversation={quote(c['conversation_id'])}",
            }
            for c in figures.conversations
        ]
    )
    table(
        per_conversation,
        hide_index=True,
        width="stretch",
        column_config={"link": st.column_config.LinkColumn("turns", display_text="open")},
    )
    st.caption(escape_markdown(share_sentence(figures)))


def turn_cell(row: dict, turn: int) -> str:
    cell = row["turns"].get(turn)
    if cell is None:
        return ""
    return f"{fmt_on_scale(cell['mean'], scale_of(row['metric']))} (n={cell['n']})"


def floor_text(c) -> str:
    """A floor breach in a few words: metric mean (floor value)."""
    return f"{label_of(c.metric)} {fmt_score(c.new_value)} (floor {fmt_score(c.baseline_value)})"


def extraction_line(result: EvalReport) -> str:
    errors, claims = result.extraction_errors
    rate = result.extraction_error_rate
    return f"{errors} of {claims}" + (f" ({fmt_pct(rate, 1)}, not scored)" if rate else "")


def metric_help(row: dict) -> str:
    metric = get_metric(row["metric"])
    component = f"{metric.component} · {depends_on_text(row['metric'])} · " if metric else ""
    left_out = f" (abstained items left out: {row['abstained']})" if row.get("abstained") else ""
    return f"{component}n={row['n']}, invalid={row['invalid']}, not applicable={row['not_applicable']}{left_out}"


def show_slices(result: EvalReport) -> None:
    if not result.slices:
        return
    st.subheader("Slices by tag")
    # a metric a row, a tag a column: a dataset has a few tags, an evaluation up to nine metrics (as columns they
    # did not fit 1280 px)
    frame = pd.DataFrame(result.slices).pivot(index="metric", columns="tag", values="mean")
    order = {m: i for i, m in enumerate(metric_names())}
    frame = frame.loc[sorted(frame.index, key=lambda m: order.get(m, len(order)))]
    frame.index = [label_of(m) for m in frame.index]
    # every column in one format (two decimals, as the tiles): rounded alone, a column showed 1, 0 and 0.5
    table(frame, width="stretch", column_config={t: score_column(str(t)) for t in frame.columns})
    for tag, metric, mean in weak_slices(result):
        with st.expander(escape_markdown(f"Weak slice: {tag} on {label_of(metric)} ({fmt_score(mean)})")):
            worst = pd.DataFrame(worst_items(result, tag, metric))
            table(
                with_links(worst)[["item_id", metric, "question", "link"]],
                hide_index=True,
                column_config={
                    metric: score_column(label_of(metric)),
                    "link": st.column_config.LinkColumn("run", display_text="open"),
                },
            )


def with_links(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["link"] = frame["run_id"].map(lambda r: f"/runs?run_id={int(r)}" if pd.notna(r) else None)
    return frame


ITEMS_FILTER = "eval_items_filter"  # session state: whether the results' filter is open


def items_filter(frame: pd.DataFrame, score_columns: list[str]) -> tuple[list[str], str, float]:
    """(tags, the metric to find low scores on or "(any)", the score they are below). Its widgets are drawn when the
    filter is opened (a click reruns the page), so a first render does not load a multiselect's and a slider's
    scripts for a filter most visits do not use; closed, every item is listed."""
    opened = st.expander("Filter the items", icon=":material/filter_alt:", key=ITEMS_FILTER, on_change="rerun")
    if not opened.open:
        return [], "(any)", 0.0
    with opened:
        cols = st.columns(3)
        tags = cols[0].multiselect("Tags", sorted({t for ts in frame["tags"] for t in (ts or [])}))
        metric = cols[1].selectbox(
            "Low score on", ["(any)"] + score_columns, format_func=lambda m: m if m == "(any)" else label_of(m)
        )
        low, high = scale_of(metric) if metric != "(any)" else UNIT
        return tags, metric, cols[2].slider("Below", 0.0, 5.0, (low + high) / 2)


def show_items(result: EvalReport) -> None:
    st.subheader("Results")
    frame = pd.DataFrame(result.items)
    if frame.empty:
        st.info("No items finished yet.")
        return
    score_columns = [m for m in metric_names() if m in frame.columns]
    tags, metric, below = items_filter(frame, score_columns)
    if tags:
        frame = frame[frame["tags"].map(lambda ts: bool(set(tags) & set(ts or [])))]
    if metric != "(any)":
        frame = frame[frame[metric].notna() & (frame[metric] < below)].sort_values(metric)
    # the component metrics with the question, then the judge's criteria: all in one table did not fit 1280 px
    frame = with_links(frame)
    frame["status"] = [
        status_word(run) if item == "done" or not isinstance(item, str) else status_word(item)
        for item, run in zip(frame["item_status"], frame["run_status"], strict=True)
    ]
    judged = [m for m in score_columns if m.startswith("judge_")]
    components = [m for m in score_columns if m not in judged]
    failed = "error" in frame and frame["error"].notna().any()
    link = {"link": st.column_config.LinkColumn("run", display_text="open", width=50)}
    table(
        frame[["item_id", "status", *components, "question", *(["error"] if failed else []), "link"]],
        hide_index=True,
        width="stretch",
        column_config={**{m: score_column(label_of(m)) for m in components}, **link},
    )
    if judged:
        st.caption("The judge's scores (1-5) of the same items:")
        table(
            frame[["item_id", *judged, "link"]],
            hide_index=True,
            width="stretch",
            column_config={**{m: score_column(label_of(m).removeprefix("judge ")) for m in judged}, **link},
        )
