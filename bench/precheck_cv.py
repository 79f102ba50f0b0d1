"""Which of the pre-check's signals may decide on their own: precision per signal on the three RAGTruth
development sets (QA, summaries, data-to-text; ../shared/datasets), with 2-fold cross-validation by source.

The answer's own sentences are the claims (as `bench-detector --claims answer`); an answer is flagged by a
signal when one of its claims raises it. Records are split by their source (the passage or business record
the answers were written from, `ragtruth-<source>-<n>`): sources sorted, alternately into part A and part B,
so all answers over one source fall in the same part. On each part in turn (tuning) a signal is chosen to
decide when its precision there is >= 0.90 on every set, and the novel-word thresholds are chosen as the pair
with the most true flags at that precision; the choice is then measured on the other part (held apart).
A signal may decide in the product only when it holds >= 0.90 on every held-apart part of every set.

    .venv/bin/python -m bench.precheck_cv [--json]

No model call; about 20 s.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from pipeline.detector.bench import answer_claims, wilson
from pipeline.verification.precheck import DECISIVE, SIGNAL_KINDS, signals

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SETS = {
    "qa": "ragtruth_qa_dev.jsonl",
    "summary": "ragtruth_summary_dev.jsonl",
    "data2txt": "ragtruth_data2txt_dev.jsonl",
}
TARGET = 0.90
SHARES = (0.6, 0.7, 0.75, 0.8, 0.9, 1.0)
MINIMA = tuple(range(4, 15))


def source(record_id: str) -> str:
    return record_id.rsplit("-", 1)[0]


def load(name: str) -> list[dict]:
    """Each answer with its label, part (0/1 by source) and, per claim, the signals raised (the novel-word
    signal as (novel, content words), thresholds applied later)."""
    rows = [json.loads(line) for line in (DATASETS / name).read_text(encoding="utf-8").splitlines() if line]
    sources = sorted({source(r["id"]) for r in rows})
    part = {s: i % 2 for i, s in enumerate(sources)}
    out = []
    for r in rows:
        claims = []
        for claim in answer_claims(r["answer"]):
            _, found = signals(claim, r["context"], r.get("question") or "", novel_share=0.0, novel_words_min=1)
            kinds = {s.kind for s in found if s.kind != "novel"}
            novel = [tuple(int(x) for x in s.token.split(":")[0].split(" of ")) for s in found if s.kind == "novel"]
            claims.append((kinds, novel[0] if novel else None))
        out.append({"label": r["label"], "part": part[source(r["id"])], "claims": claims})
    return out


def flagged(record: dict, kinds: set[str], novel: tuple[float, int] | None) -> bool:
    for claim_kinds, counts in record["claims"]:
        if claim_kinds & kinds:
            return True
        if novel and counts and counts[0] >= novel[1] and counts[0] / counts[1] >= novel[0]:
            return True
    return False


def hinted(record: dict) -> bool:
    """Raised some signal at the shipped settings (decisive or not)."""
    return any(
        kinds or (counts and counts[0] >= 8 and counts[0] / counts[1] >= 0.75) for kinds, counts in record["claims"]
    )


def figures(records: list[dict], kinds: set[str], novel=None) -> dict:
    tp = sum(r["label"] for r in records if flagged(r, kinds, novel))
    fp = sum(1 - r["label"] for r in records if flagged(r, kinds, novel))
    positives = sum(r["label"] for r in records)
    return {
        "n": len(records),
        "tp": tp,
        "fp": fp,
        "precision": tp / (tp + fp) if tp + fp else None,
        "precision_ci": wilson(tp, tp + fp),
        "recall": tp / positives if positives else None,
        "recall_ci": wilson(tp, positives),
    }


def holds(f: dict) -> bool:
    return f["precision"] is None or f["precision"] >= TARGET


def tune(parts: dict[str, list[dict]]) -> tuple[set[str], tuple[float, int] | None]:
    """The signals, and the novel-word thresholds, that hold >= TARGET on every set of this part."""
    kinds = {k for k in SIGNAL_KINDS if k != "novel" and all(holds(figures(rs, {k})) for rs in parts.values())}
    best, best_tp = None, 0
    for share in SHARES:
        for minimum in MINIMA:
            per_set = [figures(rs, set(), (share, minimum)) for rs in parts.values()]
            tp = sum(f["tp"] for f in per_set)
            if all(holds(f) for f in per_set) and tp > best_tp:
                best, best_tp = (share, minimum), tp
    return kinds, best


def run() -> dict:
    data = {key: load(name) for key, name in SETS.items() if (DATASETS / name).exists()}
    report: dict = {"per_signal": defaultdict(dict), "folds": [], "shipped": {}, "target": TARGET}
    for key, records in data.items():
        for kind in SIGNAL_KINDS:
            novel = (0.75, 8) if kind == "novel" else None
            report["per_signal"][kind][key] = [
                figures([r for r in records if r["part"] == p], {kind} - {"novel"}, novel) for p in (0, 1)
            ]
    for tuning in (0, 1):
        kinds, novel = tune({k: [r for r in rs if r["part"] == tuning] for k, rs in data.items()})
        fold = {"tuned_on": "AB"[tuning], "decisive": sorted(kinds), "novel": novel, "sets": {}}
        for key, records in data.items():
            fold["sets"][key] = {
                "tuning": figures([r for r in records if r["part"] == tuning], kinds, novel),
                "held_apart": figures([r for r in records if r["part"] != tuning], kinds, novel),
            }
        report["folds"].append(fold)
    reliable = sorted(
        k for k, per_set in report["per_signal"].items() if all(holds(f) for parts in per_set.values() for f in parts)
    )
    report["reliable"] = reliable
    report["shipped_decisive"] = sorted(DECISIVE)
    for key, records in data.items():
        decisive = set(DECISIVE) - {"novel"}
        novel = (0.75, 8) if "novel" in DECISIVE else None
        whole = figures(records, decisive, novel)
        whole["answers_with_hints_only"] = sum(hinted(r) and not flagged(r, decisive, novel) for r in records)
        report["shipped"][key] = {
            "whole_set": whole,
            "parts": [figures([r for r in records if r["part"] == p], decisive, novel) for p in (0, 1)],
        }
    return report


def bench_figures() -> list:
    """`make bench`'s lines: the shipped pre-check's decisive precision on each held-apart part of each set."""
    from bench.common import Figure

    out = []
    for key, shipped in run()["shipped"].items():
        for part, f in zip("AB", shipped["parts"], strict=True):
            if f["precision"] is not None:
                note = f"recall {f['recall']:.3f}, TP {f['tp']} FP {f['fp']}"
                out.append(
                    Figure(f"pre-check decisive precision, {key} part {part}", f["precision"], "", TARGET, False, note)
                )
    return out


def _fmt(f: dict) -> str:
    if f["precision"] is None:
        return f"nothing flagged (recall 0 of {f['n']})"
    lo, hi = f["precision_ci"]
    return f"P {f['precision']:.3f} [{lo:.2f}, {hi:.2f}] R {f['recall']:.3f} (TP {f['tp']} FP {f['fp']})"


def main(argv: list[str]) -> int:
    report = run()
    if "--json" in argv:
        print(json.dumps(report, indent=1, default=list))
        return 0
    print(f"Per signal, answer-level precision on part A / part B (target >= {TARGET}; '-' nothing flagged):")
    for kind, per_set in report["per_signal"].items():
        cells = []
        for key, (a, b) in per_set.items():
            cells.append(
                f"{key} "
                + " / ".join(
                    "-" if f["precision"] is None else f"{f['precision']:.2f} ({f['tp']}/{f['fp']})" for f in (a, b)
                )
            )
        print(f"  {kind:8s} " + "; ".join(cells))
    print(f"reliable on every held-apart part: {', '.join(report['reliable'])}")
    for fold in report["folds"]:
        print(
            f"tuned on part {fold['tuned_on']}: decisive {', '.join(fold['decisive'])}; "
            f"novel thresholds {fold['novel']}"
        )
        for key, f in fold["sets"].items():
            print(f"  {key:9s} tuning {_fmt(f['tuning'])}  |  held apart {_fmt(f['held_apart'])}")
    print(f"shipped decisive signals: {', '.join(report['shipped_decisive'])}")
    for key, f in report["shipped"].items():
        w = f["whole_set"]
        print(
            f"  {key:9s} whole set (tuning figure) {_fmt(w)}; answers with hints only {w['answers_with_hints_only']}; "
            f"part A {_fmt(f['parts'][0])}; part B {_fmt(f['parts'][1])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
