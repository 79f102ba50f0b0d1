"""A pytest plugin: assert on the workbench's evaluations in your own test suite.

Installed with the project (entry point `pytest11: workbench`) and idle unless a test asks for the `workbench`
fixture: loading it adds one command-line option and imports nothing of the workbench; the fixture opens the
store and settings the way the CLI does (environment, workbench.toml), `--workbench-store PATH` naming another
store file.

    def test_answers_have_not_regressed(workbench):
        workbench.evaluate("data/eval/golden.jsonl", name="ci", limit=20)
        workbench.assert_no_regression("ci")  # fails with the gate's table on a regression or a floor breach

`assert_no_regression` applies the gate (`python -m pipeline gate`): the same baseline rule, floors and tests,
and it stores the same alerts.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

STORE_OPTION = "--workbench-store"
TABLE_WIDTH = 160  # characters: the gate's table is drawn at this width whatever the terminal


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("workbench", "RAG quality workbench (the `workbench` fixture)")
    group.addoption(
        STORE_OPTION,
        metavar="PATH",
        default=None,
        help="the store file the `workbench` fixture opens (default: WORKBENCH_DB or store_path in the settings "
        "file, as for the CLI)",
    )


@pytest.fixture
def workbench(request: pytest.FixtureRequest) -> Workbench:
    """The workbench's settings and store, with `evaluate`, `load`, `gate` and `assert_no_regression`."""
    return Workbench(store=request.config.getoption(STORE_OPTION))


@dataclasses.dataclass
class Gate:
    """The gate's verdict on one run: `compare.check`'s (run, baseline, comparisons) and the likely cause of its
    regressions."""

    run: Any  # store.evals.EvalRun
    baseline: Any  # store.evals.EvalRun | None
    comparisons: list
    cause: Any = None  # pipeline.evaluation.causes.Cause | None

    @property
    def regressions(self) -> list:
        return [c for c in self.comparisons if c.regression]

    @property
    def below_floor(self) -> list:
        return [c for c in self.comparisons if c.below_floor]

    @property
    def passed(self) -> bool:
        return not self.regressions and not self.below_floor

    def table(self) -> str:
        """The gate's table and verdict lines as `python -m pipeline gate` prints them, as plain text."""
        from pipeline.cli.reports import print_gate
        from pipeline.cli.terminal import SafeConsole

        buffer = io.StringIO()
        console = SafeConsole(file=buffer, width=TABLE_WIDTH, color_system=None, force_terminal=False)
        print_gate(self.run, self.baseline, self.comparisons, console)
        if self.cause is not None:
            console.print(f"since the baseline {self.baseline.name}: {self.cause.sentence}", markup=False)
        return buffer.getvalue()

    def junit(self) -> str:
        """The gate as JUnit XML, as `gate --junit` writes it."""
        from pipeline.regression.junit import gate_junit

        return gate_junit(self.run, self.baseline, self.comparisons, self.cause)


class Workbench:
    """The workbench's settings and store for a test. Every expected failure (an unknown run, Ollama not
    reachable, runs under different judge pins) fails the test with its message and fix."""

    def __init__(self, store: str | Path | None = None, settings: Any = None):
        from pipeline.config import load_settings
        from pipeline.session import open_workbench

        with _as_failure():
            settings = settings or load_settings()
            if store:
                settings = dataclasses.replace(settings, store_path=str(Path(store)))
            self.settings, self.db = open_workbench(settings)

    def evaluate(
        self,
        dataset: Any,
        name: str,
        *,
        metrics: list[str] | None = None,
        limit: int | None = None,
        tags: list[str] | None = None,
        concurrency: int | None = None,
        pipeline: str | None = None,
    ) -> Any:
        """Run (or resume) the evaluation `name` over `dataset` as `python -m pipeline eval` does, and return its
        report (pipeline.evaluation.runner.EvalReport). `dataset`: a file (kept as a version of the dataset named
        after it, as `eval` keeps it), `dataset:NAME[@VERSION]`, or a loaded Dataset. An item that fails fails the
        test with the reasons: a run with missing scores is no evidence either way."""
        from pipeline.evaluation import datasets
        from pipeline.evaluation.dataset import Dataset, load_dataset
        from pipeline.evaluation.runner import report, run_evaluation

        with _as_failure():
            if isinstance(dataset, Dataset):
                read, where = dataset, dataset.name
            else:
                where = str(dataset)
                read = datasets.resolve(self.db, where) if datasets.is_spec(where) else load_dataset(where)
            loaded, _pinned = datasets.for_evaluation(self.db, read, name, where)
            chosen = loaded.select(limit, tags)
            if not chosen.items:
                pytest.fail(f"no item of {loaded.name or 'the dataset'} matches limit/tags", pytrace=False)
            outcome = run_evaluation(
                self.settings,
                self.db,
                chosen,
                name,
                concurrency or self.settings.eval_concurrency,
                metrics=metrics,
                pipeline=pipeline,
            )
            if outcome.progress.failed:
                p = outcome.progress
                why = "\n".join(f"  {count} x {error}" for error, count in p.errors.items())
                pytest.fail(f"{p.failed} of {p.total} items of {name!r} failed:\n{why}", pytrace=False)
            return report(self.settings, self.db, name)

    def load(self, name: str) -> Any:
        """The report of the stored evaluation `name` (pipeline.evaluation.runner.EvalReport)."""
        from pipeline.evaluation.runner import report

        with _as_failure():
            return report(self.settings, self.db, name)

    def means(self, name: str) -> dict[str, float | None]:
        """metric -> mean of the stored evaluation `name` (None where nothing was scored)."""
        return {row["metric"]: row["mean"] for row in self.load(name).metrics}

    def gate(self, run: str, baseline: str | None = None) -> Gate:
        """The gate on `run` against `baseline` (default: the one baseline rule); its alerts are stored as the
        CLI's are. Does not fail the test: see assert_no_regression."""
        from pipeline.evaluation import regression as compare
        from pipeline.regression.junit import gate_cause

        with _as_failure():
            checked_run, checked_baseline, comparisons = compare.check(self.db, self.settings, run, baseline)
            cause = gate_cause(self.db, checked_run, checked_baseline, comparisons)
        return Gate(checked_run, checked_baseline, comparisons, cause)

    def assert_no_regression(self, run: str, baseline: str | None = None, *, floors: bool = True) -> Gate:
        """Fail the test with the gate's table when `run` regressed against its baseline, or (unless `floors` is
        False) when a metric is below its floor; return the gate otherwise."""
        gate = self.gate(run, baseline)
        failed = [c.metric for c in gate.regressions]
        below = [c.metric for c in gate.below_floor] if floors else []
        if failed or below:
            what = []
            if failed:
                what.append("regressed: " + ", ".join(dict.fromkeys(failed)))
            if below:
                what.append("below floor: " + ", ".join(below))
            against = gate.baseline.name if gate.baseline else "no baseline"
            pytest.fail(f"workbench gate: {run} vs {against}: {'; '.join(what)}\n{gate.table()}", pytrace=False)
        return gate


class _as_failure:
    """Turn the workbench's expected errors (each with its fix) into a failed test without a traceback."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        from pipeline.errors import WorkbenchError

        if exc is not None and isinstance(exc, WorkbenchError):
            pytest.fail(f"workbench: {exc}", pytrace=False)
        return False
