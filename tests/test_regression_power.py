"""The regression check's testing strategy: primary endpoints first (gatekeeping), faithfulness at the claim
level, the minimum detectable effect, and the family-wise error on simulated equal runs."""

import numpy as np
import pytest

from pipeline.errors import InputError
from pipeline.evaluation.family import Test as FamilyTest
from pipeline.evaluation.family import claim_test, gatekeeping, paired_test
from pipeline.evaluation.family import detectable as mde
from pipeline.evaluation.regression import compare_family, detectable, parse_primary


def family(p_faithfulness: float) -> list[FamilyTest]:
    """Two primaries (faithfulness and judge_correctness, whole run), two other whole-run tests, two tag slices."""
    rows = [
        ("faithfulness", "all", p_faithfulness),
        ("judge_correctness", "all", 0.012),
        ("context_recall", "all", 0.004),
        ("answer_relevancy", "all", 0.02),
        ("faithfulness", "numeric", 0.0004),
        ("context_recall", "numeric", 0.03),
    ]
    return [FamilyTest(m, s, 68, delta=-0.1, se=0.04, p_raw=p) for m, s, p in rows]


def test_gatekeeping_against_a_hand_computed_reference():
    """By hand. Shares of alpha: primaries 0.8 / 2 = 0.4 each; the others 0.1 (0.1 of alpha held back), of it 80%
    to the two whole-run tests (0.04 each) and 20% to the two slices (0.01 each).

    Primaries, Holm among themselves: 0.012 x 2 = 0.024 (correctness), max(0.024, 0.03 x 1) = 0.03
    (faithfulness); over the primaries' 0.8: 0.03 and 0.0375, both <= 0.05: rejected, so every primary is
    rejected from alpha = 0.0375 on (g).
    Others, weighted Holm (order p / w: slice 0.0004/0.01, recall 0.004/0.04, relevancy 0.02/0.04, recall slice
    0.03/0.01): 0.0004 x 0.1/0.01 = 0.004; 0.004 x 0.09/0.04 = 0.009; 0.02 x 0.05/0.04 = 0.025; 0.03 x
    0.01/0.01 = 0.03. Adjusted: min(h / 0.1, max(g, h / 0.9)) = max(0.0375, 0.0044, 0.01, 0.0278, 0.0333) =
    0.0375 for all four: all rejected — at their own 10% only the slice would be (0.04).

    With faithfulness at p = 0.045 its adjusted p is max(0.024, 0.045) / 0.8 = 0.05625: not rejected, so the
    others keep their 10% (g = 0.05625): the slice min(0.04, 0.05625) = 0.04 is rejected; recall min(0.09,
    0.05625), relevancy min(0.25, 0.05625) and the recall slice min(0.3, 0.05625) are 0.05625, not rejected."""
    tests = gatekeeping(family(0.03), primary=("faithfulness", "judge_correctness"))
    assert [t.weight for t in tests] == pytest.approx([0.4, 0.4, 0.04, 0.04, 0.01, 0.01])
    assert sum(t.weight for t in tests) == pytest.approx(0.9)  # a tenth of alpha held back
    assert [t.level for t in tests] == pytest.approx([0.02, 0.02, 0.002, 0.002, 0.0005, 0.0005])
    assert [t.primary for t in tests] == [True, True, False, False, False, False]
    assert [t.p_adjusted for t in tests] == pytest.approx([0.0375, 0.03, 0.0375, 0.0375, 0.0375, 0.0375])
    assert all(t.rejected for t in tests) and all(t.family_size == 6 for t in tests)

    tests = gatekeeping(family(0.045), primary=("faithfulness", "judge_correctness"))
    assert [t.p_adjusted for t in tests] == pytest.approx([0.05625, 0.03, 0.05625, 0.05625, 0.04, 0.05625])
    assert [t.rejected for t in tests] == [False, True, False, False, True, False]


