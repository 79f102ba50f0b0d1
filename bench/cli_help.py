"""How fast `--help` answers, beside the floor measured in the same run: a Python that does nothing
(`python -c pass`) and one that imports only what the help itself needs (argparse, rich, the settings module).

Each command is started REPEATS times, the four interleaved so that a busy machine slows them alike; the figure is
the median wall time, with the median CPU time (user + system) in the note.

    python -m bench cli_help        (or: python -m bench.cli_help)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, Figure, print_table

REPEATS = 7
TARGET_S = 1.0  # issue 51: `--help` answers in 1 s or less
HELP_NEEDS = "import argparse, rich.console, rich.table, rich.text, pipeline.config"
COMMANDS = {
    "python -c pass (floor)": ["-c", "pass"],
    "python -c 'import argparse, rich, settings' (floor)": ["-c", HELP_NEEDS],
    "python -m pipeline --help": ["-m", "pipeline", "--help"],
    "python -m pipeline gate --help": ["-m", "pipeline", "gate", "--help"],
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_once(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh Python running args."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def measure(repeats: int = REPEATS) -> dict[str, tuple[float, float]]:
    """Each command's median (wall, CPU) seconds over `repeats` interleaved starts."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for args in COMMANDS.values():  # one start each first: the files in the page cache, the bytecode compiled
        time_once(args)
    for _ in range(repeats):
        for name, args in COMMANDS.items():
            samples[name].append(time_once(args))
    return {
        name: (statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs))
        for name, runs in samples.items()
    }


def run() -> list[Figure]:
    measured = measure()
    floor_wall = measured["python -c 'import argparse, rich, settings' (floor)"][0]
    figures = []
    for name, (wall, cpu) in measured.items():
        is_help = "--help" in name
        note = f"CPU {cpu:.2f} s; load {os.getloadavg()[0]:.1f}"
        if is_help:
            note += f"; {wall - floor_wall:+.2f} s over the import floor"
        figures.append(Figure(name, wall, "s", TARGET_S if is_help else None, note=note))
    return figures


if __name__ == "__main__":
    print_table(run())
