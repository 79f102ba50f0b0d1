"""The hallucination detector's figures on the labelled development sets (../shared/datasets).

The deterministic pre-check (`--verifier precheck`) with the answer's own sentences as claims
(`--claims answer`, no model call), and with the product's extracted claims (`--claims llm`); here the
extractor is the fake Ollama's rule (one claim per sentence of three words or more), since no real model
runs in the benchmarks, so that row measures the pre-check on extractor-shaped claims, not llama3.2's.
Targets (issue 25): the pre-check's decisive flags keep precision >= 0.90 on each RAGTruth style (QA, summaries,
data-to-text), recall reported; HaluEval precision >= 0.95. These are tuning figures; the cross-validated ones
come from `python -m bench.precheck_cv` (each style held out in turn).
"""

from __future__ import annotations

from bench.common import ROOT, Figure, bench_environment
from pipeline.config import load_settings
from pipeline.detector.bench import run_detector_bench
from store.db import get_database

DATASETS = ROOT.parent / "shared" / "datasets"
TARGETS = {
    "ragtruth_qa_dev.jsonl": (0.90, None),
    "ragtruth_summary_dev.jsonl": (0.90, None),
    "ragtruth_data2txt_dev.jsonl": (0.90, None),
    "halueval_qa_dev.jsonl": (0.95, None),
}


def _interval(ci) -> str:
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "[n/a]"


def run() -> list[Figure]:
    figures = []
    with bench_environment(WORKBENCH_CACHE_ENABLED="false"):
        settings = load_settings()
        db = get_database(settings)
        for name, (precision_target, recall_target) in TARGETS.items():
            path = DATASETS / name
            if not path.exists():
                figures.append(Figure(f"detector on {name}", 0, "", note=f"{path} is not present: skipped"))
                continue
            for claims in ("answer", "llm"):
                _, m = run_detector_bench(settings, db, str(path), "precheck", claims)
                counts = f"TP {m['tp']} FP {m['fp']} FN {m['fn']} of {m['n']}"
                label = f"precheck --claims {claims}, {name.removesuffix('_dev.jsonl')}"
                figures.append(
                    Figure(
                        f"{label}: precision",
                        m["precision"],
                        "",
                        precision_target if claims == "answer" else None,
                        lower_is_better=False,
                        note=f"Wilson 95% {_interval(m['precision_ci'])}; {counts}",
                    )
                )
                figures.append(
                    Figure(
                        f"{label}: recall",
                        m["recall"],
                        "",
                        recall_target if claims == "answer" else None,
                        lower_is_better=False,
                        note=f"Wilson 95% {_interval(m['recall_ci'])}",
                    )
                )
                for model, f in m["by_model"].items() if claims == "answer" else ():
                    if not f["tp"] + f["fp"]:
                        figures.append(
                            Figure(
                                f"  {model} ({f['n']} answers, {f['hallucinated']} hallucinated): flagged",
                                0,
                                "answers",
                                note=f"nothing flagged: precision undefined; recall 0 {_interval(f['recall_ci'])}",
                            )
                        )
                        continue
                    figures.append(
                        Figure(
                            f"  {model} ({f['n']} answers, {f['hallucinated']} hallucinated): precision",
                            f["precision"],
                            "",
                            note=f"Wilson 95% {_interval(f['precision_ci'])}; recall {f['recall']:.2f} "
                            f"{_interval(f['recall_ci'])}; TP {f['tp']} FP {f['fp']} FN {f['fn']} (for information)",
                        )
                    )
        db.close()
    return figures


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
