"""Stored evaluation runs and the question runs they answered, for choosing what to rate or calibrate."""

from __future__ import annotations

from store.evals import list_eval_runs, run_ids_of, run_ids_under_pin

__all__ = ["list_eval_runs", "run_ids_of", "run_ids_under_pin"]
