"""The gate in CI: `gate --junit FILE` writes one JUnit test case per metric x slice, and the pytest plugin's
`workbench` fixture fails a user's test with the gate's table when an evaluation regressed."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points

import numpy as np
import pytest
from conftest import ROOT
from junitparser import Failure, JUnitXml, Skipped

# The plugin imports these inside its fixture; imported here first, so that pytester's in-process runs (which
# drop the modules a run imported when the test ends) leave one copy of each behind for the tests after them.
import pipeline.cli.output  # noqa: F401
import pipeline.evaluation.datasets  # noqa: F401
import pipeline.evaluation.runner  # noqa: F401
import pipeline.pytest_plugin  # noqa: F401
import pipeline.regression.junit  # noqa: F401
import pipeline.session  # noqa: F401
from pipeline.cli.main import main
from store.evals import create_eval_run, mark_eval_run

pytest_plugins = ["pytester"]

N = 12  # items: enough for a paired test on the whole run and on the tag slice (at least 10 shared items)


def store_run(db, name, values_by_metric, config=None):
    """An evaluation's scores written straight into the store (no model involved), tagged "rag"."""
    run_id = create_eval_run(db, name, "golden.jsonl", "h", config or {"top_k": 5}, "llama3.2", "d1", "judge-v1", N, 1)
    with db.cursor() as cur:
        for metric, values in values_by_metric.items():
            for k, v in enumerate(values):
                cur.execute(
                    "INSERT INTO scores (eval_run_id, item_id, run_id, metric, value, status) "
                    "VALUES (?, ?, ?, ?, ?, 'ok')",
                    [run_id, f"i{k}", 1000 * run_id + k, metric, float(v)],
                )
        for k in range(N):
            cur.execute(
                "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, tags) "
                "VALUES (?, ?, ?, 'done', 'q', ['rag'])",
                [run_id, f"i{k}", 1000 * run_id + k],
            )
    mark_eval_run(db, run_id, "finished")


@pytest.fixture
def three_runs(db):
    """A baseline, an equal rerun, and a degraded run (faithfulness 0.15 lower, still above its floor 0.70, after
    top_k was lowered); context recall the same in all three."""
    rng = np.random.default_rng(3)
    faithfulness = rng.uniform(0.88, 0.98, N)
    recall = rng.uniform(0.85, 0.95, N)
    store_run(db, "base", {"faithfulness": faithfulness, "context_recall": recall})
    store_run(db, "equal", {"faithfulness": faithfulness, "context_recall": recall})
    degraded = faithfulness - 0.15 + rng.normal(0, 0.01, N)
    store_run(db, "degraded", {"faithfulness": degraded, "context_recall": recall}, config={"top_k": 2})
    return {"base": faithfulness.mean(), "degraded": degraded.mean()}  # faithfulness's means


def gate_junit(tmp_path, run: str, baseline: str | None = None) -> tuple[int, str]:
    path = tmp_path / f"{run}.xml"
    code = main(["gate", "--run", run, "--junit", str(path)] + (["--baseline", baseline] if baseline else []))
    return code, path.read_text(encoding="utf-8")


def cases(xml: JUnitXml) -> list:
    return [case for suite in xml for case in suite]


@pytest.mark.slow
def test_the_junit_file_of_a_degraded_run_names_the_failing_metric(three_runs, tmp_path, capsys):
    code, text = gate_junit(tmp_path, "degraded", "base")
    assert code == 1  # the exit code is the gate's
    assert "REGRESSION (drop)" in capsys.readouterr().out  # the table is printed as well
    xml = JUnitXml.fromstring(text)
    [suite] = list(xml)
    assert suite.name == "workbench gate: degraded vs base"
    failed = {(c.classname, c.name): c for c in cases(xml) if not c.is_passed and not c.is_skipped}
    assert set(failed) == {("all", "faithfulness"), ("rag", "faithfulness")}  # one case per metric x slice
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 2, 0, 0)
    [failure] = failed[("all", "faithfulness")].result
    assert isinstance(failure, Failure) and failure.type == "regression"
    base, new = three_runs["base"], three_runs["degraded"]
    assert f"faithfulness on all fell from {base:.3f} to {new:.3f} (change {new - base:+.3f}," in failure.message
    assert "adjusted p = 0.0" in failure.message
    assert "Likely cause: the retriever changed (top_k)" in failure.message  # what changed since the baseline
    assert "worst items" in failure.text
    passing = [c for c in cases(xml) if c.is_passed]
    assert {(c.classname, c.name) for c in passing} == {("all", "context_recall"), ("rag", "context_recall")}
    assert all("context_recall on" in c.system_out for c in passing)


