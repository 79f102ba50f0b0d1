"""Shared bench plumbing: the fake Ollama from tests/, a scratch store, timing helpers."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from fake_ollama import FakeOllama  # noqa: E402


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    target: float | None = None
    lower_is_better: bool = True
    note: str = ""

    @property
    def meets(self) -> str:
        if self.target is None:
            return "-"
        ok = self.value <= self.target if self.lower_is_better else self.value >= self.target
        return "yes" if ok else "NO"

    def target_text(self) -> str:
        if self.target is None:
            return "(reported)"
        return f"{'≤' if self.lower_is_better else '≥'} {self.target:g} {self.unit}"


@contextmanager
def bench_environment(**settings_env):
    """A fake Ollama and a scratch store, exposed through the environment like a user's setup."""
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as folder, FakeOllama() as fake:
        saved = dict(os.environ)
        os.environ.update(
            {
                "OLLAMA_HOST": fake.url,
                "WORKBENCH_DB": str(Path(folder) / "bench.duckdb"),
                "WORKBENCH_CONFIG": "",  # no settings file
                **settings_env,
            }
        )
        try:
            yield fake, Path(folder)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def recording(fn, samples: list):
    """fn, wrapped so that each call appends (start, end) perf_counter times to samples."""

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            samples.append((start, time.perf_counter()))

    return wrapper


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def print_table(figures: list[Figure]) -> None:
    rows = [(f.name, f"{f.value:,.2f} {f.unit}", f.target_text(), f.meets, f.note) for f in figures]
    headers = ("figure", "value", "target", "meets", "note")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    for row in [headers, tuple("-" * w for w in widths)] + rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)))
