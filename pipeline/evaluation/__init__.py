"""Batch evaluation: golden sets, the judge, component metrics, the runner, diagnosis."""
