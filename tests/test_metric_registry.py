"""The metric registry: a metric registered once flows through scoring, the report, the store's result
query, regression, the diagnosis and the CLI table."""

import numpy as np
import pytest
from test_evaluation import ITEMS, dataset
from test_regression import store_run

from pipeline.cli.main import main
from pipeline.errors import InputError
from pipeline.evaluation import regression
from pipeline.evaluation.diagnosis import diagnose
from pipeline.evaluation.judge import MetricScore
from pipeline.evaluation.registry import (
    JUDGE_SCALE,
    METRICS,
    MetricInput,
    get_metric,
    metric_names,
    ordered_metrics,
    register_metric,
    unregister_metric,
)
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.vocabulary import Status
from store import evals

# the shipped metrics in the order reports list them; a metric added later may sit anywhere among them
BUILT_IN = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "judge_correctness",
    "judge_helpfulness",
    "judge_faithfulness",
    "judge_grounding",
    "judge_topicality",
    "judge_question_rewrite",
]


def answer_length(inputs: MetricInput) -> MetricScore:
    """A throwaway metric: the answer's words / 50, capped at 1; none for an abstention."""
    if inputs.result.status == Status.ABSTAINED:
        return MetricScore.of(None, "not_applicable", "the answer abstains")
    words = len((inputs.result.answer or "").split())
    return MetricScore.of(min(1.0, words / 50), "ok", f"{words} words")  # the registry names it


@pytest.fixture
def length_metric():
    register_metric("answer_length", component="generator", label="answer length")(answer_length)
    try:
        yield
    finally:
        unregister_metric("answer_length")
    assert "answer_length" not in metric_names() and "answer_length" not in regression.METRICS


def test_the_built_in_metrics_with_their_components_and_scales():
    assert [name for name in metric_names() if name in BUILT_IN] == BUILT_IN
    assert metric_names() == list(regression.METRICS)
    components = {m.name: (m.component, m.scale) for m in ordered_metrics()}
    assert components["faithfulness"] == ("generator", (0.0, 1.0))
    assert components["answer_relevancy"] == ("generator/prompt", (0.0, 1.0))
    assert components["context_precision"] == ("retriever ranking", (0.0, 1.0))
    assert components["context_recall"] == ("retriever/chunking", (0.0, 1.0))
    # the judge's faithfulness is its own metric, never the component metric of the same word
    assert components["judge_faithfulness"] == ("judge", JUDGE_SCALE)
    assert get_metric("judge_faithfulness").label == "judge faithfulness" != get_metric("faithfulness").label


@pytest.mark.slow
def test_a_registered_metric_flows_through_runner_report_store_and_cli(
    fake, settings, kb_db, length_metric, capsys, tmp_path
):
    names = metric_names()  # listed with its component: after the generator's faithfulness, before the retriever's
    assert names.index("faithfulness") < names.index("answer_length") < names.index("context_precision")
    run_evaluation(settings, kb_db, dataset(ITEMS[:3]), "with-length")
    result = report(settings, kb_db, "with-length")
    row = next(m for m in result.metrics if m["metric"] == "answer_length")
    assert (row["n"], row["not_applicable"]) == (2, 1)  # the Peru question abstains
    items = {r["item_id"]: r for r in result.items}
    answer = items["rag-passages"]["answer"]
    assert items["rag-passages"]["answer_length"] == pytest.approx(min(1.0, len(answer.split()) / 50))
    assert items["peru"]["answer_length"] is None
    assert [m["metric"] for m in result.metrics] == metric_names()

    golden = tmp_path / "golden.jsonl"
    golden.write_text(ITEMS[0].model_dump_json() + "\n")
    assert main(["eval", str(golden), "--name", "cli-length"]) == 0
    table_row = next(line for line in capsys.readouterr().out.splitlines() if "answer_length" in line)
    assert "generator" in table_row


