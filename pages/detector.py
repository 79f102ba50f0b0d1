"""Detector benchmarks: run one on the shipped sample or an upload, and compare runs side by side."""

import pandas as pd
import streamlit as st

from pages.views.charts import bars, heatmap, lines
from pages.views.common import page_setup
from pages.views.markup import escape_markdown, fmt_pct, plural
from pages.views.tables import count_column, ms_column, score_column, table
from pipeline.detector.bench import detector_verifiers, run_detector_bench
from pipeline.detector.results import (
    SAMPLE,
    detector_results,
    list_detector_runs,
    run_on_upload,
    verdict_rows,
    with_interval,
)
from pipeline.errors import WorkbenchError

settings, db = page_setup(__file__)
st.caption(
    "How far to trust the hallucination detector: run it on answers labelled 1 (the answer contains "
    "something its context does not support) or 0, and see its precision and recall. An answer is flagged "
    "when any of its claims is not supported. From the command line: "
    "`python -m pipeline bench-detector FILE.jsonl --verifier all`."
)

with st.form("run"):
    st.subheader("Run a benchmark")
    source = st.radio(
        "Labelled answers",
        ["sample", "upload"],
        format_func={
            "sample": "the shipped sample: 60 answers from RAGTruth and HaluEval (MIT), data/detector/",
            "upload": "a JSONL file of {id, question?, context, answer, label}",
        }.get,
    )
    upload = st.file_uploader("JSONL file (with 'upload')", type=["jsonl"])
    left, right = st.columns(2)
    verifiers = detector_verifiers()
    verifier = left.selectbox("Verifier", verifiers, index=verifiers.index("precheck"))
    claims = right.selectbox(
        "Claims",
        ["answer", "llm"],
        format_func={
            "answer": "the answer's sentences (no model call)",
            "llm": "extracted by the claim model",
        }.get,
    )
    start = st.form_submit_button("Run the benchmark", type="primary")

if start:
    bar = st.progress(0.0, text="starting…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"{done} of {total} answers")

    try:
        if source == "upload":
            if upload is None:
                st.error("Choose a JSONL file to upload first.")
                st.stop()
            run_id, metrics = run_on_upload(
                settings, db, upload.name, upload.getvalue(), verifier, claims, on_record=progress
            )
        else:
            run_id, metrics = run_detector_bench(settings, db, str(SAMPLE), verifier, claims, on_record=progress)
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)) + (f"  \nFix: {escape_markdown(exc.fix)}" if exc.fix else ""))
        st.stop()
    st.success(
        f"Run {run_id}: precision {with_interval(metrics['precision'], metrics['precision_ci'])}, "
        f"recall {with_interval(metrics['recall'], metrics['recall_ci'])} (95% Wilson intervals) on "
        f"{metrics['n']} answers."
    )

runs = list_detector_runs(db)
if not runs:
    st.info("No detector benchmarks yet.")
    st.stop()

# what each benchmark ran, then how it did: the seventeen columns in one table did not fit 1280 px
setup = pd.DataFrame(
    [
        {
            "run": r["id"],
            "dataset": r["dataset"],
            "verifier": r["verifier"],
            "claims": r["claims_from"],
            "scope": r["scope"],
            "pre-check": r["precheck"],
            "answers": r["n"],
            "created": r["created_at"],
        }
        for r in runs
    ]
)
table(
    setup,
    hide_index=True,
    width="stretch",
    column_config={
        "answers": count_column("answers"),
        "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm"),
    },
)
results = pd.DataFrame(
    [
        {
            "run": r["id"],
            "balanced accuracy": r["metrics"]["balanced_accuracy"],
            "precision 95%": with_interval(r["metrics"]["precision"], r["metrics"].get("precision_ci")),
            "recall 95%": with_interval(r["metrics"]["recall"], r["metrics"].get("recall_ci")),
            "F1": r["metrics"]["f1"],
            "LLM calls / answer": r["metrics"]["llm_calls_per_answer"],
            "prompt tokens / answer": r["metrics"]["prompt_tokens_per_answer"],
            "latency ms / answer": r["metrics"]["latency_ms_per_answer"],
        }
        for r in runs
    ]
)
table(
    results,
    hide_index=True,
    width="stretch",
    column_config={
        **{c: score_column(c) for c in ("balanced accuracy", "F1", "LLM calls / answer")},
        "prompt tokens / answer": count_column("prompt tokens / answer"),
        "latency ms / answer": ms_column("latency ms / answer", help="The median over the answers."),
    },
)

