"""Measure the hallucination detector on labelled answers {id, question?, context, answer, label}.

label 1 = the answer contains a hallucination. An answer is flagged when any of its claims is not
supported by the context. The verifier is any registered one (pipeline/verification/verifiers/), run
after the pre-check when the configured chain has it; `precheck` runs alone, and `minicheck` means
minicheck_chunk or minicheck_context by the `verify_scope` setting. Claims no verifier decides are
unverified: not flagged and left out of faithfulness. Claims come from the claim extractor (`llm`) or
are the answer's own sentences (`answer`, deterministic).
"""

from __future__ import annotations

import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator
from sklearn.metrics import balanced_accuracy_score, confusion_matrix, precision_recall_fscore_support

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.dataset import BadRow
from pipeline.models.llm import LLM
from pipeline.text import is_meta_statement, sentences
from pipeline.verification.chain import effective_chain
from pipeline.verification.claims import EXTRACTION_ERROR, Verdict, scored_claims
from pipeline.verification.faithfulness import SUPPORTED, UNVERIFIED, FaithfulnessChecker, Passage, example_text
from pipeline.verification.prompts import EXTRACT_CLAIMS
from pipeline.verification.registry import verifier_names
from store.db import Database
from store.detector import save_detector_run
from store.llm_log import save_calls

MINICHECK_BY_SCOPE = {"chunk": "minicheck_chunk", "context": "minicheck_context"}


def detector_verifiers() -> list[str]:
    """What `--verifier` accepts: every registered verifier, and `minicheck` (by the scope setting)."""
    return [*verifier_names(), "minicheck"]


def detector_chain(settings: Settings, verifier: str) -> list[str]:
    """The chain a benchmark of `verifier` runs: the pre-check first when the configured chain has it."""
    if verifier not in detector_verifiers():
        raise InputError(f"unknown verifier {verifier!r}", fix=f"use one of {', '.join(detector_verifiers())} or all")
    name = MINICHECK_BY_SCOPE[settings.verify_scope] if verifier == "minicheck" else verifier
    first = ["precheck"] if "precheck" in effective_chain(settings) and name != "precheck" else []
    return first + [name]


class LabelledRecord(BaseModel):
    id: str
    question: str | None = None
    context: str
    answer: str
    label: int
    meta: dict | None = None

    @field_validator("label")
    @classmethod
    def _binary(cls, value: int) -> int:
        if value not in (0, 1):
            raise ValueError("must be 0 (faithful) or 1 (hallucinated)")
        return value


