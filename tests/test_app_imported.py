"""Another pipeline's answers in the app: an uploaded file's column mapping and pipeline name on Evaluate, a file it
cannot map, the imported runs on the Runs page and in their drilldown, and an imported run rated on Annotate and
paired with the judge for Calibration."""

import csv
import io
import json

import pytest
from streamlit.testing.v1 import AppTest
from test_app import app, fresh_streamlit_caches, open_runs_page, show_tab, wait_for_jobs  # noqa: F401 - the fixture
from test_imported import ROWS, TOWER, ours, ragas

from pages.views.markup import escape_markdown
from pages.views.run_filters import OPEN as FILTERS_OPEN
from pipeline.calibration.annotations import judged_pairs
from pipeline.evaluation.dataset import parse_dataset
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.history.evaluations import run_ids_of
from pipeline.history.runs import load_result
from store import evals


def csv_bytes(rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()})
    return out.getvalue().encode("utf-8")


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    next(r for r in at.radio if r.label == "Dataset").set_value("Upload").run()
    at.file_uploader[0].upload(name, data, "text/csv").run()
    assert not at.exception, at.exception
    return at


def start_button(at: AppTest):
    return next((b for b in at.button if b.label == "Start evaluation"), None)


@pytest.mark.slow
def test_an_uploaded_ragas_file_shows_its_mapping_and_is_scored_as_given_under_the_pipeline_named(db):
    rows = [{**r, "latency_ms": "12"} for r in ragas()]
    rows.append(
        {"user_input": "Who built it?", "response": "", "retrieved_contexts": "[]", "reference": "", "latency_ms": "1"}
    )
    at = upload(app("pages/evaluate.py"), "vendor_out.csv", csv_bytes(rows))
    captions = [c.value for c in at.caption]
    assert (
        escape_markdown("vendor_out.csv: Ragas column names · answers scored as given (no retrieval, no generation)")
        in captions
    )
    assert escape_markdown("Columns not read: latency_ms") in captions
    mapping = at.dataframe[0].value
    assert list(zip(mapping["field"], mapping["read from the file's column"], strict=True)) == [
        ("id", "(none: each row's id is made from its question)"),
        ("question", "user_input"),
        ("answer", "response"),
        ("contexts", "retrieved_contexts"),
        ("reference", "reference"),
        ("tags", "(none)"),
    ]
    bad = at.dataframe[1].value  # bad rows, by line
    assert list(bad["line"]) == [5] and list(bad["reason"]) == ["answer: must not be empty"]
    pipeline = at.text_input(key="eval_pipeline:vendor_out.csv")
    assert pipeline.label == "Pipeline" and pipeline.value == "vendor_out"  # the file's name by default
    pipeline.set_value("vendor-bot")
    at.text_input(key="eval_name").set_value("vendor-week1")
    next(m for m in at.multiselect if m.label == "Metrics").set_value(["faithfulness"])
    start_button(at).click().run()
    wait_for_jobs()
    at.run()
    assert not at.exception, at.exception
    run = evals.get_eval_run(db, "vendor-week1")
    assert run is not None and run.pipeline == "vendor-bot" and run.status == "finished"
    with db.cursor() as cur:
        stored = cur.execute("SELECT kind, pipeline, count(*) FROM runs GROUP BY ALL").fetchall()
    assert stored == [("imported", "vendor-bot", len(ROWS))]


def test_a_golden_set_upload_has_no_pipeline_field(db):
    at = upload(app("pages/evaluate.py"), "golden.csv", b"id,question,reference\na,What is RAG?,Retrieval.\n")
    assert escape_markdown("golden.csv: the workbench column names · a golden set") in at.caption[0].value
    assert not [t for t in at.text_input if t.label == "Pipeline"] and start_button(at) is not None


