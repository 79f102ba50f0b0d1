"""Measure the hallucination detector on labelled answers {id, question?, context, answer, label}.

label 1 = the answer contains a hallucination. An answer is flagged when any of its claims is not
supported by the context. Verifiers: `precheck` (the deterministic pre-check alone; claims it leaves
undecided count as supported), `minicheck` (the configured verifier, after the pre-check when it is on),
`llm` (the general model as a Yes/No verifier). Claims come from the claim extractor (`llm`) or are the
answer's own sentences (`answer`, deterministic).
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator
from sklearn.metrics import balanced_accuracy_score, confusion_matrix, precision_recall_fscore_support

from pipeline.config import Settings
from pipeline.evaluation.dataset import BadRow
from pipeline.errors import InputError
from pipeline.verification.faithfulness import SUPPORTED, UNVERIFIED, FaithfulnessChecker, Passage
from pipeline.models.llm import LLM
from pipeline.verification.precheck import precheck
from pipeline.text import sentences
from store.db import Database
from store.detector import save_detector_run

VERIFIERS = ("minicheck", "llm", "precheck")


class LabelledRecord(BaseModel):
    id: str
    question: str | None = None
    context: str
    answer: str
    label: int

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
        raise InputError(f"{path} has no valid records ({len(bad)} bad)",
                         fix="each line needs id, context, answer and label (0 or 1)")
    return records, bad


def context_passages(context: str, per_chunk: int = 2) -> list[Passage]:
    """The context as chunks of `per_chunk` sentences, so per-chunk verification has chunks to pick from."""
    parts = [s.text for s in sentences(context)] or [context]
    chunks = [" ".join(parts[i:i + per_chunk]) for i in range(0, len(parts), per_chunk)]
    return [Passage(n, -n, "context", text, 0.0) for n, text in enumerate(chunks, start=1)]


def answer_claims(answer: str) -> list[str]:
    parts = [s.text for s in sentences(answer) if s.text.strip()]
    return parts or ([answer.strip()] if answer.strip() else [])


def detect(record: LabelledRecord, settings: Settings, db: Database, verifier: str, claims_from: str) -> dict:
    llm = LLM(settings, db, origin="detector")
    checker = FaithfulnessChecker(llm, settings, classify=False, llm_verifier=verifier == "llm")
    passages = context_passages(record.context)
    start = time.perf_counter()
    result = {"record_id": record.id, "label": record.label, "error": None, "verdicts": []}
    if claims_from == "llm":
        extraction = checker.extract_claims(record.question or "", record.answer)
        claims = extraction.claims
        result["error"] = extraction.invalid_reason
    else:
        claims = answer_claims(record.answer)
    verdicts = []
    if claims and verifier == "precheck":
        context = record.context
        verdicts = [(c, precheck(c, context).verdict or "undecided", "precheck") for c in claims]
    elif claims:
        verdicts = [(c.text, c.verdict, c.verifier) for c in checker.verify_claims(claims, passages)]
    decided = [v for _, v, _ in verdicts if v not in (UNVERIFIED,)]
    flagged = any(v in ("unsupported", "contradicted") for _, v, _ in verdicts)
    supported = sum(v in (SUPPORTED, "undecided") for _, v, _ in verdicts)
    result.update(
        predicted=int(flagged), n_claims=len(verdicts),
        faithfulness=supported / len(decided) if decided else None,
        decided_by_precheck=sum(src == "precheck" and v != "undecided" for _, v, src in verdicts),
        llm_calls=sum(not c.cache_hit for c in llm.calls),
        prompt_tokens=sum(c.prompt_tokens or 0 for c in llm.calls if not c.cache_hit),
        latency_ms=(time.perf_counter() - start) * 1000,
        verdicts=[{"claim": c, "verdict": v, "by": src} for c, v, src in verdicts])
    return result


def classification(labels: list[int], predicted: list[int]) -> dict:
    tn, fp, fn, tp = confusion_matrix(labels, predicted, labels=[0, 1]).ravel().tolist()
    precision, recall, f1, _ = precision_recall_fscore_support(labels, predicted, pos_label=1, average="binary",
                                                               zero_division=0)
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "precision": float(precision), "recall": float(recall),
            "f1": float(f1), "balanced_accuracy": float(balanced_accuracy_score(labels, predicted))}


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
    return {**classification(labels, predicted), "n": len(scored), "invalid": len(results) - len(scored),
            "threshold": "faithfulness < 1 (any claim not supported)",
            "sweep": sweep(labels, [r["faithfulness"] for r in scored]),
            "latency_ms_per_answer": statistics.median([r["latency_ms"] for r in scored]) if scored else None,
            "llm_calls_per_answer": sum(r["llm_calls"] for r in scored) / n,
            "prompt_tokens_per_answer": sum(r["prompt_tokens"] for r in scored) / n,
            "claims": claims, "claims_decided_by_precheck": sum(r["decided_by_precheck"] for r in scored),
            "no_claims": sum(r["n_claims"] == 0 for r in scored),
            "flagged_by_precheck_truly_hallucinated": _precheck_precision(scored)}


def _precheck_precision(results: list[dict]) -> float | None:
    flagged = [r for r in results if any(v["by"] == "precheck" and v["verdict"] == "unsupported"
                                         for v in r["verdicts"])]
    return sum(r["label"] for r in flagged) / len(flagged) if flagged else None


def run_detector_bench(settings: Settings, db: Database, path: str, verifier: str, claims_from: str = "llm",
                       limit: int | None = None, on_record=None) -> tuple[int, dict]:
    if verifier not in VERIFIERS:
        raise InputError(f"unknown verifier {verifier!r}", fix=f"use one of {', '.join(VERIFIERS)} or all")
    records, _ = load_labelled(path)
    records = records[:limit] if limit else records
    if verifier == "llm":
        settings = dataclasses.replace(settings, verifier_model=settings.nli_model)
    with ThreadPoolExecutor(max_workers=settings.eval_concurrency) as pool:
        futures = [pool.submit(detect, r, settings, db, verifier, claims_from) for r in records]
        results = []
        for future in futures:
            results.append(future.result())
            if on_record:
                on_record(len(results), len(records))
    metrics = summarise(results)
    shown = {k: getattr(settings, k) for k in ("verifier_model", "claim_model", "precheck_enabled",
                                               "verify_scope", "cache_enabled")}
    run_id = save_detector_run(db, Path(path).name, verifier, claims_from, settings.verify_scope,
                               settings.precheck_enabled or verifier == "precheck",
                               shown, metrics, results)
    return run_id, metrics
