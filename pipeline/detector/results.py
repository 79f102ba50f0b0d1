"""Stored detector-benchmark runs and their per-answer results (written by pipeline.detector.bench)."""

from __future__ import annotations

from store.detector import detector_results, list_detector_runs

__all__ = ["detector_results", "list_detector_runs"]
