"""The Datasets page (AppTest, against a temporary store): the list with versions and item counts, the review of
pending items (accept, edit, reject, each a new version; an emptying edit refused), the diff of two versions, the
export; and "add to dataset" from the Runs page and the run drilldown."""

from __future__ import annotations

import json

import pytest
from test_app import app, open_runs_page
from test_history import make_runs

from pages.views.markup import escape_markdown
from pipeline.evaluation.dataset import GoldenItem
from pipeline.evaluation.datasets import load, save, versions
from store.runs import get_run

PAGE = "pages/datasets.py"
UNTRUSTED = "<b>x</b> **y**"


@pytest.fixture(autouse=True)
def _clear_caches():
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()


def synthesised(n: int, prefix: str = "s") -> list[GoldenItem]:
    return [
        GoldenItem(
            id=f"{prefix}{k}",
            question=f"What does chunk {k} say?",
            reference=f"Chunk {k} says {k}.",
            tags=["synth"],
            origin="synthesised",
            provenance={"kind": "single_hop", "chunk_ids": [f"c{k}", f"c{k + 10}"], "model": "m", "review": "pending"},
        )
        for k in range(1, n + 1)
    ]


def pending_item() -> GoldenItem:
    """One synthesised item waiting for review (the browser tests' stores hold it, in dataset golden)."""
    return synthesised(1)[0]


@pytest.fixture
def golden(db):
    """Dataset alpha: version 1 of two pending items, version 2 of three; beta: one version of one item."""
    save(db, "alpha", synthesised(2), "synthesised")
    save(db, "alpha", synthesised(3), "synthesised", note="more")
    save(db, "beta", [GoldenItem(id="b1", question="Is beta here?", reference="yes")], "file")
    return db


def widget(widgets, label):
    return next(w for w in widgets if w.label == label)


TABLES = {  # a table of the page -> a column only it has
    "datasets_list": "latest version",
    "datasets_versions": "note",
    "datasets_items": "review",
    "datasets_diff_changed": "field",
}