chosen = st.selectbox(
    "Run",
    [r["id"] for r in runs],
    format_func=lambda i: next(f"{r['id']}: {r['verifier']} on {r['dataset']}" for r in runs if r["id"] == i),
)
metrics = next(r["metrics"] for r in runs if r["id"] == chosen)
left, right = st.columns(2)
matrix = [[metrics["tn"], metrics["fp"]], [metrics["fn"], metrics["tp"]]]
left.altair_chart(
    heatmap(matrix, ["no", "yes"], ["faithful", "hallucinated"], "flagged", "label", "Confusion matrix"),
    width="stretch",
)
sweep = pd.DataFrame(metrics["sweep"])
if (sweep["threshold"] < 1).any():  # a faithfulness between 0 and 1 to move the threshold over
    right.altair_chart(
        lines(
            sweep.rename(columns={"f1": "F1", "balanced_accuracy": "balanced accuracy"}),
            "threshold",
            ["precision", "recall", "F1", "balanced accuracy"],
            "Flag when faithfulness < threshold",
        ),
        width="stretch",
    )
else:  # every answer's faithfulness is 1 or none: a curve over thresholds would be one point at x = 1
    point = pd.DataFrame(
        {
            "measure": ["precision", "recall", "F1", "balanced accuracy"],
            "value": [metrics[k] for k in ("precision", "recall", "f1", "balanced_accuracy")],
        }
    )
    right.altair_chart(bars(point, "measure", "value", "One operating point"), width="stretch")
    right.caption(
        "No threshold to move: no answer got a faithfulness between 0 and 1 (the pre-check decides a claim or "
        "leaves it undecided; it gives no score in between), so this run has one operating point: flag an answer "
        "when any of its claims is not supported."
    )
if metrics.get("flagged_by_precheck_truly_hallucinated") is not None:
    st.caption(
        f"Of the answers the pre-check flagged, {fmt_pct(metrics['flagged_by_precheck_truly_hallucinated'], 1)} are "
        f"truly hallucinated; it decided {metrics['claims_decided_by_precheck']} of "
        f"{plural(metrics['claims'], 'claim')} without a model call."
    )
if metrics.get("by_model"):
    st.markdown("**By writing model** (`meta.model`; for information: some have very few hallucinated answers)")
    table(
        pd.DataFrame(
            [
                {
                    "model": model,
                    "answers": m["n"],
                    "hallucinated": m["hallucinated"],
                    "TP / FP / FN": f"{m['tp']} / {m['fp']} / {m['fn']}",
                    "precision 95%": with_interval(m["precision"], m["precision_ci"]) if m["tp"] + m["fp"] else "n/a",
                    "recall 95%": with_interval(m["recall"], m["recall_ci"]) if m["tp"] + m["fn"] else "n/a",
                }
                for model, m in metrics["by_model"].items()
            ]
        ),
        hide_index=True,
        width="stretch",
    )
results = detector_results(db, chosen)
wrong = st.toggle("Only misclassified answers")
if wrong:
    results = [r for r in results if r["label"] != r["predicted"]]
st.markdown("**Answers**")
columns = ["record_id", "label", "predicted", "faithfulness", "n_claims", "decided_by_precheck", "llm_calls"]
table(
    pd.DataFrame(results, columns=[*columns, "latency_ms"]),
    hide_index=True,
    width="stretch",
    column_config={
        "record_id": "answer",
        "faithfulness": score_column("faithfulness"),
        "n_claims": count_column("claims"),
        "decided_by_precheck": count_column("decided by the pre-check"),
        "llm_calls": count_column("LLM calls"),
        "latency_ms": ms_column("latency ms"),
    },
)
st.markdown("**Claims and their verdicts**")
table(
    pd.DataFrame(
        verdict_rows(results), columns=["record_id", "label", "predicted", "claim #", "claim", "verdict", "by"]
    ),
    hide_index=True,
    width="stretch",
)
