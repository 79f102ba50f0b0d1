"""Datasets kept in the store, through the command line: versions made by import and edits, the diff, refusals that
save nothing, export and import round trips, and evaluations that pin a version (`eval dataset:NAME@VERSION`, or a
file kept as a version) so that the baseline rule compares a version only with runs of the same version."""

import json

import pytest
from test_app import app, fresh_streamlit_caches, start_evaluation, wait_for_jobs  # noqa: F401 - the fixture
from test_evaluation import ITEMS

from pipeline.cli.main import main
from pipeline.evaluation import datasets
from pipeline.evaluation.compare_runs import compare_runs
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.regression import baseline_of
from pipeline.evaluation.runner import report, run_evaluation
from store import evals
from store.alerts import pin_baseline
from store.baselines import previous_comparable

# two items the sample knowledge base answers
TWO = [ITEMS[0], ITEMS[3]]


def golden_file(path, items=TWO, more=()):
    fields = {"id", "question", "reference", "tags", *more}
    path.write_text("".join(item.model_dump_json(include=fields) + "\n" for item in items))
    return path


def said(capsys) -> tuple[str, str]:
    """stdout and stderr, their lines joined (rich wraps long lines at 80 columns when captured)."""
    out, err = capsys.readouterr()
    return " ".join(out.split()), " ".join(err.split())