def load_labelled(path: str | Path) -> tuple[list[LabelledRecord], list[BadRow]]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} does not exist", fix="give a JSONL file of {id, question?, context, answer, label}")
    records, bad = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(LabelledRecord.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            bad.append(BadRow(number, f"{'.'.join(map(str, first['loc'])) or 'row'}: {first['msg']}"))
    if not records:
        raise InputError(
            f"{path} has no valid records ({len(bad)} bad)",
            fix="each line needs id, context, answer and label (0 or 1)",
        )
    return records, bad


def context_passages(context: str, per_chunk: int = 2) -> list[Passage]:
    """The context as chunks of `per_chunk` sentences, so per-chunk verification has chunks to pick from."""
    parts = [s.text for s in sentences(context)] or [context]
    chunks = [" ".join(parts[i : i + per_chunk]) for i in range(0, len(parts), per_chunk)]
    return [Passage(n, -n, "context", text, 0.0) for n, text in enumerate(chunks, start=1)]


def answer_claims(answer: str) -> list[str]:
    """The answer's own sentences and list items as claims; headings, lead-ins ("follow these steps:")
    and statements about the sources or the answer ("Passage 3 does not say") are not claims."""
    return [s.text for s in sentences(answer) if s.kind != "heading" and not is_meta_statement(s.text)]


def detect(
    record: LabelledRecord, settings: Settings, db: Database, chain: list[str], claims_from: str
) -> tuple[dict, LLM]:
    """One answer's verdicts and costs, and the LLM that made its calls (for the caller to store them)."""
    llm = LLM(settings, db, origin="detector")
    checker = FaithfulnessChecker(llm, settings, classify=False, chain=chain)
    start = time.perf_counter()
    model = str((record.meta or {}).get("model") or "") or None
    result = {"record_id": record.id, "label": record.label, "model": model, "error": None, "verdicts": []}
    passages = context_passages(record.context)
    if claims_from == "llm":
        extraction = checker.extract_claims(record.question or "", record.answer)
        result["error"] = extraction.invalid_reason
        checked = checker.verify_extracted(
            extraction.claims or [],
            record.answer,
            passages,
            question=record.question or "",
            examples=example_text(EXTRACT_CLAIMS),
        )
    else:
        claims = answer_claims(record.answer)
        checked = checker.verify_claims(claims, passages, question=record.question or "") if claims else []
    errors = [c for c in checked if c.verdict == EXTRACTION_ERROR]
    checked = scored_claims(checked)
    decided = [c for c in checked if c.verdict != UNVERIFIED]
    result.update(
        predicted=int(any(c.verdict in (Verdict.UNSUPPORTED, Verdict.CONTRADICTED) for c in checked)),
        n_claims=len(checked),
        faithfulness=sum(c.verdict == SUPPORTED for c in decided) / len(decided) if decided else None,
        decided_by_precheck=sum(c.verifier == "precheck" for c in decided),
        llm_calls=sum(not c.cache_hit for c in llm.calls),
        prompt_tokens=sum(c.prompt_tokens or 0 for c in llm.calls if not c.cache_hit),
        latency_ms=(time.perf_counter() - start) * 1000,
        verdicts=[
            {"claim": c.text, "verdict": c.verdict, "by": c.verifier, **({"hint": c.hint} if c.hint else {})}
            for c in checked
        ],
        extraction_errors=len(errors),
    )
    return result, llm


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval (95% by default) of a proportion; None when there is nothing to count."""
    if n <= 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def classification(labels: list[int], predicted: list[int]) -> dict:
    if not labels:
        return {
            "tp": 0,
            "fp": 0,
            "tn": 0,
            "fn": 0,
            "precision": 0.0,
            "recall": 0.0,
            "f1": 0.0,
            "balanced_accuracy": None,
            "precision_ci": None,
            "recall_ci": None,
        }
    tn, fp, fn, tp = confusion_matrix(labels, predicted, labels=[0, 1]).ravel().tolist()
    precision, recall, f1, _ = precision_recall_fscore_support(
        labels, predicted, pos_label=1, average="binary", zero_division=0
    )
    return {
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "precision": float(precision),
        "precision_ci": wilson(tp, tp + fp),
        "recall": float(recall),
        "recall_ci": wilson(tp, tp + fn),
        "f1": float(f1),
        "balanced_accuracy": float(balanced_accuracy_score(labels, predicted)) if len(set(labels)) > 1 else None,
    }


def by_model(results: list[dict]) -> dict[str, dict]:
    """Per writer (`meta.model`): counts, precision and recall with their Wilson intervals."""
    groups: dict[str, list[dict]] = {}
    for r in results:
        if r.get("model"):
            groups.setdefault(r["model"], []).append(r)
    out = {}
    for model, rows in sorted(groups.items()):
        labels, predicted = [r["label"] for r in rows], [r["predicted"] for r in rows]
        figures = classification(labels, predicted)
        out[model] = {"n": len(rows), "hallucinated": sum(labels), **figures}
    return out


def sweep(labels: list[int], faithfulness: list[float | None]) -> list[dict]:
    """Flag an answer when its faithfulness is below t, for every distinct t the scores allow."""
    scores = [1.0 if f is None else f for f in faithfulness]
    thresholds = sorted(set(scores) | {1.0})
    thresholds = sorted({t for t in thresholds if t > 0} | {max(thresholds) + 1e-9})
    return [{"threshold": round(t, 4), **classification(labels, [int(s < t) for s in scores])} for t in thresholds]


def summarise(results: list[dict]) -> dict:
    scored = [r for r in results if r["error"] is None]
    labels, predicted = [r["label"] for r in scored], [r["predicted"] for r in scored]
    claims = sum(r["n_claims"] for r in scored)
    n = max(len(scored), 1)
    return {
        **classification(labels, predicted),
        "by_model": by_model(scored),
        "n": len(scored),
        "invalid": len(results) - len(scored),
        "threshold": "faithfulness < 1 (any claim not supported)",
        "sweep": sweep(labels, [r["faithfulness"] for r in scored]),
        "latency_ms_per_answer": statistics.median([r["latency_ms"] for r in scored]) if scored else None,
        "llm_calls_per_answer": sum(r["llm_calls"] for r in scored) / n,
        "prompt_tokens_per_answer": sum(r["prompt_tokens"] for r in scored) / n,
        "claims": claims,
        "claims_decided_by_precheck": sum(r["decided_by_precheck"] for r in scored),
        "no_claims": sum(r["n_claims"] == 0 for r in scored),
        "flagged_by_precheck_truly_hallucinated": _precheck_precision(scored),
        "precheck_hints": _precheck_hints(scored),
    }


def _precheck_hints(results: list[dict]) -> dict:
    """The pre-check's hints, counted apart from its decisive flags: claims it passed on with a signal too
    unreliable to decide on (bench/precheck_cv.py), and the answers that have one."""
    hinted = [r for r in results if any(v.get("hint") for v in r["verdicts"])]
    return {
        "claims": sum(bool(v.get("hint")) for r in results for v in r["verdicts"]),
        "answers": len(hinted),
        "answers_truly_hallucinated": sum(r["label"] for r in hinted),
        "answers_not_flagged": sum(not r["predicted"] for r in hinted),
    }


def _precheck_precision(results: list[dict]) -> float | None:
    flagged = [
        r for r in results if any(v["by"] == "precheck" and v["verdict"] == Verdict.UNSUPPORTED for v in r["verdicts"])
    ]
    return sum(r["label"] for r in flagged) / len(flagged) if flagged else None


def run_detector_bench(
    settings: Settings,
    db: Database,
    path: str,
    verifier: str,
    claims_from: str = "llm",
    limit: int | None = None,
    on_record=None,
) -> tuple[int, dict]:
    chain = detector_chain(settings, verifier)
    records, _ = load_labelled(path)
    records = records[:limit] if limit else records
    with ThreadPoolExecutor(max_workers=settings.eval_concurrency) as pool:
        futures = [pool.submit(detect, r, settings, db, chain, claims_from) for r in records]
        results, calls, cache_entries = [], [], []
        for future in futures:
            result, llm = future.result()
            results.append(result)
            calls += llm.take_calls()
            cache_entries += llm.take_cache_entries()
            if on_record:
                on_record(len(results), len(records))
    save_calls(db, calls, cache_entries)
    metrics = summarise(results)
    shown = {
        k: getattr(settings, k) for k in ("verifier_model", "nli_model", "claim_model", "verify_scope", "cache_enabled")
    }
    shown["verifier_chain"] = ",".join(chain)
    run_id = save_detector_run(
        db, Path(path).name, verifier, claims_from, settings.verify_scope, "precheck" in chain, shown, metrics, results
    )
    return run_id, metrics
