"""`gate`: compare an evaluation with its baseline and its floors; the exit code says the outcome."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import asdict

from rich.console import Console

from pipeline.cli.tables import add_format, chosen_format

GATE_REGRESSION = 1  # a drop against the baseline (whether or not a floor is breached too)
GATE_BELOW_FLOOR = 3  # a metric below its floor and no regression (2 is bad usage or input, as for every command)

# Every code `gate` exits with: its own (cmd_gate) and the ones every command shares (pipeline/cli/main.py).
EXIT_CODES = {
    0: "passed: no regression against the baseline, and every metric at or above its floor",
    GATE_REGRESSION: "a regression: a metric dropped against the baseline (a floor may be breached too); also "
    "when the work itself failed (the store could not be read)",
    2: "bad usage or input: an unknown run or baseline, a bad argument, an unwritable --junit file",
    GATE_BELOW_FLOOR: "below a floor only: a metric's mean is under its floor, with no regression",
}


def exit_codes_text() -> str:
    lines = (
        textwrap.fill(meaning, 100, initial_indent=f"  {code}  ", subsequent_indent="     ")
        for code, meaning in sorted(EXIT_CODES.items())
    )
    return "exit codes:\n" + "\n".join(lines)


def register(sub) -> None:
    gate = sub.add_parser(
        "gate",
        help="compare an evaluation with its baseline and its floors; exit 0 pass, 1 on a regression, "
        "3 when below a floor only",
        epilog=exit_codes_text()
        + "\n\n"
        + textwrap.fill(
            "With GITHUB_STEP_SUMMARY set (GitHub Actions), the gate's table, verdict and exit reason are also "
            "appended to that file in Markdown.",
            100,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_argument("--run", required=True, help="the evaluation's name")
    gate.add_argument(
        "--baseline",
        default=None,
        help="compare with this evaluation (default: the pinned baseline, else the newest earlier run over the same "
        "dataset hash and size, under the same judge pin, with no failed item and no open regression alert)",
    )
    add_format(gate, "the comparisons")
    gate.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the gate as JUnit XML to FILE: one test case per metric x slice (the exit code is the same)",
    )
    gate.set_defaults(handler=cmd_gate)


def gate_exit(comparisons) -> int:
    if any(c.regression for c in comparisons):
        return GATE_REGRESSION
    return GATE_BELOW_FLOOR if any(c.below_floor for c in comparisons) else 0


def cmd_gate(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.cli.reports import gate_report, gate_verdict
    from pipeline.cli.step_summary import append_summary
    from pipeline.cli.tables import emit
    from pipeline.evaluation import regression
    from pipeline.regression import junit

    run, baseline, comparisons = regression.check(db, settings, args.run, args.baseline)
    payload = {
        "run": run.name,
        "baseline": baseline.name if baseline else None,
        "regression": any(c.regression for c in comparisons),
        "below_floor": any(c.below_floor for c in comparisons),
        "comparisons": [asdict(c) for c in comparisons],
    }
    report = gate_report(run, baseline, comparisons, payload=payload)
    emit(report, chosen_format(args), out)
    if args.junit:
        cause = junit.gate_cause(db, run, baseline, comparisons)
        junit.write_gate_junit(args.junit, run, baseline, comparisons, cause)
    code = gate_exit(comparisons)
    against = baseline.name if baseline else "no baseline (floors only)"
    append_summary(
        f"Gate: {run.name} vs {against}", gate_verdict(comparisons), f"exit {code}: {EXIT_CODES[code]}", report, err
    )
    return code
