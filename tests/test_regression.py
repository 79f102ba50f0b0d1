"""Regression detection on synthetic pairs of runs with known effects, the gate's exit codes, pins."""

import json

import numpy as np
import pytest

from pipeline.cli.main import main
from pipeline.errors import InputError
from pipeline.evaluation.regression import compare_metric, parse_floors
from store import alerts as alert_store
from store.evals import create_eval_run, mark_eval_run


def pairs(rng, n, shift, sd=0.1, tags=("rag",)):
    base = rng.uniform(0.3, 0.9, n)
    new = np.clip(base + shift + rng.normal(0, sd, n), 0, 1)
    as_items = lambda values: {f"i{k}": (float(v), k, list(tags)) for k, v in enumerate(values)}  # noqa: E731
    return as_items(base), as_items(new)


def test_a_clear_drop_is_caught_with_its_interval_and_worst_items():
    base, new = pairs(np.random.default_rng(1), 40, shift=-0.2)
    result = compare_metric("faithfulness", "all", base, new, 0.05)
    assert result.regression and result.kind == "drop" and result.n == 40
    assert result.ci_high < -0.05 and result.ci_low < result.delta < result.ci_high
    assert len(result.worst_items) == 5
    assert result.worst_items[0]["delta"] == min(new[i][0] - base[i][0] for i in base)


def test_holm_controls_the_family_and_reports_raw_and_adjusted_p():
    from pipeline.evaluation.family import Test, holm

    tests = [
        Test("m", f"s{k}", 30, delta=-0.1, se=0.05, p_raw=p, weight=0.25)
        for k, p in enumerate((0.001, 0.02, 0.03, 0.2))
    ]
    holm(tests)
    # step-down with equal weights: 4 × 0.001, then max(…, 3 × 0.02), max(…, 2 × 0.03), max(…, 1 × 0.2)
    assert [t.p_adjusted for t in tests] == pytest.approx([0.004, 0.06, 0.06, 0.2])
    assert [t.rejected for t in tests] == [True, False, False, False]
    assert all(t.family_size == 4 for t in tests)


def test_holm_adjusted_p_values_never_decrease_along_the_step_down():
    """Raw step-down values that fall (3 x 0.04 = 0.12, then 2 x 0.045 = 0.09): the running maximum keeps the
    third at 0.12, so it is not rejected at 0.1 after the second was kept. Expected values are statsmodels'
    multipletests(p, alpha=0.1, method="holm") for these p (statsmodels 0.15: reject [F, F, T, F], corrected
    [0.12, 0.3, 0.04, 0.12]), written out here so the test does not need it."""
    from pipeline.evaluation.family import Test, holm

    raw = (0.045, 0.3, 0.01, 0.04)  # given out of order: the step-down sorts them
    tests = [Test("m", f"s{k}", 30, delta=-0.1, se=0.05, p_raw=p, weight=0.25) for k, p in enumerate(raw)]
    holm(tests, alpha=0.1)
    assert [t.p_adjusted for t in tests] == pytest.approx([0.12, 0.3, 0.04, 0.12])
    assert [t.rejected for t in tests] == [False, False, True, False]


def test_weighted_holm_keeps_the_running_maximum():
    """Weights 0.5, 0.25, 0.25 (by hand: order by p / w = 0.06, 0.02, 0.08; the step-down multiplies each p by
    the weight left over its own weight: B 0.005 x 1 / 0.25 = 0.02, A 0.03 x 0.75 / 0.5 = 0.045, C 0.02 x 0.25 /
    0.25 = 0.02, which the running maximum raises to 0.045)."""
    from pipeline.evaluation.family import Test, holm

    tests = [
        Test("m", name, 30, delta=-0.1, se=0.05, p_raw=p, weight=w)
        for name, p, w in (("A", 0.03, 0.5), ("B", 0.005, 0.25), ("C", 0.02, 0.25))
    ]
    holm(tests)
    assert [t.p_adjusted for t in tests] == pytest.approx([0.045, 0.02, 0.045])
    assert [t.rejected for t in tests] == [True, True, True]


