"""Stored detector-benchmark runs, their per-answer results and verdicts, and runs started from a page."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from pipeline.config import PROJECT_ROOT, Settings
from pipeline.detector.bench import run_detector_bench
from store.db import Database
from store.detector import detector_results, list_detector_runs

__all__ = ["SAMPLE", "detector_results", "list_detector_runs", "run_on_upload", "verdict_rows", "with_interval"]

SAMPLE = PROJECT_ROOT / "data" / "detector" / "sample.jsonl"


def verdict_rows(results: list[dict]) -> list[dict]:
    """One row per claim of every answer: the answer's label and prediction, the claim, its verdict and
    the verifier that gave it."""
    rows = []
    for r in results:
        verdicts = json.loads(r["verdicts"]) if isinstance(r["verdicts"], str) else r["verdicts"] or []
        for n, v in enumerate(verdicts, start=1):
            rows.append(
                {
                    "record_id": r["record_id"],
                    "label": r["label"],
                    "predicted": r["predicted"],
                    "claim #": n,
                    "claim": v["claim"],
                    "verdict": v["verdict"],
                    "by": v["by"],
                }
            )
    return rows


def with_interval(value: float | None, interval) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else f"{value:.3f}"


def run_on_upload(
    settings: Settings, db: Database, name: str, data: bytes, verifier: str, claims: str, on_record=None
) -> tuple[int, dict]:
    """The benchmark on an uploaded JSONL file, stored under the file's own name."""
    with tempfile.TemporaryDirectory(prefix="detector-upload-") as folder:
        path = Path(folder) / (Path(name).name or "upload.jsonl")
        path.write_bytes(data)
        return run_detector_bench(settings, db, str(path), verifier, claims, on_record=on_record)