def shown(capsys, *argv) -> dict | list:
    assert main(["datasets", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_dataset_edited_twice_has_three_versions_and_the_diff_shows_the_edit(db, tmp_path, capsys):
    assert main(["datasets", "import", str(golden_file(tmp_path / "golden.jsonl"))]) == 0
    assert "saved dataset golden, version 1 (2 items)" in said(capsys)[0]
    assert main(["datasets", "edit", "golden", "rag-passages", "--question", "How big was the RAG index?"]) == 0
    assert "saved dataset golden, version 2" in said(capsys)[0]
    assert main(["datasets", "edit", "golden", "rrf", "--tags", "rag, fusion", "--reference", "k = 60"]) == 0
    assert "saved dataset golden, version 3" in said(capsys)[0]
    listed = shown(capsys)
    assert [(d["name"], d["latest_version"], d["versions"], d["items"]) for d in listed] == [("golden", 3, 3, 2)]
    show = shown(capsys, "show", "golden")
    assert [v["version"] for v in show["versions"]] == [3, 2, 1]
    assert [v["note"] for v in show["versions"]][:2] == ["edited rrf", "edited rag-passages"]
    assert show["items"][1]["tags"] == ["rag", "fusion"] and show["items"][1]["reference"] == "k = 60"
    first = shown(capsys, "diff", "golden", "1", "2")
    question = next(c for c in first["changed"] if c["field"] == "question")
    assert (question["item_id"], question["before"], question["after"]) == (
        "rag-passages",
        ITEMS[0].question,
        "How big was the RAG index?",
    )
    assert first["added"] == first["removed"] == []
    second = shown(capsys, "diff", "golden", "2", "3")
    assert {(c["item_id"], c["field"]) for c in second["changed"]} >= {("rrf", "tags"), ("rrf", "reference")}
    assert main(["datasets", "diff", "golden", "1", "3"]) == 0
    out = said(capsys)[0]
    assert "version 1 -> version 3" in out and "rag-passages question" in out


def test_an_edit_that_empties_a_question_is_refused_and_saves_nothing(db, tmp_path, capsys):
    assert main(["datasets", "import", str(golden_file(tmp_path / "golden.jsonl"))]) == 0
    capsys.readouterr()
    assert main(["datasets", "edit", "golden", "rrf", "--question", "   "]) == 2
    err = said(capsys)[1]
    assert "would leave item 'rrf' without a question" in err and "reject the item" in err
    assert main(["datasets", "edit", "golden", "nope", "--question", "Why?"]) == 2
    assert "has no item 'nope'" in said(capsys)[1]
    assert main(["datasets", "edit", "golden", "rrf"]) == 2
    assert "give --question, --reference or --tags" in said(capsys)[1]
    show = shown(capsys, "show", "golden")
    assert [v["version"] for v in show["versions"]] == [1]
    assert [i["question"] for i in show["items"]] == [i.question for i in TWO]


def test_rejecting_an_item_saves_a_version_without_it_and_keeps_the_one_before(db, tmp_path, capsys):
    assert main(["datasets", "import", str(golden_file(tmp_path / "golden.jsonl"))]) == 0
    assert main(["datasets", "reject", "golden", "rrf"]) == 0
    assert "rejected rrf: saved dataset golden, version 2" in said(capsys)[0]
    assert [i["id"] for i in shown(capsys, "show", "golden")["items"]] == ["rag-passages"]
    assert [i["id"] for i in shown(capsys, "show", "golden@1")["items"]] == ["rag-passages", "rrf"]
    assert [i["id"] for i in shown(capsys, "diff", "golden", "1", "2")["removed"]] == ["rrf"]
    assert main(["datasets", "reject", "golden", "rag-passages"]) == 2  # the last item: refused, nothing saved
    assert "would have no items" in said(capsys)[1]
    assert len(shown(capsys, "show", "golden")["versions"]) == 2


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_imported_again_gives_the_same_items(db, tmp_path, capsys, fmt):
    synthesised = {"kind": "fact", "chunk_ids": ["c1", "c2"], "model": "llama3.2", "review": "accepted"}
    items = [
        *TWO,
        ITEMS[2].model_copy(
            update={"question": 'A "quoted", comma; question?', "origin": "synthesised", "provenance": synthesised}
        ),
    ]
    path = golden_file(tmp_path / "golden.jsonl", items, more=("origin", "provenance"))
    assert main(["datasets", "import", str(path)]) == 0
    exported = tmp_path / f"copy.{fmt}"
    assert main(["datasets", "export", "golden@1", "--out", str(exported)]) == 0
    assert f"to {exported} ({fmt})" in said(capsys)[0]
    assert main(["datasets", "import", str(exported), "--name", "copy"]) == 0
    assert "saved dataset copy, version 1 (3 items)" in said(capsys)[0]
    fields = ("id", "question", "reference", "tags", "origin", "provenance")
    source, copy = (datasets.load(db, name) for name in ("golden", "copy"))
    assert [i.model_dump(include=set(fields)) for i in copy.items] == [
        i.model_dump(include=set(fields)) for i in source.items
    ]
    assert copy.items[2].provenance == synthesised and copy.items[0].origin == "file"
    assert main(["datasets", "export", "golden", "--format", fmt]) == 0  # to standard output: the same text
    assert capsys.readouterr().out == exported.read_bytes().decode("utf-8")


def test_importing_a_file_under_an_existing_name_saves_the_next_version_or_nothing(db, tmp_path, capsys):
    path = golden_file(tmp_path / "golden.jsonl")
    assert main(["datasets", "import", str(path)]) == 0
    assert main(["datasets", "import", str(path)]) == 0
    assert "unchanged: same content as version 1" in said(capsys)[0]
    golden_file(path, ITEMS[:3])
    assert main(["datasets", "import", str(path)]) == 0
    assert "dataset golden exists: saved as version 2" in said(capsys)[0]
    assert [v["items"] for v in shown(capsys, "show", "golden")["versions"]] == [3, 2]


def eval_run(db, name: str) -> evals.EvalRun:
    return evals.get_eval_run(db, name)


def evaluate(*argv) -> int:
    return main(["eval", *argv, "--metrics", "faithfulness", "--concurrency", "1"])


@pytest.mark.slow
def test_eval_of_a_stored_version_pins_it(fake, kb_db, settings, tmp_path, capsys):
    assert main(["datasets", "import", str(golden_file(tmp_path / "golden.jsonl"))]) == 0
    assert main(["datasets", "edit", "golden", "rrf", "--tags", "fusion"]) == 0
    assert main(["datasets", "edit", "golden", "rrf", "--tags", "rrf"]) == 0
    capsys.readouterr()
    assert evaluate("dataset:golden@2", "--name", "v2") == 0
    assert "dataset golden, version 2" in said(capsys)[1]
    run = eval_run(kb_db, "v2")
    assert (run.dataset, run.dataset_version, run.dataset_label) == ("golden", 2, "golden@2")
    with kb_db.cursor() as cur:
        stored = cur.execute("SELECT dataset_hash, n_items FROM eval_runs WHERE name = 'v2'").fetchone()
    assert stored == ("dataset:golden@2", 2)
    assert {r["item_id"]: list(r["tags"]) for r in report(settings, kb_db, "v2").items}["rrf"] == ["fusion"]
    assert evaluate("dataset:golden", "--name", "latest", "--limit", "1") == 0  # no version: the latest
    assert eval_run(kb_db, "latest").dataset_version == 3


@pytest.mark.slow
def test_evaluating_the_same_file_twice_pins_one_version(fake, kb_db, settings, tmp_path, capsys):
    path = golden_file(tmp_path / "golden.jsonl", TWO[:1])
    assert evaluate(str(path), "--name", "first") == 0
    assert f"dataset golden, version 1 (kept from {path})" in said(capsys)[1]
    assert evaluate(str(path), "--name", "second") == 0
    assert "dataset golden, version 1 (the same content as version 1)" in said(capsys)[1]
    assert [eval_run(kb_db, n).dataset_version for n in ("first", "second")] == [1, 1]
    assert [v.version for v in datasets.versions(kb_db, "golden")] == [1]
    assert previous_comparable(kb_db, eval_run(kb_db, "second").id) == eval_run(kb_db, "first").id
    # the file read again without keeping it (the Python API) resumes the run it pinned: the same items
    assert run_evaluation(settings, kb_db, load_dataset(path), "first").progress.skipped == 1


@pytest.mark.slow
def test_an_evaluation_started_over_a_file_before_datasets_were_kept_resumes_over_the_file(
    fake, kb_db, settings, tmp_path, capsys
):
    path = golden_file(tmp_path / "golden.jsonl", TWO[:1])
    run_evaluation(settings, kb_db, load_dataset(path), "old", metrics=["faithfulness"])
    assert evaluate(str(path), "--name", "old") == 0
    assert "resuming 'old' over" in said(capsys)[1]
    assert eval_run(kb_db, "old").dataset_version is None and datasets.versions(kb_db, "golden") == []


@pytest.mark.slow
def test_a_version_is_compared_only_with_runs_of_the_same_version(fake, kb_db, settings, tmp_path, capsys):
    assert main(["datasets", "import", str(golden_file(tmp_path / "golden.jsonl", TWO[:1]))]) == 0
    assert main(["datasets", "edit", "golden", "rag-passages", "--tags", "rag"]) == 0  # version 2
    assert evaluate("dataset:golden@2", "--name", "v2-a") == 0
    assert evaluate("dataset:golden@2", "--name", "v2-b") == 0
    assert main(["datasets", "edit", "golden", "rag-passages", "--tags", "numeric"]) == 0  # version 3
    assert evaluate("dataset:golden@3", "--name", "v3") == 0
    a, b, v3 = (eval_run(kb_db, n) for n in ("v2-a", "v2-b", "v3"))
    assert previous_comparable(kb_db, b.id) == a.id
    assert previous_comparable(kb_db, v3.id) is None
    pin_baseline(kb_db, "golden", a.id)  # a pin over version 2 is no baseline for a run over version 3
    assert baseline_of(kb_db, b) == a.id and baseline_of(kb_db, v3) is None
    capsys.readouterr()
    assert main(["gate", "--run", "v3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"] is None
    comparison = compare_runs(settings, kb_db, "v2-a", "v3")  # the user may still compare any two runs
    assert not comparison.same_dataset
    assert (comparison.a.dataset_text, comparison.b.dataset_text) == ("golden@2 (1 item)", "golden@3 (1 item)")
    from test_charts import frame_with

    points = frame_with(app("pages/trends.py").get("plotly_chart")[0], "mean_text")  # a series per version
    assert {s.split(" · ")[2] for s in points["series"].dropna()} == {"golden@2", "golden@3"}  # not the star's
    assert list(points[points["series"].str.contains("golden@2")]["run"]) == ["v2-a", "v2-b"]


def test_unknown_datasets_and_versions_are_explained(db, tmp_path, capsys):
    assert main(["eval", "dataset:nope", "--name", "x"]) == 2
    err = said(capsys)[1]
    assert "there is no dataset named 'nope'" in err and "python -m pipeline datasets" in err
    assert main(["datasets", "import", str(golden_file(tmp_path / "x.jsonl"))]) == 0
    assert main(["eval", "dataset:x@9", "--name", "x"]) == 2
    assert "dataset 'x' has no version 9: its versions are 1 to 1" in said(capsys)[1]
    assert main(["eval", "dataset:x@latest", "--name", "x"]) == 2
    assert "the version 'latest' is not a number" in said(capsys)[1]
    assert main(["datasets", "show", "nope"]) == 2
    assert main(["datasets", "export", "x@2"]) == 2
    assert evals.get_eval_run(db, "x") is None


@pytest.mark.slow
def test_the_evaluate_page_runs_a_stored_version_and_keeps_an_uploaded_file_as_one(fake, kb_db, tmp_path, capsys):
    from pages.views.markup import escape_markdown

    assert main(["datasets", "import", str(golden_file(tmp_path / "golden.jsonl", TWO[:1]))]) == 0
    assert main(["datasets", "edit", "golden", "rag-passages", "--tags", "rag"]) == 0
    at = app("pages/evaluate.py")
    next(r for r in at.radio if r.label == "Dataset").set_value("Stored dataset").run()
    assert at.selectbox(key="eval_stored_name").value == "golden"
    version = at.selectbox(key="eval_stored_version:golden")
    assert version.value == 2 and version.options == ["2 (latest)", "1"]
    version.set_value(1).run()
    assert f"1 valid items in {escape_markdown('golden@1')}" in [c.value for c in at.caption]
    at.text_input(key="eval_name").set_value("from-the-store")
    next(m for m in at.multiselect if m.label == "Metrics").set_value(["faithfulness"])
    start_evaluation(at)
    wait_for_jobs()
    run = eval_run(kb_db, "from-the-store")
    assert (run.dataset_label, run.status) == ("golden@1", "finished")

    next(r for r in at.radio if r.label == "Dataset").set_value("Upload").run()
    at.file_uploader[0].upload("golden.jsonl", (tmp_path / "golden.jsonl").read_bytes(), "application/json").run()
    at.text_input(key="eval_name").set_value("uploaded")
    start_evaluation(at)
    wait_for_jobs()
    at.run()
    assert not at.exception, at.exception
    assert eval_run(kb_db, "uploaded").dataset_label == "golden@1"  # the same content as version 1: pinned, not kept
    assert [v.version for v in datasets.versions(kb_db, "golden")] == [2, 1]