def test_the_family_spends_ninety_percent_of_alpha_in_every_shape():
    """Primaries and others, others alone, primaries alone: the weights (shares of alpha at first test) sum to
    0.9, and a test is rejected at alpha only where its Holm adjusted p is within the 0.9 alpha spent."""
    tests = gatekeeping(family(0.03), primary=())
    assert sum(t.weight for t in tests) == pytest.approx(0.9)
    tests = gatekeeping(family(0.03)[:1], primary=("faithfulness",))
    assert tests[0].weight == pytest.approx(0.9) and tests[0].p_adjusted == pytest.approx(0.03 / 0.9)
    single = gatekeeping([FamilyTest("faithfulness", "all", 68, delta=-0.1, se=0.04, p_raw=0.046)])
    assert single[0].p_adjusted == pytest.approx(0.046 / 0.9) and not single[0].rejected  # 0.046 > 0.045


def test_without_a_primary_the_family_is_the_weighted_holm_of_before():
    """No primary tested (none declared): 80% of the 0.9 alpha spent to the whole-run tests, 20% to the
    slices, Holm."""
    tests = gatekeeping(family(0.03), primary=())
    assert [t.weight for t in tests] == pytest.approx([0.18, 0.18, 0.18, 0.18, 0.09, 0.09])
    # order by p / w: 0.0004/0.1, 0.004/0.2, 0.012/0.2, 0.02/0.2, 0.03/0.2, 0.03/0.1 (relative weights); by
    # hand, p times the weight left over its own: 0.0004 x 1/0.1 = 0.004, 0.004 x 0.9/0.2 = 0.018, 0.012 x
    # 0.7/0.2 = 0.042, 0.02 x 0.5/0.2 = 0.05, then 0.03 x 0.3/0.2 = 0.045 and 0.03 x 0.1/0.1 = 0.03, both raised
    # to 0.05 by the running maximum; each over the 0.9 spent
    expected = np.array([0.05, 0.042, 0.018, 0.05, 0.004, 0.05]) / 0.9
    assert [t.p_adjusted for t in tests] == pytest.approx(list(expected))


def holm_reject(p, alpha):
    """Holm's step-down, written from its definition: reject in increasing order while p_(k) <= alpha / (m - k)."""
    order = np.argsort(p, kind="stable")
    reject = np.zeros(len(p), dtype=bool)
    for k, i in enumerate(order):
        if p[i] > alpha / (len(p) - k):
            break
        reject[i] = True
    return reject


def test_gatekeeping_matches_holm_from_statsmodels_and_from_its_definition_on_random_families(monkeypatch):
    """Equal weights within each group (primaries; three other whole-run tests, no slices): the procedure is
    Holm at 0.8 alpha among the primaries, then Holm among the others at 0.9 alpha if every primary is rejected,
    else at 0.1 alpha. Families with non-monotone raw step-down values are among them."""
    import gc

    from statsmodels.stats.multitest import multipletests

    monkeypatch.setattr(gc, "collect", lambda *args: 0)  # multipletests runs a full collection on every call
    rng = np.random.default_rng(26)
    names = ["faithfulness", "judge_correctness", "context_recall", "context_precision", "answer_relevancy"]
    for _ in range(300):
        k = int(rng.integers(1, 3))
        p = rng.uniform(0, 0.06, len(names)) ** rng.uniform(0.5, 2)
        tests = [FamilyTest(m, "all", 68, delta=-0.1, se=0.04, p_raw=float(q)) for m, q in zip(names, p, strict=True)]
        for alpha in (0.01, 0.05, 0.1):
            gatekeeping(tests, primary=names[:k], alpha=alpha)
            first = multipletests(p[:k], alpha=0.8 * alpha, method="holm")[0]
            assert list(first) == list(holm_reject(p[:k], 0.8 * alpha))
            level = 0.9 * alpha if first.all() else 0.1 * alpha
            others = multipletests(p[k:], alpha=level, method="holm")[0]
            assert list(others) == list(holm_reject(p[k:], level))
            assert [t.rejected for t in tests] == [*first, *others]