def frame(at, key: str):
    """The page's table of that name, found by a column only it has."""
    found = [d.value for d in at.dataframe if TABLES[key] in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def texts(at) -> list[str]:
    return [t.value for t in at.text]


def successes(at) -> list[str]:
    return [s.value for s in at.main.success]  # not the sidebar's Ollama line


@pytest.mark.slow
def test_the_list_shows_each_dataset_with_its_versions_and_item_counts(golden):
    at = app(PAGE)
    assert at.title[0].value == "Datasets"
    listed = frame(at, "datasets_list")
    assert list(listed["name"]) == ["alpha", "beta"]
    assert list(listed["latest version"]) == [2, 1] and list(listed["versions"]) == [2, 1]
    assert list(listed["items"]) == [3, 1] and list(listed["origin"]) == ["synthesised", "file"]
    kept = frame(at, "datasets_versions")
    assert list(kept["version"]) == [2, 1] and list(kept["items"]) == [3, 2]
    items = frame(at, "datasets_items")
    assert list(items["id"]) == ["s1", "s2", "s3"] and set(items["review"]) == {"pending"}
    widget(at.selectbox, "Items of version").set_value(1).run()
    assert list(frame(at, "datasets_items")["id"]) == ["s1", "s2"]
    widget(at.selectbox, "Dataset").set_value("beta").run()
    assert list(frame(at, "datasets_items")["question"]) == ["Is beta here?"]
    assert any("Nothing to review" in c.value for c in at.caption)


@pytest.mark.slow
def test_accepting_a_pending_item_saves_a_new_version_and_says_which(golden):
    at = app(PAGE)
    assert "What does chunk 1 say?" in texts(at) and "Chunk 1 says 1." in texts(at)
    assert any(
        "a single-hop question" in c.value.replace("\\", "") and "c1, c11" in c.value for c in at.caption
    )  # its source chunks
    widget(at.button, "Accept").click().run()
    assert not at.exception, at.exception
    assert successes(at) == [escape_markdown("Accepted item s1: saved dataset alpha as version 3.")]
    latest = load(golden, "alpha")
    assert latest.version == 3 and [i.provenance["review"] for i in latest.items] == ["accepted", "pending", "pending"]
    assert "What does chunk 2 say?" in texts(at)  # the next pending item


@pytest.mark.slow
def test_the_next_and_previous_keys_move_through_the_pending_items(golden):
    at = app(PAGE)
    widget(at.button, "Next").click().run()
    assert "What does chunk 2 say?" in texts(at)
    widget(at.button, "Reject").click().run()
    assert successes(at) == [escape_markdown("Rejected item s2: saved dataset alpha as version 3.")]
    assert [i.id for i in load(golden, "alpha").items] == ["s1", "s3"]
    assert [v.n_items for v in versions(golden, "alpha")] == [2, 3, 2]
    widget(at.button, "Previous").click().run()
    assert "What does chunk 1 say?" in texts(at)


@pytest.mark.slow
def test_an_edit_saves_a_new_version_and_the_diff_shows_it(golden):
    at = app(PAGE)
    widget(at.button, "Edit").click().run()
    widget(at.text_area, "Question").set_value("What does the first chunk say?")
    widget(at.text_area, "Reference").set_value("It says one.")
    widget(at.text_input, "Tags (comma-separated)").set_value("synth, checked")
    widget(at.button, "Save").click().run()
    assert not at.exception, at.exception
    assert successes(at) == [escape_markdown("Edited item s1: saved dataset alpha as version 3.")]
    first = load(golden, "alpha").items[0]
    assert (first.question, first.reference, first.tags) == (
        "What does the first chunk say?",
        "It says one.",
        ["synth", "checked"],
    )
    assert first.provenance["review"] == "edited"
    changed = frame(at, "datasets_diff_changed")  # version 2 to the latest, 3
    question = changed[changed["field"] == "question"].iloc[0]
    assert (question["item"], question["before"], question["after"]) == (
        "s1",
        "What does chunk 1 say?",
        "What does the first chunk say?",
    )
    assert set(changed["field"]) == {"question", "reference", "tags", "provenance"}
    provenance = changed[changed["field"] == "provenance"].iloc[0]  # readable, not JSON
    assert provenance["after"] == "kind: single-hop · chunk ids: c1, c11 · model: m · review: edited"


@pytest.mark.slow
def test_an_edit_that_empties_the_question_is_refused_with_why_and_saves_nothing(golden):
    at = app(PAGE)
    widget(at.button, "Edit").click().run()
    widget(at.text_area, "Question").set_value("   ")
    widget(at.button, "Save").click().run()
    assert not at.exception, at.exception
    [error] = [e.value for e in at.error]
    assert "without a question" in error and "Fix: write a question, or reject the item" in error
    assert not successes(at)
    assert [v.version for v in versions(golden, "alpha")] == [2, 1]
    assert widget(at.text_area, "Question").value == "   "  # still editing, the text kept to fix


@pytest.mark.slow
def test_the_export_gives_the_versions_items_as_jsonl_and_csv(golden, monkeypatch):
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    offered = {}  # file name -> the bytes a download button offers under it
    keep = MemoryMediaFileStorage.load_and_get_id

    def recorded(self, path_or_data, mimetype, kind, filename=None):
        offered[filename] = path_or_data
        return keep(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", recorded)
    at = app(PAGE)
    assert [b.proto.label for b in at.get("download_button")] == ["Download alpha-v2.jsonl"]
    rows = [json.loads(line) for line in offered["alpha-v2.jsonl"].decode("utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["s1", "s2", "s3"] and rows[0]["question"] == "What does chunk 1 say?"
    assert rows[0]["provenance"]["chunk_ids"] == ["c1", "c11"]
    widget(at.radio, "Export as").set_value("csv").run()
    assert [b.proto.label for b in at.get("download_button")] == ["Download alpha-v2.csv"]
    text = offered["alpha-v2.csv"].decode("utf-8")
    assert text.splitlines()[0].startswith("id,question,reference,tags") and "s3,What does chunk 3 say?" in text
    widget(at.selectbox, "Items of version").set_value(1).run()  # an older version's items, under its number
    assert len(offered["alpha-v1.csv"].decode("utf-8").splitlines()) == 3  # the heading and two items


@pytest.mark.slow
def test_a_run_added_from_the_runs_page_and_the_drilldown_joins_the_next_version_pending_review(db):
    first, second, third = make_runs(db, 3)  # runs 1 and 2 are chat runs
    at = app("pages/runs.py")
    widget(at.selectbox, "Open a run of this page").set_value(first).run()
    widget(at.text_input, "or a new dataset").set_value("from runs")
    widget(at.button, f"Add run {first}").click().run()
    assert not at.exception, at.exception
    assert successes(at) == [escape_markdown(f"added run {first} to from runs as version 1")]
    [item] = load(db, "from runs").items
    run = get_run(db, first)
    assert (item.question, item.reference) == (run["question"], run["answer"]) and item.reference
    assert item.origin == "run" and item.provenance["review"] == "pending" and item.provenance["run_id"] == first

    widget(at.selectbox, "Open a run of this page").set_value(second).run()
    widget(at.text_input, "or a new dataset").set_value("from runs")  # a name that exists: a new version, said so
    widget(at.button, f"Add run {second}").click().run()
    assert successes(at) == [escape_markdown("dataset from runs exists: saved as version 2")]
    widget(at.button, f"Add run {second}").click().run()  # twice: refused with its fix
    assert any(f"run {second} is already in dataset" in e.value and "Fix:" in e.value for e in at.error)

    at = open_runs_page(str(third))
    assert not [s for s in at.selectbox if s.label == "Add to dataset"]  # the form is drawn when opened
    at.session_state[f"drilldown-adding-{third}"] = True
    at.run()
    widget(at.selectbox, "Add to dataset").set_value("from runs")
    widget(at.button, f"Add run {third}").click().run()
    assert not at.exception, at.exception
    assert successes(at) == [escape_markdown(f"added run {third} to from runs as version 3")]
    assert [i.id for i in load(db, "from runs").items] == [f"run-{first}", f"run-{second}", f"run-{third}"]

    at = app(PAGE)  # and it waits there for review, its answer shown as the draft reference
    widget(at.selectbox, "Dataset").set_value("from runs").run()
    assert run["question"] in texts(at) and run["answer"] in texts(at)
    assert any(f"From run {first}; its answer is the draft reference" in c.value for c in at.caption)


@pytest.mark.slow
def test_adding_with_no_dataset_chosen_says_what_to_do(db):
    [run_id] = make_runs(db, 1)
    at = app("pages/runs.py")
    widget(at.button, f"Add run {run_id}").click().run()
    assert any("Choose a dataset or type a new name" in e.value for e in at.error)
    assert versions(db, "anything") == [] and not successes(at)


@pytest.mark.slow
def test_untrusted_text_renders_as_text(db):
    save(
        db,
        "*star*",
        [GoldenItem(id="u1", question=UNTRUSTED, reference=UNTRUSTED, provenance={"review": "pending"})],
        "file",
    )
    at = app(PAGE)
    assert texts(at).count(UNTRUSTED) == 2  # the question and the reference, literally
    shown = [m.value for m in at.markdown] + [s.value for s in at.subheader] + [c.value for c in at.caption]
    assert not any("<b>" in m or "**y**" in m or "*star*" in m for m in shown), shown
    assert any("\\*star\\*" in s.value for s in at.subheader)
    assert not any(m.allow_html for m in at.markdown)
    assert list(frame(at, "datasets_items")["question"]) == [UNTRUSTED]  # a table cell is text


@pytest.mark.slow
def test_the_page_writes_questions_from_the_knowledge_base_and_saves_them_as_a_version(kb_db, fake):
    at = app(PAGE)
    assert any("No datasets yet" in i.value for i in at.info)  # the form is offered on an empty page
    widget(at.text_input, "Dataset name").set_value("mine")
    widget(at.number_input, "Candidates to write").set_value(12)
    widget(at.button, "Write questions").click().run()
    assert not at.exception, at.exception
    kept = load(kb_db, "mine")
    assert kept.version == 1 and kept.items and {i.origin for i in kept.items} == {"synthesised"}
    assert {i.provenance["review"] for i in kept.items} == {"pending"}
    assert successes(at) == [escape_markdown("Saved dataset mine as version 1.")]
    kinds = next(d.value for d in at.dataframe if "asked" in d.value.columns)
    assert kinds["asked"].sum() == 12 and kinds["kept"].sum() == len(kept.items)
    assert any("12 candidates written" in m.value for m in at.markdown)
    assert list(frame(at, "datasets_list")["name"]) == ["mine"]  # the list shows the version just saved


@pytest.mark.slow
def test_writing_questions_from_an_empty_knowledge_base_is_refused_before_any_model_call(db, fake):
    at = app(PAGE)
    fake.clear()
    widget(at.text_input, "Dataset name").set_value("mine")
    widget(at.button, "Write questions").click().run()
    assert not at.exception, at.exception
    assert at.error and "knowledge base" in at.error[0].value.lower()
    assert not [r for r in fake.requests if r["path"] in ("/api/chat", "/api/generate", "/api/embed")]
    assert versions(db, "mine") == []
