"""Detector benchmarks side by side: how far to trust the hallucination detector."""

import pandas as pd
import plotly.express as px
import streamlit as st

from pages.views.common import page_setup
from pipeline.detector.results import detector_results, list_detector_runs

settings, db = page_setup("Detector")
st.title("Detector benchmarks")
st.caption(
    "Run `python -m pipeline bench-detector FILE.jsonl --verifier all` to add runs. Label 1 = the answer "
    "contains a hallucination; an answer is flagged when any claim is not supported."
)

runs = list_detector_runs(db)
if not runs:
    st.info("No detector benchmarks yet.")
    st.stop()

rows = [
    {
        "run": r["id"],
        "dataset": r["dataset"],
        "verifier": r["verifier"],
        "claims": r["claims_from"],
        "scope": r["scope"],
        "pre-check": r["precheck"],
        "n": r["n"],
        "balanced accuracy": r["metrics"]["balanced_accuracy"],
        "precision": r["metrics"]["precision"],
        "recall": r["metrics"]["recall"],
        "F1": r["metrics"]["f1"],
        "LLM calls / answer": r["metrics"]["llm_calls_per_answer"],
        "prompt tokens / answer": r["metrics"]["prompt_tokens_per_answer"],
        "latency ms / answer": r["metrics"]["latency_ms_per_answer"],
        "created": r["created_at"],
    }
    for r in runs
]
st.dataframe(
    pd.DataFrame(rows),
    hide_index=True,
    width="stretch",
    column_config={
        c: st.column_config.NumberColumn(format="%.3f")
        for c in (
            "balanced accuracy",
            "precision",
            "recall",
            "F1",
            "LLM calls / answer",
            "prompt tokens / answer",
            "latency ms / answer",
        )
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
left.plotly_chart(
    px.imshow(
        matrix,
        text_auto=True,
        x=["flagged: no", "flagged: yes"],
        y=["label: faithful", "label: hallucinated"],
        color_continuous_scale="Blues",
        title="Confusion matrix",
    ),
    width="stretch",
)
sweep = pd.DataFrame(metrics["sweep"])
right.plotly_chart(
    px.line(
        sweep,
        x="threshold",
        y=["precision", "recall", "f1", "balanced_accuracy"],
        markers=True,
        title="Flag when faithfulness < threshold",
    ),
    width="stretch",
)
if metrics.get("flagged_by_precheck_truly_hallucinated") is not None:
    st.caption(
        f"Of the answers the pre-check flagged, {metrics['flagged_by_precheck_truly_hallucinated']:.1%} are "
        f"truly hallucinated; it decided {metrics['claims_decided_by_precheck']} of {metrics['claims']} "
        "claims without a model call."
    )
with st.expander("Every answer of this run"):
    results = pd.DataFrame(detector_results(db, chosen))
    wrong = st.toggle("Only misclassified answers")
    if wrong:
        results = results[results["label"] != results["predicted"]]
    st.dataframe(
        results[
            [
                "record_id",
                "label",
                "predicted",
                "faithfulness",
                "n_claims",
                "decided_by_precheck",
                "llm_calls",
                "prompt_tokens",
                "latency_ms",
                "verdicts",
            ]
        ],
        hide_index=True,
        width="stretch",
    )