def test_claim_level_faithfulness_on_a_known_clustered_case():
    """Four items; base claims (2, 4, 1, 3) with (2, 3, 1, 3) supported, new (2, 4, 2, 2) with (1, 3, 1, 2).
    By hand: R_base = 9/10, R_new = 7/10, change -0.2. Each item left out of both runs: 6/8 - 7/8 = -0.125,
    4/6 - 6/6 = -0.333333, 6/8 - 8/9 = -0.138889, 5/8 - 6/7 = -0.232143 (mean -0.207341); squared deviations
    0.0067800 + 0.0158740 + 0.0046857 + 0.0006151 = 0.0279548; SE^2 = 3/4 x 0.0279548 = 0.0209661, SE =
    0.144797; t = -1.38124 on 3 df, one-sided p = 0.130553."""
    mb, mn = [2, 4, 1, 3], [2, 4, 2, 2]
    sb, sn = [2, 3, 1, 3], [1, 3, 1, 2]
    test = claim_test("faithfulness", "all", np.divide(sb, mb), mb, np.divide(sn, mn), mn)
    assert test.claim_level and test.n == 4
    assert test.delta == pytest.approx(-0.2)
    assert test.se == pytest.approx(0.144797, abs=1e-6)
    assert test.p_raw == pytest.approx(0.130553, abs=1e-6)
    # the item means' paired t-test answers another question, each item counting once whatever its claims:
    # (-0.5 + 0 - 0.5 + 0) / 4
    item_means = paired_test("faithfulness", "all", np.subtract(np.divide(sn, mn), np.divide(sb, mb)))
    assert item_means.delta == pytest.approx(-0.25) and not item_means.claim_level


def test_claims_that_stand_or_fall_together_widen_the_claim_level_interval():
    """Each answer's claims all supported or all not (a cluster of perfectly dependent claims): treating the
    claims as independent would understate the standard error; the item-level (cluster) SE does not. On equal
    runs the one-sided test at 5% rejects about 5% of the time; the naive binomial SE far more often."""
    rng = np.random.default_rng(4)
    rejected = naive = 0
    for _ in range(400):
        m_b, m_n = rng.integers(1, 9, 68), rng.integers(1, 9, 68)
        p = rng.beta(4, 1.2, 68)
        all_b, all_n = (rng.uniform(size=68) < p).astype(float), (rng.uniform(size=68) < p).astype(float)
        test = claim_test("faithfulness", "all", all_b, m_b, all_n, m_n)
        rejected += test.p_raw <= 0.05
        r_b, r_n = (all_b * m_b).sum() / m_b.sum(), (all_n * m_n).sum() / m_n.sum()
        naive_se = np.sqrt(r_b * (1 - r_b) / m_b.sum() + r_n * (1 - r_n) / m_n.sum())
        naive += (r_n - r_b) / naive_se <= -1.645
        assert test.se > naive_se
    assert rejected / 400 <= 0.08 and naive / 400 >= 0.12


def test_the_minimum_detectable_effect_on_a_known_case():
    """n = 68 (67 df), first tested at 0.8 x 0.05 = 0.04; t_0.96 = 1.777646, t_0.8 = 0.847019. SE 0.03: the
    rejection needs an estimate of -1.777646 x 0.03 = -0.053329 (beyond min_effect 0.05), plus 0.847019 x 0.03
    = 0.025411 for 80% power: 0.078740. SE 0.01: the rejection needs only -0.017776, min_effect 0.05 rules:
    0.05 + 0.008470 = 0.058470."""
    test = FamilyTest("faithfulness", "all", 68, delta=-0.02, se=0.03, p_raw=0.3, weight=0.8, level=0.04)
    assert mde(test, 0.05) == pytest.approx(0.078740, abs=1e-6)
    test.se = 0.01
    assert mde(test, 0.05) == pytest.approx(0.058470, abs=1e-6)
    test.se = 0.0
    assert mde(test, 0.05) == 0.05
    assert mde(FamilyTest("faithfulness", "all", 1), 0.05) is None  # not tested


def test_the_detectable_drop_is_reported_in_words_with_the_primary_first():
    rng = np.random.default_rng(8)
    m_b, m_n = rng.integers(1, 9, 68), rng.integers(1, 9, 68)
    p = rng.beta(4, 1.2, 68)

    def items(values, claims=None):
        return {f"i{k}": (float(v), k, [], None if claims is None else int(claims[k])) for k, v in enumerate(values)}

    base = {
        "faithfulness": items(rng.binomial(m_b, p) / m_b, m_b),
        "context_recall": items(rng.uniform(0.5, 1, 68)),
    }
    new = {
        "faithfulness": items(rng.binomial(m_n, p) / m_n, m_n),
        "context_recall": items(rng.uniform(0.5, 1, 68)),
    }
    comparisons = compare_family(base, new, 0.05)
    faith = next(c for c in comparisons if c.metric == "faithfulness")
    assert faith.primary and faith.claim_level and faith.level == pytest.approx(0.04)
    assert 0.05 < faith.mde < 0.12
    lines = detectable(comparisons)
    assert (
        lines[0] == f"this run could have detected a faithfulness drop of {faith.mde:.3f} or more "
        "(80% power, 68 items, claim level)"
    )
    assert lines[1].startswith(
        "the other metrics' detectable drops (80% power at their fallback share of alpha): context_recall 0."
    )


