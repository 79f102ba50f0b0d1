"""Untrusted text is shown as text: CSV exports cannot start formulas, the terminal gets no escape sequences,
pages escape Markdown, questions must have visible characters; the CLI's runs filters and export."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta, timezone

import pytest

from pages.views.common import escape_keeping_code
from pipeline.answering.engine import clean_question
from pipeline.cli.main import main
from pipeline.cli.terminal import visible_controls
from pipeline.errors import InputError
from store.records import ClaimRecord, RunLog, RunRecord
from store.runs import save_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
PAYLOADS = ['=HYPERLINK("http://evil.example/x","click")', "+1+2", "-3+4", "@SUM(A1)", " =1+1", "\t=cmd"]


def store_runs(db, questions, n_plain=0):
    ids = []
    for i, question in enumerate(list(questions) + [f"plain question {k}" for k in range(n_plain)]):
        run = RunRecord(
            kind="eval" if i % 2 else "chat",
            question=question,
            status="flagged" if i % 3 == 0 else "accepted",
            started_at=T0 + timedelta(days=i),
            answer=f"-answer {i}" if i == 0 else f"answer {i}",
            faithfulness=round((i % 11) / 10, 2),
            n_attempts=1,
            final_attempt=1,
            generator_model="llama3.2",
        )
        claims = [ClaimRecord(1, 1, "a claim", "supported", "precheck")]
        ids.append(save_run(db, RunLog(run, claims=claims)))
    return ids


def test_csv_export_neutralises_formula_cells_and_leaves_numbers(db, tmp_path, capsys):
    store_runs(db, PAYLOADS)
    target = tmp_path / "runs.csv"
    assert main(["runs", "--export", str(target)]) == 0
    assert f"exported {len(PAYLOADS)} runs" in capsys.readouterr().out
    rows = list(csv.DictReader(target.open(newline="", encoding="utf-8")))
    assert sorted(r["question"] for r in rows) == sorted("'" + p for p in PAYLOADS)
    assert all(r["question"][0] not in "=+-@\t" for r in rows)
    assert {r["answer"] for r in rows if r["answer"].startswith("'")} == {"'-answer 0"}
    assert sorted(float(r["faithfulness"]) for r in rows) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]


def test_jsonl_and_parquet_exports_keep_the_text_as_stored(db, tmp_path):
    store_runs(db, PAYLOADS[:1])
    assert main(["runs", "--export", str(tmp_path / "runs.jsonl")]) == 0
    row = json.loads((tmp_path / "runs.jsonl").read_text().splitlines()[0])
    assert row["question"] == PAYLOADS[0] and row["claims"][0]["text"] == "a claim"
    assert main(["runs", "--export", str(tmp_path / "runs.parquet")]) == 0
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "runs.parquet").column("question").to_pylist() == [PAYLOADS[0]]


@pytest.mark.slow
def test_runs_takes_the_runs_pages_filters_and_export_writes_every_match_unpaged(db, tmp_path, capsys):
    store_runs(db, [], n_plain=30)
    assert main(["runs", "--kind", "eval", "--status", "accepted", "--json", "--limit", "100"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["kind"] == "eval" and r["status"] == "accepted" for r in rows)
    assert len(rows) == sum(1 for i in range(30) if i % 2 and i % 3)
    with pytest.raises(SystemExit) as refused:  # a share above 1 is refused, not an empty table
        main(["runs", "--min-faithfulness", "1.5", "--json"])
    assert refused.value.code == 2 and "between 0 and 1" in capsys.readouterr().err
    assert main(["runs", "--min-faithfulness", "0.5", "--max-faithfulness", "0.7", "--json", "--limit", "100"]) == 0
    assert sorted(r["faithfulness"] for r in json.loads(capsys.readouterr().out)) == [0.5] * 3 + [0.6] * 3 + [0.7] * 3
    assert main(["runs", "--since", "2026-01-29", "--text", "QUESTION 2", "--json"]) == 0
    assert [r["question"] for r in json.loads(capsys.readouterr().out)] == ["plain question 29", "plain question 28"]
    target = tmp_path / "all.jsonl"
    assert main(["runs", "--limit", "5", "--export", str(target)]) == 0
    assert len(target.read_text().splitlines()) == 30  # --limit pages the listing, never the export


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "--export", "runs.xlsx"], "cannot tell the export format of 'runs.xlsx'"),
        (["runs", "--export", "/no/such/folder/runs.csv"], "the folder of '/no/such/folder/runs.csv' does not exist"),
    ],
)
def test_a_bad_export_target_says_what_to_fix(db, argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_bad_date_says_how_to_write_it(db, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["runs", "--since", "yesterday"])
    assert caught.value.code == 2
    assert "'yesterday' is not a date: write it as YYYY-MM-DD" in capsys.readouterr().err


def test_the_terminal_gets_no_escape_sequence_from_stored_text(db, capsys):
    store_runs(db, ["evil \x1b[2J\x1b]0;owned\x07 question \x1b[31mred"])
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "␛[2J" in out
    assert main(["show", "1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "question: evil ␛[2J" in out
    assert visible_controls("a\x00b\x9bc\td\ne") == "a␀b\ufffdc\td\ne"


@pytest.mark.parametrize("question", ["\x00\x00", "\u200b\u200c\u200d\ufeff", "\x01\x02 \x1b", "\u2060\u202e"])
def test_a_question_without_visible_characters_is_refused(settings, question):
    with pytest.raises(InputError) as caught:
        clean_question(question, settings)
    assert "no visible characters" in caught.value.message


def test_a_question_loses_its_control_and_zero_width_characters(settings):
    assert clean_question("What\x00 is\u200b RAG\x1b[31m?", settings) == "What is RAG [31m?"


def test_ask_refuses_an_invisible_question_without_a_run(db, capsys):
    assert main(["ask", "\u200b\u200b"]) == 2
    assert "no visible characters" in capsys.readouterr().err
    assert main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_fix_keeps_its_code_and_escapes_everything_else():
    shown = escape_keeping_code("move ![x](http://evil.example/i.png) aside: `mv a b`")
    assert shown.endswith("`mv a b`")
    assert "!\\[x\\]\\(http\\:" in shown and "](http://" not in shown


def test_golden_sets_with_a_byte_order_mark_lose_no_row(tmp_path):
    from pipeline.evaluation.dataset import load_dataset

    (tmp_path / "g.csv").write_text("\ufeffid,question,reference\nq1,What is RAG?,retrieval\nq2,Why?,\n")
    (tmp_path / "g.jsonl").write_text(
        '\ufeff{"id": "q1", "question": "What is RAG?"}\n{"id": "q2", "question": "Why?"}\n'
    )
    for name in ("g.csv", "g.jsonl"):
        dataset = load_dataset(tmp_path / name)
        assert [i.id for i in dataset.items] == ["q1", "q2"] and dataset.bad_rows == [], name


def test_an_unterminated_csv_quote_is_refused_with_where_it_is(tmp_path, capsys):
    (tmp_path / "g.csv").write_text('id,question\nq1,What is RAG?\nq2,"What is\nq3,Other\n')
    assert main(["eval", str(tmp_path / "g.csv"), "--name", "quote"]) == 2
    err = capsys.readouterr().err
    assert "the CSV file is malformed after line 2" in err and "never closed" in err and "Traceback" not in err


def test_bare_urls_and_addresses_do_not_become_links():
    from pages.views.markup import escape_markdown

    shown = escape_markdown("visit http://phish.example/x, www.evil.example or mail boss@evil.example")
    assert "//\u200bphish" in shown and "www\u200b\\.evil" in shown and "@\u200bevil" in shown
    assert shown.replace("\u200b", "").replace("\\", "") == (
        "visit http://phish.example/x, www.evil.example or mail boss@evil.example"
    )


def test_a_colon_in_untrusted_text_starts_no_colour_directive_or_emoji_shortcode():
    """Streamlit's Markdown reads `:red[...]` (colour), `:smile:` (emoji) and `:material/...:` (icon) only from
    an unescaped colon: escape_markdown escapes every one, and Markdown shows the escaped text as the text."""
    import re

    from markdown_it import MarkdownIt

    from pages.views.markup import escape_markdown

    hostile = ":red[boom] :smile: :material/warning: :blue-background[x]"
    shown = escape_markdown(hostile)
    assert shown == r"\:red\[boom\] \:smile\: \:material/warning\: \:blue\-background\[x\]"
    assert not re.search(r"(?<!\\):", shown)  # no colon left to open a directive or a shortcode
    assert MarkdownIt("commonmark").renderInline(shown) == hostile  # rendered, it reads as typed