@pytest.mark.slow
def test_a_registered_metric_is_compared_and_gated(db, length_metric, capsys):
    assert regression.parse_floors("answer_length=0.5") == {"answer_length": 0.5}
    base = np.linspace(0.6, 0.9, 20)
    store_run(db, "before", {"faithfulness": base, "answer_length": base})
    store_run(db, "after", {"faithfulness": base, "answer_length": base - 0.3})
    assert main(["gate", "--run", "after", "--baseline", "before", "--json"]) == 1
    import json

    comparisons = json.loads(capsys.readouterr().out)["comparisons"]
    drops = {(c["metric"], c["slice"]) for c in comparisons if c["kind"] == "drop"}
    assert drops == {("answer_length", "all"), ("answer_length", "rag")}
    run = evals.get_eval_run(db, "after")
    rows = evals.item_results(db, run.id, metric_names())
    assert rows[0]["answer_length"] == pytest.approx(base[0] - 0.3)


def test_the_store_query_takes_its_columns_from_the_caller(db):
    run_id = store_run(db, "only", {"faithfulness": [0.5, 1.0], "novel_metric": [0.1, 0.2]})
    rows = evals.item_results(db, run_id, ["novel_metric"])
    assert [r["novel_metric"] for r in rows] == [0.1, 0.2] and "faithfulness" not in rows[0]
    for bad in ("question", "x; DROP TABLE scores", "Upper"):
        with pytest.raises(ValueError):
            evals.item_results(db, run_id, [bad])


def test_once_unregistered_a_metric_is_gone_everywhere(length_metric):
    assert "answer_length" in METRICS
    unregister_metric("answer_length")
    assert "answer_length" not in metric_names() and set(BUILT_IN) <= set(metric_names())
    with pytest.raises(InputError):
        regression.parse_floors("answer_length=0.5")


def test_the_diagnosis_names_the_weakest_registered_component_metric(length_metric):
    means = {
        "faithfulness": 0.7,
        "context_recall": 0.7,
        "context_precision": 0.7,
        "answer_relevancy": 0.7,
        "answer_length": 0.55,
        "judge_correctness": 1.0,
    }
    diagnosis = diagnose(means)
    assert diagnosis.component == "unknown" and "weakest metric is answer length (0.55)" in diagnosis.sentence
    means["answer_length"] = 0.2  # at least 0.2 below the next-lowest: it names the component
    assert diagnose(means).component == "generator" and diagnose(means).sentence.startswith("answer length (0.20)")


@pytest.mark.parametrize(
    "score, error",
    [
        (MetricScore("answer_length", 1.5, "ok", ""), "outside its scale"),
        (MetricScore("answer_length", float("nan"), "ok", ""), "outside its scale"),
        (MetricScore("answer_length", None, "ok", ""), "outside its scale"),
        (MetricScore("answer_length", 0.0, "invalid", "unparseable"), "has no value"),
        (MetricScore("answer_length", None, "skipped", ""), "status"),
        (MetricScore("other_name", 0.5, "ok", ""), "not a MetricScore named"),
    ],
)
def test_a_metric_cannot_return_an_invented_or_misplaced_score(score, error):
    register_metric("answer_length", component="generator")(lambda inputs: score)
    try:
        with pytest.raises(ValueError, match=error):
            get_metric("answer_length").measure(None)
    finally:
        unregister_metric("answer_length")


def test_the_registry_stamps_the_metric_name_on_a_score_made_without_one():
    register_metric("answer_length", component="generator")(lambda inputs: MetricScore.of(0.5, "ok", "half", {"n": 1}))
    try:
        score = get_metric("answer_length").measure(None)
    finally:
        unregister_metric("answer_length")
    assert (score.metric, score.value, score.status, score.explanation, score.details) == (
        "answer_length",
        0.5,
        "ok",
        "half",
        {"n": 1},
    )


def test_registration_refuses_bad_names_and_duplicates():
    for bad in ("Answer Length", "1st", "x-y"):
        with pytest.raises(ValueError):
            register_metric(bad, component="generator")
    with pytest.raises(ValueError, match="already registered"):
        register_metric("faithfulness", component="generator")(answer_length)
