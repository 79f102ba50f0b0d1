"""The judge's repeats (`eval --judge-repeats K`, setting judge_repeats): the score is the mean of the valid
repeats, each repeat is stored with its seed, repeats after the first bypass the response cache, and the report and
Calibration show the judge's spread and its agreement with itself against a simulation of the same judge."""

import dataclasses
import json

import numpy as np
import pytest
from test_app import app, fresh_streamlit_caches  # noqa: F401 - the autouse fixture: no cached store across tests

from pipeline.cli.main import main
from pipeline.errors import InputError
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.judge_variance import (
    MIN_INTERVAL_ITEMS,
    criterion_variance,
    self_agreement,
    self_vs_people,
)
from pipeline.evaluation.runner import report, run_evaluation
from store import evals

METRIC = "judge_correctness"


def rows(n: int) -> list[dict]:
    """n answers given with their contexts (no retrieval, no generation): only claims and the judge are asked."""
    return [
        {
            "id": f"tower-{i:02d}",
            "question": f"How tall is tower {i}?",
            "answer": f"Tower {i} is {300 + i} metres tall.",
            "contexts": [f"Tower {i} is {300 + i} metres tall. It was built in {1900 + i}."],
            "reference": f"Tower {i} is {300 + i} metres tall.",
        }
        for i in range(n)
    ]


@pytest.fixture
def answers(tmp_path):
    def write(n: int = 3):
        path = tmp_path / f"towers-{n}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows(n)))
        return path

    return write


def evaluate(settings, db, path, name: str, k: int):
    return run_evaluation(
        dataclasses.replace(settings, judge_repeats=k), db, load_dataset(str(path)), name, metrics=[METRIC]
    )


def judge_requests(fake, since: int = 0) -> list[dict]:
    """The chat requests for a judge's rubric score (its schema asks for score and reasoning)."""
    return [
        r
        for r in fake.requests[since:]
        if r["path"] == "/api/chat"
        and {"score", "reasoning"} <= set((r["body"].get("format") or {}).get("properties", {}))
    ]


def item_scores(db, name: str) -> dict[str, float]:
    run = evals.get_eval_run(db, name)
    return {r["item_id"]: r[METRIC] for r in evals.item_results(db, run.id, [METRIC])}