def test_an_equal_run_gives_a_junit_file_without_failures(three_runs, tmp_path):
    code, text = gate_junit(tmp_path, "equal", "base")
    assert code == 0
    xml = JUnitXml.fromstring(text)
    assert len(cases(xml)) == 4 and all(c.is_passed for c in cases(xml))
    assert {c.name for c in cases(xml)} == {"faithfulness", "context_recall"}


def test_the_junit_file_has_the_structure_the_junit_schema_requires(three_runs, tmp_path):
    """Read with the standard library against the schema's required structure (junit-10.xsd, as Jenkins and the
    CI reporters read it): <testsuites> of <testsuite name tests failures errors skipped> of <testcase name
    classname>, each with at most one of <failure message type>, <skipped message>, and the counts add up."""
    _, text = gate_junit(tmp_path, "degraded", "base")
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("name") == "workbench gate: degraded vs base"
    suite = suites[0]
    testcases = suite.findall("testcase")
    assert {child.tag for child in suite} == {"properties", "testcase"}
    assert int(suite.get("tests")) == len(testcases) == int(root.get("tests"))
    assert int(suite.get("failures")) == sum(len(c.findall("failure")) for c in testcases) == 2
    assert int(suite.get("skipped")) == sum(len(c.findall("skipped")) for c in testcases) == 0
    assert suite.get("errors") == "0" and float(suite.get("time")) == 0
    for case in testcases:
        assert case.get("name") and case.get("classname")
        assert len([e for e in case if e.tag in ("failure", "error", "skipped")]) <= 1
    failures = [f for c in testcases for f in c.findall("failure")]
    assert all(f.get("message") and f.get("type") == "regression" for f in failures)
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties == {"run": "degraded", "baseline": "base"}


def test_a_floor_breach_without_a_baseline_is_a_failed_floor_case_and_a_skipped_drop_case(db, tmp_path):
    store_run(db, "first", {"faithfulness": [0.6] * N, "context_recall": [0.9] * N})
    code, text = gate_junit(tmp_path, "first")
    assert code == 3  # below a floor only
    xml = JUnitXml.fromstring(text)
    by_name = {c.name: c for c in cases(xml)}
    assert set(by_name) == {"faithfulness (floor)", "drops"}
    [failure] = by_name["faithfulness (floor)"].result
    assert failure.type == "below_floor" and failure.message == "faithfulness is 0.600, below its floor 0.70"
    [skipped] = by_name["drops"].result
    assert isinstance(skipped, Skipped) and "no baseline" in skipped.message
    assert next(iter(xml)).name == "workbench gate: first vs no baseline"


def test_a_comparison_not_tested_is_skipped_and_control_characters_do_not_break_the_file():
    from types import SimpleNamespace

    from pipeline.evaluation.regression import Comparison
    from pipeline.regression.junit import gate_junit

    run, baseline = SimpleNamespace(name="new\x1b[2J"), SimpleNamespace(name="old")
    few = Comparison("faithfulness", "all", "too_few", 0.9, 0.8, n=3, message="3 shared items: too few")
    tagged = Comparison("context_recall", "bell\x07tag", "ok", 0.9, 0.9, message="context_recall on bell\x07tag")
    xml = JUnitXml.fromstring(gate_junit(run, baseline, [few, tagged]))
    [suite] = list(xml)
    assert suite.name == "workbench gate: new\ufffd[2J vs old" and (suite.tests, suite.skipped) == (2, 1)
    [skipped] = cases(xml)[0].result
    assert isinstance(skipped, Skipped) and skipped.message == "3 shared items: too few"
    assert cases(xml)[1].classname == "bell\ufffdtag" and cases(xml)[1].is_passed


