"""bench/imported.py without a long run: rows, counting, the fake's answers to Ragas's prompts, and (where Ragas is
installed) Ragas's Faithfulness on three rows against the fake."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from fake_ollama import ragas_reply

from bench import imported


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.fixture
def datasets(tmp_path):
    folder = tmp_path / "datasets"
    folder.mkdir()
    qa, summary, data2txt = imported.SOURCES
    write_jsonl(
        folder / qa,
        [
            {"id": "q1", "question": "Who?", "context": "passage 1: A b.\n\npassage 2: C d.", "answer": "A did."},
            {"id": "q2", "question": "What?", "context": "Some context.", "answer": "  "},  # no answer: passed over
        ],
    )
    write_jsonl(folder / summary, [{"id": "s1", "question": "Summarize.", "context": "One. Two.", "answer": "One."}])
    write_jsonl(folder / data2txt, [{"id": "d1", "question": "Describe.", "context": '{"a": 1}', "answer": "A is 1."}])
    return folder


def test_rows_come_from_the_sources_in_order_until_there_are_enough(datasets):
    rows = imported.build_rows(3, datasets)
    assert [r["id"] for r in rows] == ["q1", "s1", "d1"]
    assert rows[0] == {
        "id": "q1",
        "question": "Who?",
        "answer": "A did.",
        "contexts": ["passage 1: A b.", "passage 2: C d."],
    }
    assert [r["id"] for r in imported.build_rows(2, datasets)] == ["q1", "s1"]
    with pytest.raises(SystemExit, match="only 3 rows"):
        imported.build_rows(4, datasets)


def test_rows_file_is_what_the_dataset_loader_reads(datasets, tmp_path):
    from pipeline.evaluation.dataset import load_dataset

    path = imported.write_rows(imported.build_rows(3, datasets), tmp_path / "rows.jsonl")
    items = load_dataset(path).items
    assert [i.id for i in items] == ["q1", "s1", "d1"]
    assert items[0].answer == "A did." and [c.text for c in items[0].contexts] == ["passage 1: A b.", "passage 2: C d."]


def test_a_long_paragraph_is_cut_into_runs_of_whole_sentences():
    sentence = "word " * 9 + "end."  # 10 words
    paragraph = " ".join([sentence] * 5)
    passages = imported.split_context(f"Short one.\n\n{paragraph}\n\n\n", max_words=25)
    assert passages[0] == "Short one."
    assert [len(p.split()) for p in passages[1:]] == [20, 20, 10]
    assert " ".join(passages[1:]) == paragraph
    assert imported.split_context("  \n\n ") == []


def test_calls_and_prompt_tokens_are_counted_from_chat_and_generate_requests():
    records = [
        {"path": "/api/chat", "model": "llama3.2:latest", "prompt_tokens": 100},
        {"path": "/api/generate", "model": "bespoke-minicheck:latest", "prompt_tokens": 40},
        {"path": "/api/chat", "model": "llama3.2:latest"},  # failed before it was answered
        {"path": "/api/embed", "model": "nomic-embed-text:latest"},
        {"path": "/api/show", "model": "llama3.2:latest"},
    ]
    assert imported.count_calls(records) == (3, 140, {"bespoke-minicheck:latest": 1, "llama3.2:latest": 2})


def test_processed_prompt_tokens_leave_out_what_the_prompt_cache_held():
    records = [
        {"path": "/api/chat", "model": "llama3.2:latest", "prompt_tokens": 100, "cached_tokens": 60},
        {"path": "/api/chat", "model": "bespoke-minicheck:latest", "prompt_tokens": 40},  # no cache: all processed
        {"path": "/api/embed", "model": "nomic-embed-text:latest", "prompt_tokens": 7},
    ]
    assert imported.processed_tokens(records) == 40 + 40


def test_with_a_prompt_cache_the_processed_tokens_are_a_figure_and_a_ratio_of_their_own():
    ragas = imported.Side("Ragas", 10, 20.0, 20, 10_000, {"llama3.2:latest": 20}, 10, 0.5, processed_tokens=4_000)
    ours = imported.Side("workbench", 10, 5.0, 80, 12_000, {"llama3.2:latest": 80}, 10, 0.6, processed_tokens=3_000)
    figures = {f.name: f for f in imported.figures([ragas, ours], 10, "gpu, prompt cache")}
    assert figures["workbench: prompt tokens processed per row"].value == 300
    every = figures["workbench / Ragas: prompt tokens"]
    assert every.value == 1.2 and every.meets == "NO"
    processed = figures["workbench / Ragas: prompt tokens processed"]
    assert processed.value == 0.75 and processed.meets == "yes"
    plain = {f.name for f in imported.figures([ragas, dataclasses.replace(ours, processed_tokens=None)], 10, "gpu")}
    assert "workbench / Ragas: prompt tokens processed" not in plain


def test_a_side_saved_alone_is_compared_only_on_the_same_rows_and_latency_model(tmp_path):
    ragas = imported.Side("Ragas", 10, 20.0, 20, 10_000, {"llama3.2:latest": 20}, 10, 0.5, "n", 4_000)
    path = tmp_path / "ragas.json"
    imported.save_sides([ragas], "gpu, prompt cache", path)
    assert imported.load_sides(path, 10, "gpu, prompt cache; more") == [ragas]
    with pytest.raises(SystemExit, match="measure both sides the same way"):
        imported.load_sides(path, 20, "gpu, prompt cache")
    with pytest.raises(SystemExit, match="measure both sides the same way"):
        imported.load_sides(path, 10, "gpu")


def test_figures_give_per_row_figures_and_the_ratios():
    ragas = imported.Side("Ragas", 10, 20.0, 20, 10_000, {"llama3.2:latest": 20}, 10, 0.5)
    ours = imported.Side("workbench", 10, 5.0, 80, 4_000, {"llama3.2:latest": 80}, 10, 0.6)
    figures = {f.name: f for f in imported.figures([ragas, ours], 10, "gpu")}
    assert figures["Ragas: model calls per row"].value == 2
    assert figures["workbench: prompt tokens per row"].value == 400
    assert figures["workbench / Ragas: wall time"].value == 0.25
    assert figures["workbench / Ragas: prompt tokens"].value == 0.4
    assert figures["Ragas: wall time, 10 rows"].note.startswith("gpu; ")
    assert (
        figures["workbench / Ragas: wall time"].target == 0.5 and figures["workbench / Ragas: wall time"].meets == "yes"
    )
    assert figures["workbench / Ragas: prompt tokens"].target == 1.0
    assert "floor: one read of every row, 10 rows" not in figures  # no floor given
    with_floor = {f.name: f for f in imported.figures([ragas, ours], 10, "gpu", floor_s=2.0)}
    floor = with_floor["floor: one read of every row, 10 rows"]
    assert floor.value == 2.0 and floor.note == "the workbench's wall time is 2.5× it"
    costly = imported.Side("workbench", 10, 12.0, 80, 12_000, {"llama3.2:latest": 80}, 10, 0.6)
    over = {f.name: f for f in imported.figures([ragas, costly], 10, "gpu")}
    assert over["workbench / Ragas: wall time"].meets == "NO" and over["workbench / Ragas: prompt tokens"].meets == "NO"
    skipped = imported.figures([], 10, "Ragas is not installed")
    assert len(skipped) == 1 and math.isnan(skipped[0].value) and "not installed" in skipped[0].note


def test_the_floor_is_one_read_of_every_row_over_the_slots():
    rows = [
        {"question": "Who?", "contexts": ["one two three", "four five"], "answer": "six seven"},  # 8 words
        {"question": "Why?", "contexts": ["a b c d e f g h i j"], "answer": "k"},  # 12 words
    ]
    per_token, per_prompt_token, slots, _ = imported.LATENCIES["gpu"]
    assert imported.one_read_floor(rows, "gpu") == pytest.approx((20 * per_prompt_token + 2 * per_token) / slots)
    assert imported.one_read_floor(rows, "fast") == pytest.approx(2 * 0.002 / 4)  # no prompt cost


def test_the_sentence_floor_is_one_verifier_call_per_sentence_against_the_whole_context():
    answer = "Six seven [1]. Eight nine ten."  # its citation is dropped from the claim
    rows = [{"question": "Who?", "contexts": ["one two three", "four five"], "answer": answer}]
    document = "[1] source: context 1\none two three\n\n[2] source: context 2\nfour five"
    calls = [f"Document: {document}\nClaim: Six seven.", f"Document: {document}\nClaim: Eight nine ten."]
    words = [len(c.split()) for c in calls]
    floor = imported.sentence_floor(rows, "gpu")
    assert (floor.calls, floor.prompt_tokens, floor.processed_tokens) == (2, sum(words), sum(words))
    per_token, per_prompt_token, slots, _ = imported.LATENCIES["gpu"]
    assert floor.wall_s == pytest.approx((sum(words) * per_prompt_token + 2 * per_token) / slots)
    cached = imported.sentence_floor(rows, "gpu", prompt_cache=True)
    held = len(f"Document: {document}\nClaim:".split())  # the second sentence reads only its own words
    assert cached.processed_tokens == sum(words) - held and cached.prompt_tokens == sum(words)
    assert cached.wall_s == pytest.approx(((sum(words) - held) * per_prompt_token + 2 * per_token) / slots)


def ragas_prompt(given: dict) -> str:
    """The shape of a Ragas PydanticPrompt: instruction, schema and examples, then the input and "Output: "."""
    return (
        "Instruction.\nPlease return the output in a JSON format ...\n--------EXAMPLES-----------\n"
        'Example 1\nInput: {"question": "q", "answer": "a"}\nOutput: {"statements": ["x"]}\n'
        "-----------------------------\n\nNow perform the same with the following input\ninput: "
        + json.dumps(given, indent=4)
        + "\nOutput: "
    )


def test_the_fake_answers_ragas_faithfulness_prompts_in_ragas_schemas():
    statements = ragas_reply(
        ragas_prompt({"question": "Where?", "answer": "Paris is in France. Yes. It has 2 million people."})
    )
    assert statements == {"statements": ["Paris is in France.", "It has 2 million people."]}
    verdicts = ragas_reply(
        ragas_prompt(
            {
                "context": "Paris is the capital of France, with 2.1 million people.",
                "statements": statements["statements"],
            }
        )
    )["statements"]
    assert [v["statement"] for v in verdicts] == statements["statements"]
    assert [v["verdict"] for v in verdicts] == [1, 0]  # "2" is not a number the context holds
    assert all(v["reason"] for v in verdicts)
    assert ragas_reply("Question: Where?\nContext: Paris.") is None


def three_rows(tmp_path):
    rows = [
        {
            "id": "1",
            "question": "Capital?",
            "answer": "Paris is the capital of France.",
            "contexts": ["Paris is the capital of France."],
        },
        {
            "id": "2",
            "question": "Author?",
            "answer": "Hamlet was written by Marlowe.",
            "contexts": ["Shakespeare wrote Hamlet."],
        },
        {
            "id": "3",
            "question": "Size?",
            "answer": "Paris has 2.1 million people. It is in Europe.",
            "contexts": ["Paris has 2.1 million people."],
        },
    ]
    return imported.write_rows(rows, tmp_path / "rows.jsonl")


def check_ragas_side(side):
    assert side.calls == 6 and side.by_model == {"llama3.2:latest": 6}  # statements, then verdicts, per row
    assert side.prompt_tokens > 6 * 200  # each prompt carries Ragas's instruction, schema and examples
    assert side.scored == 3 and side.mean == pytest.approx((1 + 0 + 0.5) / 3)


def test_ragas_faithfulness_in_process_against_the_fake(fake, tmp_path):
    pytest.importorskip("ragas")
    rows_path = three_rows(tmp_path)

    def score():
        imported.ragas_worker(str(rows_path), fake.url, str(tmp_path / "out.json"))
        got = json.loads((tmp_path / "out.json").read_text())
        return got["wall_s"], got["scored"], got["mean"], ""

    check_ragas_side(imported.measured(fake, "Ragas", 3, score))


def test_ragas_faithfulness_from_its_own_environment_against_the_fake(fake, tmp_path):
    python = imported.ragas_python()
    if python is None:
        pytest.skip("no Ragas environment (.venv-ragas, requirements-bench.txt)")
    rows_path = three_rows(tmp_path)
    check_ragas_side(
        imported.measured(fake, "Ragas", 3, lambda: imported.score_ragas(python, rows_path, fake.url, tmp_path))
    )