def test_faithfulness_is_tested_on_claims_where_every_item_has_its_count():
    """The share of supported claims: (1 x 1 + 4 x 0.5 + 8 x 1) / 13 before, (1 x 0 + 4 x 0.5 + 8 x 1) / 13
    after: a change of -1/13, not the item means' -1/3. An old score without its count: item means."""
    from pipeline.evaluation.family import family_tests

    def items(values, claims):
        return {f"i{k}": (v, k, [], c) for k, (v, c) in enumerate(zip(values, claims, strict=True))}

    base = {"faithfulness": items([1.0, 0.5, 1.0] * 2, [1, 4, 8] * 2)}
    new = {"faithfulness": items([0.0, 0.5, 1.0] * 2, [1, 4, 8] * 2)}
    [test] = family_tests(base, new)
    assert test.claim_level and test.delta == pytest.approx(-1 / 13)
    new["faithfulness"]["i0"] = (0.0, 0, [], None)
    [test] = family_tests(base, new)
    assert not test.claim_level and test.delta == pytest.approx(-1 / 3)


def test_small_slices_stay_out_of_the_family():
    from pipeline.evaluation.regression import compare_family

    rng = np.random.default_rng(5)
    base, new = pairs(rng, 40, shift=0.0)
    for k in range(9):  # a 9-item tag slice that collapses
        key = f"i{k}"
        base[key] = (0.9, k, ["rag", "tiny"])
        new[key] = (0.1, k, ["rag", "tiny"])
    slices = {c.slice for c in compare_family({"faithfulness": base}, {"faithfulness": new}, 0.05)}
    assert slices == {"all", "rag"}


def test_a_small_drop_below_the_minimum_effect_is_not_an_alert():
    base, new = pairs(np.random.default_rng(3), 200, shift=-0.02, sd=0.01)
    result = compare_metric("faithfulness", "all", base, new, 0.05)
    assert result.ci_high < 0 and not result.regression


def test_judge_scores_use_the_effect_scaled_to_their_range():
    base = {f"i{k}": (4.0, k, []) for k in range(20)}
    new = {f"i{k}": (3.9, k, []) for k in range(20)}
    assert not compare_metric("judge_correctness", "all", base, new, 0.05).regression
    new = {f"i{k}": (3.0, k, []) for k in range(20)}
    assert compare_metric("judge_correctness", "all", base, new, 0.05).regression


def test_too_few_shared_items_are_reported_not_tested():
    base, new = pairs(np.random.default_rng(2), 3, shift=-0.5)
    result = compare_metric("faithfulness", "all", base, new, 0.05)
    assert result.kind == "too_few" and not result.regression


def test_floors_are_configurable_per_metric():
    assert parse_floors("faithfulness=0.70, context_recall=0.75") == {"faithfulness": 0.7, "context_recall": 0.75}
    with pytest.raises(InputError):
        parse_floors("recall=0.5")


def store_run(db, name, values_by_metric, judge_digest="d1", config=None, tags=("rag",), dataset_hash="h", failed=()):
    n = len(next(iter(values_by_metric.values())))
    run_id = create_eval_run(
        db, name, "golden.jsonl", dataset_hash, config or {"top_k": 5}, "llama3.2", judge_digest, "judge-v1", n, 1
    )
    with db.cursor() as cur:
        for metric, values in values_by_metric.items():
            for k, v in enumerate(values):
                cur.execute(
                    "INSERT INTO scores (eval_run_id, item_id, run_id, metric, value, status) "
                    "VALUES (?, ?, ?, ?, ?, 'ok')",
                    [run_id, f"i{k}", 1000 * run_id + k, metric, v],
                )
        for k in range(n):
            cur.execute(
                "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, tags) "
                "VALUES (?, ?, ?, ?, 'q', ?)",
                [run_id, f"i{k}", 1000 * run_id + k, "failed" if k in failed else "done", list(tags)],
            )
    mark_eval_run(db, run_id, "finished")
    return run_id


