import json

import pytest
from conftest import ROOT

from pipeline.errors import InputError
from pipeline.evaluation.dataset import load_dataset, parse_dataset


def test_bad_rows_are_reported_by_line_and_good_rows_kept():
    text = "\n".join(
        [
            json.dumps({"id": "a", "question": "What is RAG?", "reference": "A technique.", "tags": ["rag"]}),
            "{not json",
            json.dumps({"id": "b", "question": "   "}),
            "",
            json.dumps({"id": "a", "question": "Duplicate?"}),
            json.dumps({"question": "No id"}),
            json.dumps({"id": "c", "question": "Tags as text?", "tags": "x; y"}),
            json.dumps({"id": "d", "question": "Bad tags", "tags": [1, 2]}),
            json.dumps(["a", "list"]),
        ]
    )
    dataset = parse_dataset(text, "t.jsonl", "jsonl")
    assert [i.id for i in dataset.items] == ["a", "c"]
    assert dataset.items[1].tags == ["x", "y"] and dataset.items[1].reference is None
    assert [(b.line, b.reason) for b in dataset.bad_rows] == [
        (2, "not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        (3, "question: must not be empty"),
        (5, "id 'a' repeats an earlier row"),
        (6, "id: Field required"),
        (8, "tags: must be a list of strings"),
        (9, "not a JSON object"),
    ]


def test_csv_with_the_same_columns_is_accepted():
    text = 'id,question,reference,tags\nq1,"What is BM25?",A ranking function.,"rag;retrieval"\nq2,,x,\n'
    dataset = parse_dataset(text, "g.csv", "csv")
    assert [(i.id, i.tags) for i in dataset.items] == [("q1", ["rag", "retrieval"])]
    assert [(b.line, b.reason) for b in dataset.bad_rows] == [(3, "question: must not be empty")]


def test_csv_without_the_required_header_says_what_to_add():
    with pytest.raises(InputError) as caught:
        parse_dataset("q,a\n1,2\n", "g.csv", "csv")
    assert "id,question,reference,tags" in caught.value.fix


def test_missing_file_and_empty_dataset_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match="has no question column"):
        load_dataset(tmp_path / "empty.jsonl")
    (tmp_path / "blank.jsonl").write_text(json.dumps({"question": " "}) + "\n")
    with pytest.raises(InputError, match="has no valid rows \\(1 bad\\): line 1: question: must not be empty"):
        load_dataset(tmp_path / "blank.jsonl")


def test_selecting_by_tags_and_limit():
    dataset = load_dataset(ROOT / "data" / "eval" / "golden.jsonl")
    numeric = dataset.select(tags=["numeric"])
    assert numeric.items and all("numeric" in i.tags for i in numeric.items)
    assert len(dataset.select(limit=3).items) == 3


def test_the_golden_set_covers_the_hard_kinds():
    dataset = load_dataset(ROOT / "data" / "eval" / "golden.jsonl")
    assert dataset.bad_rows == [] and len(dataset.items) >= 30
    kinds = {
        kind: [i for i in dataset.items if kind in i.tags]
        for kind in ("unanswerable", "false-premise", "conflation", "numeric", "multi-hop")
    }
    assert all(len(rows) >= 4 for rows in kinds.values()), {k: len(v) for k, v in kinds.items()}
    assert all(i.reference is None for i in kinds["unanswerable"])
    assert all(i.reference for i in dataset.items if "unanswerable" not in i.tags)
