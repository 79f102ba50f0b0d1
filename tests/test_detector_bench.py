import json
import re

import pytest

from pipeline.cli.main import main
from pipeline.detector.bench import classification, context_passages, load_labelled, run_detector_bench, sweep
from pipeline.errors import InputError
from pipeline.verification.registry import verifier_names

RECORDS = [
    {
        "id": "f1",
        "question": "Who wrote it?",
        "context": "The RAG paper was written by Patrick Lewis in 2020.",
        "answer": "Patrick Lewis wrote the RAG paper in 2020.",
        "label": 0,
    },
    {
        "id": "h1",
        "question": "Who wrote it?",
        "context": "The RAG paper was written by Patrick Lewis in 2020.",
        "answer": "Douwe Kiela wrote the RAG paper in 2019 on 40 GPUs.",
        "label": 1,
    },
    {
        "id": "f2",
        "context": "BM25 is a ranking function used by search engines.",
        "answer": "BM25 is a ranking function used by search engines.",
        "label": 0,
    },
    {
        "id": "h2",
        "context": "BM25 is a ranking function used by search engines.",
        "answer": "BM25 ranks documents with neural networks trained on clicks.",
        "label": 1,
    },
]


@pytest.fixture
def labelled(tmp_path):
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n" + '{"id": "bad", "label": 2}\n')
    return path


