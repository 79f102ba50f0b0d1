"""`gate`: compare an evaluation with its baseline and its floors; the exit code says the outcome."""

from __future__ import annotations

import json
from dataclasses import asdict

from rich.console import Console

from pipeline.cli.output import print_gate
from pipeline.evaluation import regression
from pipeline.regression import junit


def register(sub) -> None:
    gate = sub.add_parser(
        "gate",
        help="compare an evaluation with its baseline and its floors; exit 0 pass, 1 on a regression, "
        "3 when below a floor only",
    )
    gate.add_argument("--run", required=True, help="the evaluation's name")
    gate.add_argument(
        "--baseline",
        default=None,
        help="compare with this evaluation (default: the pinned baseline, else the newest earlier run over the same "
        "dataset hash and size, under the same judge pin, with no failed item and no open regression alert)",
    )
    gate.add_argument("--json", action="store_true")
    gate.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the gate as JUnit XML to FILE: one test case per metric x slice (the exit code is the same)",
    )
    gate.set_defaults(handler=cmd_gate)


GATE_REGRESSION = 1  # a drop against the baseline (whether or not a floor is breached too)
GATE_BELOW_FLOOR = 3  # a metric below its floor and no regression (2 is bad usage or input, as for every command)


def cmd_gate(args, settings, db, out: Console, err: Console) -> int:
    run, baseline, comparisons = regression.check(db, settings, args.run, args.baseline)
    regressions = [c for c in comparisons if c.regression]
    below = [c for c in comparisons if c.below_floor]
    if args.json:
        out.print_json(
            json.dumps(
                {
                    "run": run.name,
                    "baseline": baseline.name if baseline else None,
                    "regression": bool(regressions),
                    "below_floor": bool(below),
                    "comparisons": [asdict(c) for c in comparisons],
                },
                default=str,
            )
        )
    else:
        print_gate(run, baseline, comparisons, out)
    if args.junit:
        cause = junit.gate_cause(db, run, baseline, comparisons)
        junit.write_gate_junit(args.junit, run, baseline, comparisons, cause)
    return GATE_REGRESSION if regressions else GATE_BELOW_FLOOR if below else 0