@pytest.mark.slow
def test_a_file_without_a_question_column_says_what_it_looked_for_and_offers_no_start(db):
    at = upload(app("pages/evaluate.py"), "odd.csv", b"prompt,response\nWhat is RAG?,Retrieval.\n")
    errors = [e.value for e in at.error]
    assert any(
        escape_markdown(
            "the file has no question column (looked for question, user_input, input); its columns are prompt, response"
        )
        in e
        and "Fix: name the question column" in e
        for e in errors
    ), errors
    assert start_button(at) is None and not at.dataframe


def imported_run(settings, db, name: str = "v1", pipeline: str = "bot", metrics=("faithfulness",)) -> int:
    rows = ours()
    rows[0]["contexts"] = [{"text": TOWER, "source": "tower.md", "score": 0.9}]
    dataset = parse_dataset("".join(json.dumps(r) + "\n" for r in rows), "answers.jsonl", "jsonl")
    run_evaluation(settings, db, dataset, name, metrics=list(metrics), pipeline=pipeline)
    return next(i["run_id"] for i in report(settings, db, name).items if i["item_id"] == "tower")


@pytest.mark.slow
def test_the_runs_page_lists_imported_runs_with_their_pipeline_and_the_drilldown_says_who_wrote_them(
    fake, settings, db
):
    run_id = imported_run(settings, db)
    at = app("pages/runs.py")
    frame = at.dataframe[0].value
    assert set(frame["kind"]) == {"imported"} and set(frame["pipeline"]) == {"bot"}
    at.session_state[FILTERS_OPEN] = True  # the filters are drawn when opened
    at.run()
    assert "imported" in next(m for m in at.multiselect if m.label == "Kind").options
    at = open_runs_page(str(run_id))
    assert "kind **imported**" in at.markdown[0].value and "pipeline **bot**" in at.markdown[0].value
    assert any("Answer written by pipeline bot and checked here" in i.value for i in at.info)
    # the supported claim's evidence is highlighted in the given context's text
    evidence = [m.value for m in at.markdown if ":green-background[**" in m.value]
    assert evidence and all(escape_markdown("Eiffel Tower") in e for e in evidence)
    show_tab(at, "Retrieval")
    headings = [s.value for s in at.subheader]
    assert "Given contexts" in headings and "Retrieved chunks" not in headings
    contexts = next(d.value for d in at.dataframe if "injection flags" in d.value.columns)
    assert list(contexts["text"]) == [TOWER] and list(contexts["source"]) == ["tower.md"]


def test_a_chat_run_drilldown_keeps_its_header_and_heading(fake, settings, kb_db):
    from pipeline.answering.engine import VerifiedQueryEngine, final_result

    result = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream("What is RAG?"))
    at = open_runs_page(str(result.run_id), tab="Retrieval")
    assert "pipeline" not in at.markdown[0].value  # this workbench's run: no pipeline shown as n/a
    assert "Retrieved chunks" in [s.value for s in at.subheader]
    assert not any("written by pipeline" in i.value for i in at.info)


@pytest.mark.slow
def test_an_imported_run_rated_on_annotate_is_paired_with_the_judge_for_calibration(fake, settings, db):
    imported_run(settings, db, metrics=("judge_correctness", "faithfulness"))
    at = app("pages/annotate.py")
    assert at.selectbox(key="annotate_source").value == "v1"
    at.text_input(key="annotator").set_value("ana").run()
    run_id = int(at.subheader[0].value.removeprefix("Run "))
    assert load_result(db, run_id).kind == "imported"
    labels = ("Correctness", "Helpfulness", "Faithfulness", "Grounding", "Topicality")
    for radio, value in zip([r for r in at.radio if r.label in labels], (2, 4, 5, 3, 1), strict=True):
        radio.set_value(value)
    next(b for b in at.button if b.label == "Save rating").click().run()
    assert not at.exception, at.exception
    assert any(s.value.startswith(f"Saved run {run_id}") for s in at.success)
    scope = run_ids_of(db, evals.get_eval_run(db, "v1").id)  # the Calibration page's scope of the evaluation
    pairs = judged_pairs(db, scope, "correctness")
    assert [(p["run_id"], p["annotator"], p["human"]) for p in pairs] == [(run_id, "ana", 2)]
    assert pairs[0]["judge"] is not None