def test_metrics_on_a_known_confusion_matrix():
    labels = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    predicted = [1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
    m = classification(labels, predicted)
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (3, 1, 5, 1)
    assert m["precision"] == pytest.approx(0.75) and m["recall"] == pytest.approx(0.75)
    assert m["f1"] == pytest.approx(0.75)
    assert m["balanced_accuracy"] == pytest.approx((0.75 + 5 / 6) / 2)


def test_sweep_over_faithfulness_thresholds():
    rows = sweep([1, 1, 0, 0], [0.0, 0.5, 1.0, None])
    assert [r["threshold"] for r in rows] == [0.5, 1.0, 1.0]
    assert (rows[0]["tp"], rows[0]["fp"]) == (1, 0)
    assert (rows[1]["tp"], rows[1]["fp"]) == (2, 0)
    assert (rows[-1]["tp"], rows[-1]["fp"]) == (2, 2)


def test_bad_records_are_reported_and_chunks_are_sentence_windows(labelled):
    records, bad = load_labelled(labelled)
    assert [r.id for r in records] == ["f1", "h1", "f2", "h2"]
    assert bad[0].line == 5
    assert [p.text for p in context_passages("A b c. D e f. G h i.")] == ["A b c. D e f.", "G h i."]
    with pytest.raises(InputError):
        load_labelled(labelled.parent / "missing.jsonl")


def test_the_command_measures_every_registered_verifier_through_the_fake(fake, db, labelled, capsys):
    assert main(["bench-detector", str(labelled), "--verifier", "all", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) == set(verifier_names()) == {"precheck", "minicheck_chunk", "minicheck_context", "llm"}
    pre = summary["precheck"]
    assert (pre["tp"], pre["fp"], pre["tn"], pre["fn"]) == (1, 0, 2, 1)
    assert pre["llm_calls_per_answer"] == 1.0  # claim extraction only
    with db.cursor() as cur:
        recorded = cur.execute(
            "SELECT count(*), count(completion_text_hash) FROM llm_calls "
            "WHERE origin = 'detector' AND stage = 'extract_claims'"
        ).fetchone()
    assert recorded[0] >= 4 and recorded[0] == recorded[1]  # every detector call is stored, with its text
    for name in ("minicheck_chunk", "minicheck_context"):
        mini = summary[name]
        assert (mini["tp"], mini["fp"], mini["tn"], mini["fn"]) == (2, 0, 2, 0)
        assert mini["balanced_accuracy"] == 1.0 and mini["prompt_tokens_per_answer"] > 0
        assert mini["claims_decided_by_precheck"] >= 2
    llm_models = {
        r["body"]["model"]
        for r in fake.requests
        if r["path"] == "/api/chat"
        and r["body"]
        and r["body"]["messages"][0]["role"] == "system"
        and "Reply with exactly one word" in r["body"]["messages"][0]["content"]
    }
    assert llm_models == {"llama3.2"}  # the llm verifier asks the general (NLI) model with an instruction


def test_minicheck_follows_the_scope_and_the_precheck_runs_first_unless_turned_off(fake, db, labelled, capsys):
    from store.detector import list_detector_runs

    assert (
        main(["bench-detector", str(labelled), "--verifier", "minicheck", "--scope", "context", "--claims", "answer"])
        == 0
    )
    run = list_detector_runs(db)[0]
    assert (run["verifier"], run["scope"], run["precheck"]) == ("minicheck", "context", True)
    assert run["settings"]["verifier_chain"] == "precheck,minicheck_context"
    assert main(["bench-detector", str(labelled), "--verifier", "llm", "--no-precheck", "--claims", "answer"]) == 0
    run = list_detector_runs(db)[0]
    assert (run["verifier"], run["precheck"], run["settings"]["verifier_chain"]) == ("llm", False, "llm")


def test_an_unknown_verifier_is_refused(fake, settings, db, labelled):
    with pytest.raises(InputError) as caught:
        run_detector_bench(settings, db, str(labelled), "oracle")
    assert "precheck" in caught.value.fix and "minicheck_chunk" in caught.value.fix


def test_answer_claims_need_no_model_and_runs_are_stored(fake, db, labelled, capsys):
    from store.detector import detector_results, list_detector_runs

    assert main(["bench-detector", str(labelled), "--verifier", "precheck", "--claims", "answer"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"pre-check flags truly hallucinated\s+│ 1\.000", out)
    # 1 of 1 flagged is truly hallucinated; 1 of 2 hallucinated found: Wilson 95% intervals printed
    assert re.search(r"precision \(hallucinated\) \[95% Wilson\]\s+│ 1\.000 \[0\.21, 1\.00\]", out)
    assert re.search(r"recall \(hallucinated\) \[95% Wilson\]\s+│ 0\.500 \[0\.09, 0\.91\]", out)
    assert not [r for r in fake.requests if r["path"] == "/api/chat"]
    run = list_detector_runs(db)[0]
    assert (run["verifier"], run["claims_from"], run["n"]) == ("precheck", "answer", 4)
    results = {r["record_id"]: r for r in detector_results(db, run["id"])}
    assert results["h1"]["predicted"] == 1 and "Douwe Kiela" in results["h1"]["verdicts"]
    h2 = json.loads(results["h2"]["verdicts"])
    assert [(v["verdict"], v["by"]) for v in h2] == [("unverified", "precheck")]  # left to a model: not flagged
    assert results["h2"]["predicted"] == 0 and results["h2"]["faithfulness"] is None


def test_precheck_hints_are_counted_apart_from_its_flags(fake, db, tmp_path, capsys):
    """A name no source gives is a hint, not a verdict: the precheck-only bench leaves the claim unverified
    (not flagged) and counts it on its own line and under `precheck_hints`."""
    path = tmp_path / "hinted.jsonl"
    record = {
        "id": "n1",
        "context": "The RAG paper was written by Patrick Lewis in 2020.",
        "answer": "The RAG paper was written by Sebastian Riedel.",
        "label": 1,
    }
    path.write_text(json.dumps(record) + "\n")
    assert main(["bench-detector", str(path), "--verifier", "precheck", "--claims", "answer", "--json"]) == 0
    pre = json.loads(capsys.readouterr().out)["precheck"]
    assert (pre["tp"], pre["fn"]) == (0, 1)  # only the pre-check's decisive verdicts count as flagged
    assert pre["precheck_hints"] == {
        "claims": 1,
        "answers": 1,
        "answers_truly_hallucinated": 1,
        "answers_not_flagged": 1,
    }
    assert main(["bench-detector", str(path), "--verifier", "precheck", "--claims", "answer"]) == 0
    assert re.search(
        r"pre-check hints passed on: claims / answers \(hallucinated\)\s+│ 1 / 1 \(1\)", capsys.readouterr().out
    )


def test_wilson_interval_and_figures_per_writing_model():
    from pipeline.detector.bench import by_model, wilson

    assert wilson(0, 0) is None
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 10)[0] == 0.0
    rows = [
        {"model": "a", "label": 1, "predicted": 1},
        {"model": "a", "label": 0, "predicted": 1},
        {"model": "a", "label": 1, "predicted": 0},
        {"model": "b", "label": 0, "predicted": 0},
        {"model": None, "label": 1, "predicted": 1},
    ]
    models = by_model(rows)
    assert list(models) == ["a", "b"]
    assert (models["a"]["n"], models["a"]["hallucinated"], models["a"]["tp"], models["a"]["fp"]) == (3, 2, 1, 1)
    assert models["a"]["precision"] == 0.5 and models["a"]["precision_ci"] == wilson(1, 2)
    assert models["b"]["recall_ci"] is None  # no hallucinated answer: no recall to state