@pytest.mark.slow
def test_gate_exit_codes_and_stored_alerts(db, capsys):
    rng = np.random.default_rng(7)
    base = rng.uniform(0.8, 1.0, 30)
    store_run(db, "monday", {"faithfulness": base, "context_recall": base})
    store_run(db, "tuesday", {"faithfulness": base + rng.normal(0, 0.01, 30), "context_recall": base})
    assert main(["gate", "--run", "tuesday"]) == 0
    assert "no regression" in capsys.readouterr().out
    store_run(db, "wednesday", {"faithfulness": base - 0.3, "context_recall": base}, config={"top_k": 2})
    assert main(["gate", "--run", "wednesday", "--baseline", "monday", "--json"]) == 1  # a drop, and a floor
    report = json.loads(capsys.readouterr().out)
    assert report["regression"] and report["below_floor"]
    kinds = {(c["metric"], c["slice"], c["kind"]) for c in report["comparisons"] if c["regression"]}
    assert kinds == {("faithfulness", "all", "drop"), ("faithfulness", "rag", "drop")}  # a floor is not a regression
    below = [(c["metric"], c["kind"], c["regression"]) for c in report["comparisons"] if c["below_floor"]]
    assert below == [("faithfulness", "floor", False)]
    open_alerts = alert_store.list_alerts(db, "open")
    assert {a["run_name"] for a in open_alerts} == {"wednesday"}
    assert sorted(a["kind"] for a in open_alerts) == ["drop", "drop", "floor"]
    drop = next(a for a in open_alerts if a["kind"] == "drop" and a["slice"] == "all")
    assert drop["config_diff"] == {"top_k": [5, 2]} and drop["component"] == "retriever"  # what changed
    assert len(drop["worst_items"]) == 5 and drop["n"] == 30
    assert (alert_store.count_open_alerts(db), alert_store.count_below_floor(db)) == (2, 1)
    assert alert_store.acknowledge(db, drop["id"], "expected: top_k lowered on purpose")
    assert (alert_store.count_open_alerts(db), alert_store.count_below_floor(db)) == (1, 1)


@pytest.mark.slow
def test_gate_exits_0_on_a_pass_1_on_a_regression_and_3_below_a_floor_only(db, capsys):
    rng = np.random.default_rng(11)
    low = rng.uniform(0.55, 0.65, 30)  # faithfulness about 0.60: below its floor of 0.70
    high = rng.uniform(0.85, 0.95, 30)

    def gate(name: str) -> tuple[int, dict]:
        code = main(["gate", "--run", name, "--json"])
        return code, json.loads(capsys.readouterr().out)

    store_run(db, "first", {"faithfulness": low, "context_recall": high})
    code, report = gate("first")  # a first run: no baseline, its floor breach is not a regression
    assert code == 3 and report["baseline"] is None
    assert (report["regression"], report["below_floor"]) == (False, True)
    assert [(c["kind"], c["regression"], c["below_floor"]) for c in report["comparisons"]] == [("floor", False, True)]
    assert (alert_store.count_open_alerts(db), alert_store.count_below_floor(db)) == (0, 1)
    store_run(db, "second", {"faithfulness": low, "context_recall": high})
    code, report = gate("second")  # the first run, below its floor, is still the baseline
    assert code == 3 and report["baseline"] == "first" and not report["regression"]
    store_run(db, "third", {"faithfulness": low - 0.3, "context_recall": high})
    code, report = gate("third")  # a drop (and a floor): 1
    assert code == 1 and report["baseline"] == "second" and report["regression"] and report["below_floor"]
    store_run(db, "fourth", {"faithfulness": high, "context_recall": high})
    code, report = gate("fourth")  # 'third' has an open regression alert: not a baseline
    assert code == 0 and report["baseline"] == "second"
    assert (report["regression"], report["below_floor"]) == (False, False)
    assert main(["gate", "--run", "first"]) == 3
    shown = capsys.readouterr().out
    assert "BELOW FLOOR" in shown and "no regression" in shown and "1 below floor: faithfulness" in shown
    assert "REGRESSION" not in shown