@pytest.mark.slow
def test_a_deterministic_judge_has_no_spread_and_agrees_with_itself(fake, settings, db, answers, capsys):
    path = answers(3)
    evaluate(settings, db, path, "once", 1)
    assert main(["eval", str(path), "--name", "thrice", "--metrics", METRIC, "--judge-repeats", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert item_scores(db, "thrice") == item_scores(db, "once")  # the mean of equal repeats is the single score
    (variance,) = summary["judge_variance"]
    assert variance["metric"] == METRIC and variance["items"] == 3 and variance["repeats"] == 3
    assert variance["mean_sd"] == 0 and variance["max_range"] == 0 and variance["changed_share"] == 0
    assert variance["kappa"] == 1.0 and variance["kappa_low"] is None
    assert variance["reasons"]["kappa_low"].startswith("every repeat gave the same score")
    assert [item["values"] for item in variance["per_item"]] == [[v] * 3 for v in item_scores(db, "once").values()]
    stored = evals.judge_repeats(db, evals.get_eval_run(db, "thrice").id)
    assert [(r["repeat"], r["seed"]) for r in stored[:3]] == [(1, 42), (2, 43), (3, 44)]
    assert evals.get_eval_run(db, "thrice").config["judge_repeats"] == 3
    assert "judge_repeats" not in evals.get_eval_run(db, "once").config  # K = 1 records what it always did
    assert report(settings, db, "once").judge_variance == []  # judged once: no variance table


@pytest.mark.slow
def test_the_text_report_shows_the_judge_variance_table(fake, settings, db, answers, capsys):
    fake.judge_noise = (3, 4)
    path = answers(4)
    assert main(["eval", str(path), "--name", "noisy", "--metrics", METRIC, "--judge-repeats", "4"]) == 0
    out = capsys.readouterr().out
    assert "judge variance" in out and "self-agreement κ" in out
    line = next(line for line in out.splitlines() if line.strip("│ ").startswith(METRIC) and "%" in line)
    variance = report(settings, db, "noisy").judge_variance[0]
    assert f"{variance.kappa:.2f}" in line and f"{variance.mean_sd:.2f}" in line
    assert "n/a (only 4 items with repeats" in out  # the interval is withheld, with why
    assert main(["eval", str(path), "--name", "plain", "--metrics", METRIC]) == 0
    assert "judge variance" not in capsys.readouterr().out


def simulated_self_agreement(rng, n_items: int, k: int, datasets: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """(kappa, mean variance over items) of `datasets` simulated evaluations of a judge that picks 3 or 4 at random
    for each of k repeats of n items: kappa as defined in judge_variance, written out here independently (quadratic
    weights: 1 - mean within-item squared difference over distinct pairs / twice the pooled variance)."""
    scores = rng.integers(3, 5, size=(datasets, n_items, k)).astype(float)
    within = scores.var(axis=2, ddof=1)  # per item: the mean squared difference over distinct pairs is 2 x this
    pooled = scores.reshape(datasets, -1).var(axis=1)  # every item weighs the same: they have k repeats each
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(pooled > 0, 1 - within.mean(axis=1) / pooled, 1.0)
    return kappa, within.mean(axis=1)


@pytest.mark.slow
def test_a_judge_that_answers_at_random_between_two_scores_matches_its_simulation(fake, settings, db, answers):
    fake.judge_noise = (3, 4)
    n_items, k = 8, 5
    evaluate(settings, db, answers(n_items), "coin", k)
    (variance,) = report(settings, db, "coin").judge_variance
    values = np.array([s.values for s in variance.per_item])
    assert values.shape == (n_items, k) and set(values.ravel()) == {3.0, 4.0}
    # each repeat asked with its own seed: K judge requests per item, seeds 42..46
    seeds = sorted(r["body"]["options"]["seed"] for r in judge_requests(fake))
    assert seeds == sorted(list(range(42, 42 + k)) * n_items)
    # the item's score is the mean of its repeats
    assert item_scores(db, "coin") == pytest.approx({s.item_id: float(np.mean(s.values)) for s in variance.per_item})
    # the same statistic, computed independently from the stored repeats
    within, pooled = values.var(axis=1, ddof=1), values.var()
    assert variance.kappa == pytest.approx(1 - within.mean() / pooled)
    assert variance.pooled_sd == pytest.approx(np.sqrt(within.mean()))
    assert variance.changed_share == pytest.approx(np.mean(values.max(1) > values.min(1)))
    # ... and near what a simulation of that judge gives (within 3 of the simulation's own standard deviations)
    kappas, variances = simulated_self_agreement(np.random.default_rng(0), n_items, k)
    assert abs(variance.kappa - kappas.mean()) <= 3 * kappas.std()
    assert abs(kappas.mean()) < 0.05  # a coin agrees with itself no better than chance
    assert abs(within.mean() - 0.25) <= 3 * variances.std()  # the two-score variance: 0.5 x 0.5
    assert variance.mean_sd > 0 and variance.max_range == 1


@pytest.mark.slow
def test_repeats_bypass_the_cache_and_a_rerun_asks_only_the_repeats_again(fake, settings, db, answers):
    path = answers(2)
    evaluate(settings, db, path, "first", 3)
    assert len(judge_requests(fake)) == 2 * 3  # items x repeats
    before = len(fake.requests)
    evaluate(settings, db, path, "second", 3)  # a new name: every item is judged again
    again = judge_requests(fake, before)
    # the first repeat is answered from the cache as a single judging is; the others ask the model again
    assert sorted(r["body"]["options"]["seed"] for r in again) == [43, 43, 44, 44]
    second = report(settings, db, "second")
    assert second.judge_variance[0].items == 2 and second.usage["cache_hits"] >= 2
    before = len(fake.requests)
    evaluate(settings, db, path, "second", 3)  # the same name resumes: its items are done, nothing is asked
    assert judge_requests(fake, before) == []


@pytest.mark.slow
def test_an_invalid_reply_in_one_repeat_is_kept_invalid_and_the_mean_uses_the_others(fake, settings, db, answers):
    path = answers(2)
    evaluate(settings, db, path, "clean", 1)

    def second_repeat_of_tower_1(body):
        asked = json.dumps(body.get("messages"))
        return (body.get("options") or {}).get("seed") == 43 and "tower 1?" in asked and "score" in json.dumps(body)

    fake.enqueue("this is not JSON", match=second_repeat_of_tower_1, times=2)  # the reply and its retry
    evaluate(settings, db, path, "with-invalid", 3)
    clean, repeated = item_scores(db, "clean"), item_scores(db, "with-invalid")
    assert repeated == clean  # the two valid repeats agree with the single judging; nothing stands in for the third
    run = evals.get_eval_run(db, "with-invalid")
    stored = {(r["item_id"], r["repeat"]): r for r in evals.judge_repeats(db, run.id)}
    bad = stored[("tower-01", 2)]
    assert (
        bad["status"] == "invalid" and bad["value"] is None and "invalid judge_correctness reply" in bad["explanation"]
    )
    assert [stored[("tower-01", r)]["value"] for r in (1, 3)] == [clean["tower-01"]] * 2
    (variance,) = report(settings, db, "with-invalid").judge_variance
    assert variance.invalid_repeats == 1 and variance.items == 2
    assert next(s for s in variance.per_item if s.item_id == "tower-01").values == [clean["tower-01"]] * 2
    score = next(s for s in evals.item_scores(db, run.id, "tower-01") if s["metric"] == METRIC)
    assert score["status"] == "ok" and score["explanation"].startswith("mean of 2 valid of 3 repeats")


def test_resuming_with_another_number_of_repeats_is_refused(fake, settings, db, answers):
    path = answers(1)
    evaluate(settings, db, path, "pinned", 2)
    for other in (3, 1):
        with pytest.raises(InputError) as caught:
            evaluate(settings, db, path, "pinned", other)
        # K = 1 records neither judge_repeats nor the repeats' temperature, so from 2 to 1 both differ
        assert "different configuration (" in caught.value.message and "judge_repeats)" in caught.value.message
    evaluate(settings, db, path, "pinned", 2)  # the K it was started with resumes


def test_the_cli_refuses_a_number_of_repeats_out_of_range(fake, db, answers, capsys):
    for bad in ("0", "21", "two"):
        with pytest.raises(SystemExit):
            main(["eval", str(answers(1)), "--name", "x", "--judge-repeats", bad])
        assert "--judge-repeats" in capsys.readouterr().err


def test_self_agreement_is_one_when_every_pair_agrees_even_where_kappa_is_undefined():
    same_score = criterion_variance(METRIC, repeat_rows([[4, 4, 4], [4, 4, 4]]))
    assert same_score.kappa == 1.0 and same_score.mean_sd == 0 and same_score.changed_share == 0
    assert same_score.exact == 1.0 and same_score.mean_abs_diff == 0


def repeat_rows(groups, invalid=()):
    return [
        {"item_id": f"i{i}", "repeat": r, "value": None if (i, r) in invalid else v, "status": "ok"}
        | ({"status": "invalid"} if (i, r) in invalid else {})
        for i, values in enumerate(groups)
        for r, v in enumerate(values, start=1)
    ]


def test_an_item_with_fewer_than_two_valid_repeats_is_left_out():
    variance = criterion_variance(METRIC, repeat_rows([[3, 4, 5], [2, 2, 5]], invalid={(1, 1), (1, 3)}))
    assert variance.items == 1 and variance.fewer_than_two == 1 and variance.invalid_repeats == 2
    assert variance.mean_sd == pytest.approx(1.0) and variance.max_range == 2


def test_the_interval_is_shown_from_enough_items_and_holds_the_kappa():
    rng = np.random.default_rng(3)
    truth = rng.integers(1, 6, size=MIN_INTERVAL_ITEMS)
    groups = [[t, t, min(5, t + int(rng.random() < 0.3))] for t in truth]
    kappa, low, high, withheld = self_agreement(groups)
    assert withheld is None and low < kappa < high and 0 < kappa < 1
    _, low, high, withheld = self_agreement(groups[:-1])
    assert low is None and withheld.startswith(f"only {MIN_INTERVAL_ITEMS - 1} items")


def test_the_sentence_says_whether_the_judge_agrees_more_with_people_or_with_itself():
    itself = criterion_variance(METRIC, repeat_rows([[3, 4]] * 10 + [[4, 3]] * 10))
    people = dataclasses.make_dataclass("A", ["kappa", "kappa_low", "kappa_high"])
    more_with_people = self_vs_people(people(0.5, 0.3, 0.7), itself)
    assert more_with_people.startswith("The judge agrees with people (κ 0.50 [0.30, 0.70]) more than with itself")
    assert "disagrees with people less than with its own repeats" in more_with_people
    steady = criterion_variance(METRIC, repeat_rows([[3, 3], [4, 4]]))
    more_with_itself = self_vs_people(people(0.5, 0.3, 0.7), steady)
    assert more_with_itself.startswith("The judge agrees with itself (κ 1.00, no interval) more than with people")
    assert more_with_itself.endswith("Without both intervals, the order may be chance.")
    assert self_vs_people(people(None, None, None), itself) is None


@pytest.mark.slow
def test_calibration_shows_self_agreement_beside_agreement_with_people(fake, settings, db, answers):
    from pipeline.calibration.annotations import save_rating
    from pipeline.history.evaluations import run_ids_of

    fake.judge_noise = (3, 4)
    evaluate(settings, db, answers(6), "noisy-cal", 3)
    run = evals.get_eval_run(db, "noisy-cal")
    for n, run_id in enumerate(run_ids_of(db, run.id)):
        save_rating(db, run_id, "ana", {"correctness": 3 + n % 2, "helpfulness": 3, "faithfulness": 5})
    at = app("pages/calibration.py")
    assert not at.exception, at.exception
    table = at.table[1].value  # correctness's details, below the overview of every criterion
    assert list(table.index[:2]) == ["judge vs people", "judge vs itself (3 repeats)"]
    itself = report(settings, db, "noisy-cal").judge_variance[0]
    assert table.loc["judge vs itself (3 repeats)", "n"] == 6
    assert table.loc["judge vs itself (3 repeats)", "weighted kappa"] == f"{itself.kappa:.2f}"
    sentences = [i.value for i in at.info if "with itself" in i.value]
    assert sentences and ("more than with itself" in sentences[0] or "more than with people" in sentences[0])
    assert any("judged 3 times" in c.value for c in at.caption)


@pytest.mark.slow
def test_the_evaluate_page_shows_the_judge_variance_of_a_run_judged_with_repeats(fake, settings, db, answers):
    fake.judge_noise = (3, 4)
    evaluate(settings, db, answers(5), "page-noisy", 4)
    at = app("pages/evaluate.py")
    assert not at.exception, at.exception
    assert any(h.value == "Judge variance" for h in at.subheader)
    shown = next(t.value for t in at.table if "self-agreement κ" in t.value.columns)
    variance = report(settings, db, "page-noisy").judge_variance[0]
    row = shown.loc["judge correctness"]
    assert row["items"] == 5 and row["repeats"] == 4 and row["self-agreement κ"] == f"{variance.kappa:.2f}"
    assert row["95% interval"].startswith("n/a (only 5 items with repeats")
    changed = [e for e in at.expander if e.label.startswith("Items whose score changed between repeats")]
    assert changed and f"({sum(1 for s in variance.per_item if s.range)})" in changed[0].label


def test_an_item_kept_in_the_journal_keeps_its_repeats_when_replayed(fake, settings, db, answers, monkeypatch):
    from pipeline.evaluation import runner
    from store import journal

    kept = []

    def into_the_journal(db, eval_run_id, item, status, log, scores, error, wall_ms, replace=True, lock_timeout_s=None):
        """As journal.save_item does when the store is busy: the item as an entry, replayed later."""
        item_fields = {"id": item.id, "question": item.question, "reference": item.reference, "tags": item.tags}
        payload = {"eval_run_id": eval_run_id, "item": item_fields, "status": status, "log": log, "scores": scores}
        kept.append(
            journal.write_entry(
                db.path, "eval_item", {**payload, "error": error, "wall_ms": wall_ms, "replace": replace}
            )
        )
        return None, None

    monkeypatch.setattr(runner.journal, "save_item", into_the_journal)
    evaluate(settings, db, answers(2), "journalled", 3)
    assert len(kept) == 2 and journal.pending(settings.store_path) == []  # replayed as the evaluation ended
    stored = evals.judge_repeats(db, evals.get_eval_run(db, "journalled").id)
    assert [(r["item_id"], r["repeat"], r["seed"]) for r in stored] == [
        (f"tower-0{i}", r, 41 + r) for i in range(2) for r in (1, 2, 3)
    ]
