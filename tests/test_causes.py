"""Causes from what changed: the part named for a drop comes from the configuration diff and the metrics that
moved (context recall is scored with the verifier model), not from the metrics' levels."""

import numpy as np
import pytest
from test_regression import store_run

from pipeline.evaluation import regression
from pipeline.evaluation.causes import depends_on, likely_cause
from pipeline.evaluation.runner import report

VERIFIER_ONLY = {"verifier_model": ["bespoke-minicheck", "tiny-verifier"]}


def test_each_metric_depends_on_the_parts_and_models_it_is_computed_from():
    assert depends_on("context_recall") == {"retriever", "verifier", "dataset"}  # scored with the verifier model
    assert depends_on("context_precision") == {"retriever", "judge", "dataset"}
    assert depends_on("faithfulness") == {"generator", "retriever", "verifier", "dataset"}
    assert depends_on("faithfulness", imported=True) == {"given answers", "verifier", "dataset"}


def test_the_part_that_changed_and_explains_every_drop_is_named():
    assert likely_cause(VERIFIER_ONLY, ["context_recall", "faithfulness"]).parts == ("verifier",)
    assert likely_cause({"top_k": [5, 2]}, ["context_recall", "faithfulness"]).parts == ("retriever",)
    prompt = {"prompts": [{"generate": "1", "nli_judge": "1"}, {"generate": "2", "nli_judge": "1"}]}
    assert likely_cause(prompt, ["faithfulness"]).parts == ("generator",)
    both = likely_cause({**VERIFIER_ONLY, "generator_model": ["a", "b"]}, ["faithfulness"])
    assert both.parts == ("generator", "verifier") and both.component == "generator or verifier"
    judge_only = likely_cause({"judge_model": ["a", "b"]}, ["context_recall"])
    assert judge_only.parts == () and "none of it is used by context recall" in judge_only.sentence
    nothing = likely_cause({}, ["faithfulness"])
    assert nothing.parts == () and nothing.sentence.startswith("Nothing in the configuration changed")


@pytest.mark.slow
def test_a_verifier_only_change_is_attributed_to_the_verifier_in_the_alert_and_the_report(db, settings):
    rng = np.random.default_rng(3)
    base = rng.uniform(0.85, 1.0, 30)
    config = {"top_k": 5, "verifier_model": "bespoke-minicheck"}
    store_run(
        db, "before", {"faithfulness": base, "context_recall": base, "context_precision": [1.0] * 30}, config=config
    )
    store_run(
        db,
        "after",
        {"faithfulness": base - 0.3, "context_recall": base - 0.4, "context_precision": [1.0] * 30},
        config={**config, "verifier_model": "tiny-verifier"},
    )
    _, baseline, comparisons = regression.check(db, settings, "after")
    assert baseline.name == "before"
    drops = [c for c in comparisons if c.regression and c.kind == "drop" and c.slice == "all"]
    assert {c.metric for c in drops} == {"faithfulness", "context_recall"}
    from store import alerts as alert_store

    components = {a["metric"]: a["component"] for a in alert_store.list_alerts(db, "open") if a["kind"] == "drop"}
    assert components == {"faithfulness": "verifier", "context_recall": "verifier"}  # not "retriever/chunking"
    result = report(settings, db, "after")
    assert result.baseline == "before" and result.cause.parts == ("verifier",)
    assert "verifier_model" in result.cause.sentence and "context recall depends on verifier" in result.cause.sentence