def test_an_empty_floors_variable_turns_floors_off_and_an_unset_one_keeps_the_defaults(db, capsys, monkeypatch):
    store_run(db, "low", {"faithfulness": [0.5] * 10, "context_recall": [0.5] * 10})
    monkeypatch.setenv("WORKBENCH_FLOORS", "")
    assert main(["gate", "--run", "low", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["comparisons"] == []
    assert alert_store.list_alerts(db) == []
    monkeypatch.delenv("WORKBENCH_FLOORS")
    assert main(["gate", "--run", "low", "--json"]) == 3
    below = [c["metric"] for c in json.loads(capsys.readouterr().out)["comparisons"] if c["below_floor"]]
    assert below == ["faithfulness", "context_recall"]  # the default floors


@pytest.mark.slow
def test_a_first_evaluation_on_a_fresh_store_is_below_floor_not_a_regression_and_still_the_baseline(
    fake, settings, kb_db
):
    """A real evaluation over the first items of data/eval/golden.jsonl, with floors the fake's answers fall
    below (its answer relevancy is well under 0.99): below floor, no regression alert, and the next run's
    baseline."""
    import dataclasses

    from conftest import ROOT

    from pipeline.evaluation.dataset import load_dataset
    from pipeline.evaluation.regression import resolve
    from pipeline.evaluation.runner import report, run_evaluation

    floored = dataclasses.replace(settings, floors="faithfulness=0.70,answer_relevancy=0.99")
    golden = load_dataset(ROOT / "data" / "eval" / "golden.jsonl").select(limit=3)
    metrics = ["faithfulness", "answer_relevancy"]
    first = run_evaluation(floored, kb_db, golden, "first", metrics=metrics)
    assert first.status == "finished" and first.regressions == []
    assert [(c.metric, c.kind, c.regression) for c in first.below_floor] == [("answer_relevancy", "floor", False)]
    assert alert_store.count_open_alerts(kb_db) == 0 and alert_store.count_below_floor(kb_db) == 1
    [alert] = alert_store.list_alerts(kb_db, "open")
    assert (alert["kind"], alert["metric"], alert["run_name"]) == ("floor", "answer_relevancy", "first")
    assert [c.metric for c in report(floored, kb_db, "first").below_floor] == ["answer_relevancy"]
    second = run_evaluation(floored, kb_db, golden, "second", metrics=metrics)
    assert second.regressions == [] and [c.metric for c in second.below_floor] == ["answer_relevancy"]
    assert resolve(kb_db, "second", None)[1].name == "first"  # below its floor, otherwise eligible: the baseline
    assert alert_store.list_alerts(kb_db, "open")[0]["baseline_name"] == "first"


def test_gate_refuses_runs_under_different_judge_pins(db, capsys):
    store_run(db, "a", {"faithfulness": [0.9] * 10})
    store_run(db, "b", {"faithfulness": [0.9] * 10}, judge_digest="other")
    assert main(["gate", "--run", "b", "--baseline", "a"]) == 2
    assert "different judge pins" in capsys.readouterr().err
    assert main(["gate", "--run", "nope"]) == 2


@pytest.mark.slow
def test_the_default_baseline_is_the_pinned_run_else_the_previous_one(db):
    first = store_run(db, "first", {"faithfulness": [0.9] * 10})
    store_run(db, "second", {"faithfulness": [0.9] * 10})
    third = store_run(db, "third", {"faithfulness": [0.9] * 10})
    from pipeline.evaluation.regression import resolve

    assert resolve(db, "third", None)[1].name == "second"
    alert_store.pin_baseline(db, "golden.jsonl", first)
    assert resolve(db, "third", None)[1].name == "first"
    alert_store.pin_baseline(db, "golden.jsonl", third)
    assert resolve(db, "third", None)[1].name == "second"


@pytest.mark.slow
def test_one_baseline_rule_pinned_else_the_newest_comparable_clean_run(db):
    """Same dataset hash and size, same judge pin, no failed item (read from the items), no open regression
    alert; a metric below its floor is no reason to skip a run."""
    from pipeline.evaluation.regression import resolve
    from store.baselines import clean_runs

    values = {"faithfulness": [0.9] * 10}
    alert = {c: None for c in alert_store.ALERT_COLUMNS[2:]} | {"metric": "faithfulness", "slice": "all", "n": 0}
    store_run(db, "comparable", values)
    below = store_run(db, "below-its-floor", values)
    alert_store.replace_open_alerts(db, below, None, [alert | {"kind": "floor", "message": "below its floor"}])
    store_run(db, "other-dataset", values, dataset_hash="h2")
    store_run(db, "smaller", {"faithfulness": [0.9] * 5})
    store_run(db, "with-a-failure", values, failed=(3,))
    alerted = store_run(db, "with-an-open-alert", values)
    alert_store.replace_open_alerts(db, alerted, None, [alert | {"kind": "drop", "message": "dropped"}])
    store_run(db, "other-judge", values, judge_digest="d2")
    new = store_run(db, "new", values)
    assert resolve(db, "new", None)[1].name == "below-its-floor"
    assert clean_runs(db, [1, below, alerted, new]) == {1, below, new}
    alert_id = next(a["id"] for a in alert_store.list_alerts(db, "open") if a["kind"] == "drop")
    alert_store.acknowledge(db, alert_id, "looked at it")
    assert resolve(db, "new", None)[1].name == "with-an-open-alert"
    alert_store.pin_baseline(db, "golden.jsonl", 1)
    assert resolve(db, "new", None)[1].name == "comparable"


def test_the_configuration_diff_names_the_cache_setting_the_judge_pin_and_the_dataset(db):
    from pipeline.evaluation.regression import config_diff, described_config
    from store.evals import get_eval_run

    store_run(db, "a", {"faithfulness": [0.9] * 10}, config={"top_k": 5, "cache_enabled": True})
    store_run(db, "b", {"faithfulness": [0.9] * 8}, config={"top_k": 5, "cache_enabled": False}, dataset_hash="h2")
    store_run(db, "c", {"faithfulness": [0.9] * 10}, judge_digest="d2")
    a, b, c = (described_config(db, get_eval_run(db, name)) for name in "abc")
    assert config_diff(a, b) == {"cache_enabled": [True, False], "dataset_hash": ["h", "h2"], "dataset_size": [10, 8]}
    assert config_diff(a, c) == {
        "cache_enabled": [True, None],
        "judge_pin": ["llama3.2@d1 / judge-v1", "llama3.2@d2 / judge-v1"],
    }


@pytest.mark.slow
def test_resuming_a_name_over_another_dataset_is_refused_a_cache_change_is_not(fake, settings, kb_db):
    import dataclasses

    from test_evaluation import ITEMS, dataset

    from pipeline.evaluation.dataset import Dataset
    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "nightly")
    other = Dataset("golden-test.jsonl", list(ITEMS), [], "another-hash")
    with pytest.raises(InputError, match="started over a different dataset"):
        run_evaluation(settings, kb_db, other, "nightly")
    resumed = run_evaluation(dataclasses.replace(settings, cache_enabled=False), kb_db, dataset(ITEMS[:2]), "nightly")
    assert resumed.progress.skipped == 1 and resumed.progress.done == 2
    with kb_db.cursor() as cur:
        assert cur.execute("SELECT count(*) FROM eval_items").fetchone()[0] == 2
