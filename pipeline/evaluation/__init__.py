"""Batch evaluation: golden sets, the metric registry and its metrics (metrics/, the judge's criteria among
them), the runner, diagnosis."""