def test_primary_metrics_are_registered_metric_names():
    assert parse_primary("faithfulness, judge_correctness") == ("faithfulness", "judge_correctness")
    assert parse_primary("") == ()
    with pytest.raises(InputError, match="not a registered metric"):
        parse_primary("faithfulness,recall")


@pytest.mark.slow
def test_equal_runs_raise_any_alert_in_at_most_five_percent_of_comparisons_under_every_noise_model():
    """300 equal pairs on the golden set's shape (the bench runs 2,000 per model): the family-wise rate of any
    rejection (min_effect aside) stays within sampling error of 5% (0.08: about 2 standard errors above)."""
    from bench.regression import simulate

    result = simulate("mixed", 0.0, 150)
    assert result["any_rejection"]["rate"] <= 0.08
    result = simulate("claims", 0.0, 300)
    assert result["tests_per_comparison"] == 45  # 9 metrics × (overall + the 4 tags with ≥ 10 items)
    assert result["any_rejection"]["rate"] <= 0.08 and result["any_alert"]["rate"] <= 0.08


def test_a_true_drop_of_a_tenth_in_faithfulness_is_caught_with_the_power_the_bench_reports():
    from bench.regression import simulate

    assert simulate("claims", 0.1, 100)["faithfulness_overall_alert"]["rate"] >= 0.75  # the bench: 0.88


@pytest.mark.slow
def test_gate_and_eval_text_and_the_alert_say_what_drop_the_run_could_have_detected(db, settings, capsys):
    """The minimum detectable drop is where a person reads the result: the gate's text, the report of eval (and
    the Evaluate page, test_app), and each comparison's message, so an alert on Trends carries it too."""
    from test_regression import store_run

    from pipeline.cli.main import main
    from pipeline.evaluation.runner import report
    from store import alerts as alert_store

    rng = np.random.default_rng(12)
    base = rng.uniform(0.6, 1.0, 40)
    store_run(db, "before", {"faithfulness": base, "context_recall": base})
    store_run(db, "same", {"faithfulness": base + rng.normal(0, 0.05, 40), "context_recall": base})
    assert main(["gate", "--run", "same"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "this run could have detected a faithfulness drop of 0." in out and "(80% power, 40 items)" in out
    assert "the other metrics' detectable drops" in out and "context_recall 0." in out
    lines = report(settings, db, "same").detectable  # what eval prints after its report, and the Evaluate page
    assert lines[0].startswith("this run could have detected a faithfulness drop of 0.")
    store_run(db, "worse", {"faithfulness": base - 0.3, "context_recall": base})
    assert main(["gate", "--run", "worse", "--baseline", "same"]) == 1
    capsys.readouterr()
    drop = next(a for a in alert_store.list_alerts(db, "open") if a["kind"] == "drop" and a["slice"] == "all")
    assert "the smallest drop it could detect: 0." in drop["message"] and "(80% power)" in drop["message"]


@pytest.mark.slow
def test_eval_prints_the_drop_its_comparison_could_have_detected(fake, kb_db, tmp_path, capsys):
    from conftest import ROOT

    from pipeline.cli.main import main

    golden = tmp_path / "five.jsonl"
    lines = (ROOT / "data" / "eval" / "golden.jsonl").read_text().splitlines()
    golden.write_text("\n".join(lines[:5]) + "\n")
    assert main(["eval", str(golden), "--name", "first"]) == 0
    first = capsys.readouterr().out
    assert "could have detected" not in first  # no baseline: nothing was compared
    assert main(["eval", str(golden), "--name", "second"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "this run could have detected a faithfulness drop of 0." in out and "(80% power, 5 items" in out