def test_an_unwritable_junit_path_is_an_input_error_with_its_fix(three_runs, tmp_path, capsys):
    missing = tmp_path / "no-such-folder" / "gate.xml"
    assert main(["gate", "--run", "equal", "--baseline", "base", "--junit", str(missing)]) == 2
    assert "give --junit a path in a folder that exists" in capsys.readouterr().err


def run_user_tests(pytester, *args: str):
    """A user's test run, in this process (the fake Ollama and the store are this test's)."""
    return pytester.runpytest(*args, "-p", "no:cacheprovider", "-p", "no:asyncio")


USER_TESTS = """
def test_degraded(workbench):
    workbench.assert_no_regression("degraded", baseline="base")

def test_equal(workbench):
    gate = workbench.assert_no_regression("equal", baseline="base")
    assert gate.passed and gate.baseline.name == "base"
    assert {c.metric for c in gate.comparisons} == {"faithfulness", "context_recall"}
"""


@pytest.mark.slow
def test_the_plugin_fails_a_users_test_on_a_degraded_run_with_the_gates_table(three_runs, settings, pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    result = run_user_tests(pytester, "--workbench-store", settings.store_path)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*workbench gate: degraded vs base: regressed: faithfulness",
            "*metric*slice*baseline*new*verdict*",
            "*faithfulness*all*REGRESSION (drop)*",
            "2 regressions",
            "*since the baseline base: Likely cause: the retriever changed (top_k)*",
            "FAILED test_user.py::test_degraded*",
        ]
    )
    assert "test_equal FAILED" not in result.stdout.str()


def test_the_plugin_reads_the_store_from_the_environment_and_fails_below_a_floor(db, pytester):
    store_run(db, "low", {"faithfulness": [0.6] * N})
    pytester.makepyfile(
        test_user="""
        def test_low(workbench):
            workbench.assert_no_regression("low")

        def test_low_without_floors(workbench):
            gate = workbench.assert_no_regression("low", floors=False)
            assert gate.baseline is None and [c.metric for c in gate.below_floor] == ["faithfulness"]

        def test_unknown(workbench):
            workbench.load("nope")
        """
    )
    result = run_user_tests(pytester)  # WORKBENCH_DB, as for the CLI
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*workbench gate: low vs no baseline: below floor: faithfulness",
            "*BELOW FLOOR*",
            "*workbench: there is no evaluation named 'nope'*",
        ]
    )


@pytest.mark.slow
def test_the_plugin_runs_an_evaluation_through_the_runner_and_gates_an_equal_rerun(kb_db, pytester):
    """The file is kept as a version of the dataset `golden`, as `eval` keeps it; the rerun names that version."""
    golden = ROOT / "data" / "eval" / "golden.jsonl"
    pytester.makepyfile(
        test_user=f"""
        def test_evaluate(workbench):
            first = workbench.evaluate({str(golden)!r}, name="first", metrics=["faithfulness"], limit=2)
            assert first.eval_run.name == "first" and len(first.items) == 2
            again = workbench.evaluate("dataset:golden", name="again", metrics=["faithfulness"], limit=2)
            assert again.baseline == "first"
            assert workbench.means("again") == workbench.means("first")
            gate = workbench.assert_no_regression("again")
            assert gate.baseline.name == "first" and gate.passed
        """
    )
    result = run_user_tests(pytester)
    result.assert_outcomes(passed=1)


def test_the_plugin_is_installed_as_an_entry_point_and_imports_nothing_of_the_workbench_when_loaded():
    [entry] = [e for e in entry_points(group="pytest11") if e.name == "workbench"]
    assert entry.value == "pipeline.pytest_plugin"
    probe = (
        "import sys, pipeline.pytest_plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('pipeline.', 'store', 'duckdb', 'llama_index'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "['pipeline.pytest_plugin']"
