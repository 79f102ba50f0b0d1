"""Judge alignment's selection (pipeline/calibration/alignment.py) with a scripted judge: nested by question, so
no item a candidate was chosen or fitted on is in the figure reported; accepted only when the held-out gain's
interval lies above zero; every finished step kept, so a rerun redoes none."""

import numpy as np
import pytest

from bench.align import ScriptedJudge, draw_items
from pipeline.calibration.alignment import OUTER_FOLDS, MemoryMemo, Procedure
from pipeline.errors import InputError


class RecordingMemo(MemoryMemo):
    """Keeps, for each step computed, the items the judge read for it (scored, shown as shots, or written from)."""

    def __init__(self, judge):
        super().__init__()
        self.judge, self.read = judge, {}

    def put(self, key, value):
        super().put(key, value)
        self.read[key] = self.judge.last_read


class RecordingJudge(ScriptedJudge):
    def score(self, candidate, items):
        self.last_read = {it.id for it in items} | set(candidate.shots)
        self.scored_as = {it.id for it in items}
        return super().score(candidate, items)

    def clarify(self, pairs):
        self.last_read = {it.id for it, _ in pairs}
        return super().clarify(pairs)


def scripted(biased: bool, seed: int):
    items = draw_items(np.random.default_rng([seed, biased]), 20, "")
    judge = RecordingJudge(biased, f"test-{biased}-{seed}")
    judge.by_id.update({it.id: it for it in items})
    return items, judge


def test_no_item_chosen_or_fitted_on_is_in_the_reported_figure():
    items, judge = scripted(True, 1)
    memo = RecordingMemo(judge)
    result = Procedure(judge, memo).run(items, seed=1)
    assert len(result.folds) == OUTER_FOLDS
    reported = [i for fold in result.folds for i in fold.reported_on]
    assert sorted(reported) == sorted(it.id for it in items)  # every item reported once, by one fold
    group = {it.id: it.group for it in items}
    for fold in result.folds:
        held = set(fold.reported_on)
        assert not held & set(fold.fitted_on) and not held & set(fold.chosen_on)
        assert not {group[i] for i in held} & {group[i] for i in fold.fitted_on}  # whole questions held out
        steps = {k: v for k, v in memo.read.items() if k.startswith(f"outer{fold.index}/")}
        choosing = {k: v for k, v in steps.items() if k.startswith(f"outer{fold.index}/inner")}
        assert choosing and all(read <= set(fold.fitted_on) for read in choosing.values())
        if fold.recipe != "current":
            (scored,) = [k for k in steps if k.startswith(f"outer{fold.index}/score/")]
            fitted_reads = steps[scored] - held  # the shots
            assert held <= steps[scored] and fitted_reads <= set(fold.fitted_on)
        clarified = steps.get(f"outer{fold.index}/clarify")
        assert clarified is None or clarified <= set(fold.fitted_on)


def test_a_biased_judge_is_aligned_by_a_clarification_and_the_gain_is_held_out():
    items, judge = scripted(True, 2)
    result = Procedure(judge, MemoryMemo()).run(items, seed=2)
    assert result.accepted, result.reason
    assert "short answers" in result.final.clarification
    assert result.gain_low > 0 and result.gain_low <= result.gain <= result.gain_high
    assert result.kappa_low <= result.kappa <= result.kappa_high
    assert result.kappa - result.current_kappa == pytest.approx(result.gain)


def test_a_noise_judge_keeps_the_current_prompt_and_says_why():
    refused = []
    for seed in range(3):
        items, judge = scripted(False, seed)
        refused.append(Procedure(judge, MemoryMemo()).run(items, seed=seed))
    assert not any(r.accepted for r in refused)
    assert all("does not lie above zero" in r.reason or "current prompt" in r.reason for r in refused)


def test_a_rerun_with_the_same_memo_asks_the_judge_nothing():
    items, judge = scripted(True, 3)
    memo = MemoryMemo()
    first = Procedure(judge, memo).run(items, seed=3)
    calls = []
    judge.score = lambda *a: calls.append(a)
    judge.clarify = lambda *a: calls.append(a)
    again = Procedure(judge, memo).run(items, seed=3)
    assert not calls
    assert (again.gain, again.final, again.accepted) == (first.gain, first.final, first.accepted)


def test_too_few_questions_is_refused_with_what_to_do():
    items, judge = scripted(True, 4)
    with pytest.raises(InputError, match="at least 10 questions"):
        Procedure(judge, MemoryMemo()).run(items[:12], seed=4)


def test_an_aligned_version_names_its_own_criterion_only_in_trend_series():
    from pipeline.evaluation.judge import recorded_version

    run = "judge-v1+corrections-v2+aligned-correctness-v1+aligned-grounding-v3"
    config = {"judge_prompt_versions": {"grounding": "judge-grounding-v1"}}
    assert recorded_version("judge_correctness", run, config) == "judge-v1+corrections-v2+aligned-correctness-v1"
    assert recorded_version("judge_helpfulness", run, config) == "judge-v1+corrections-v2"
    assert recorded_version("judge_grounding", run, config) == "judge-grounding-v1+corrections-v2+aligned-grounding-v3"
    assert recorded_version("context_recall", run, config) == "judge-v1+corrections-v2"
