"""`make bench`: run every benchmark and print one table of figures, targets and whether each is met."""

from __future__ import annotations

import sys

from bench import (
    align,
    answer_cost,
    answer_vs_seed,
    cli_help,
    collect,
    detector,
    evaluation,
    hosts,
    imported,
    judge_variance,
    kappa,
    on_topic,
    overhead,
    page_speed,
    precheck_cv,
    regression,
    retrieval,
    scale,
    store_contention,
    sweep,
    synth,
    verification,
)
from bench.common import print_table

SUITES = {
    "overhead": overhead.run,
    "retrieval": retrieval.run,
    "verification": verification.run,
    "evaluation": evaluation.run,
    "answer_cost": answer_cost.run,
    "on_topic": on_topic.run,
    "answer-vs-seed": answer_vs_seed.run,
    "detector": detector.run,
    "precheck_cv": precheck_cv.bench_figures,
    "regression": regression.run,
    "kappa": kappa.run,
    "contention": store_contention.run,
    "scale": scale.run,
    "hosts": hosts.run,
    "collect": collect.run,
    "page_speed": page_speed.run,  # BENCH_RUNS=N: the store's size (default 10,000)
    "synth": synth.run,
    "sweep": sweep.run,
    "judge_variance": judge_variance.run,
    "cli_help": cli_help.run,  # issue 51: --help beside the floor of Python and its imports
    "align": align.run,
    "imported": lambda: imported.run(1000, "fast"),  # `gpu` at 1,000 rows: 44 min for Ragas, 33 for the workbench
}


def main(names: list[str]) -> int:
    if "--json" in names:
        chosen = [n for n in names if n != "--json"]
        if chosen == ["align"]:
            return align.main(["--json"])
        if chosen != ["regression"]:
            print("--json goes with one benchmark: python -m bench regression --json (or align)", file=sys.stderr)
            return 2
        return regression.main(names)
    names, n_runs = scale.parse_runs(names)
    SUITES["scale"] = lambda: scale.run(n_runs)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(SUITES)}", file=sys.stderr)
        return 2
    figures = []
    for name in names or SUITES:
        print(f"running {name}…", file=sys.stderr, flush=True)
        figures += SUITES[name]()
    print_table(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
