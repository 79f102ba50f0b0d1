"""Sentence and claim splitting that knows the shape of real answers (issue 11), on constructed text."""

from pipeline.detector.bench import answer_claims
from pipeline.text import is_meta_statement, sentences


def split(text):
    found = sentences(text)
    assert all(text[s.start : s.end] == s.text for s in found), "every sentence keeps its character span"
    return [(s.text, s.kind) for s in found]


def test_numbered_steps_and_bullets_are_items_without_their_markers():
    text = "To bake bread, follow these steps:\n\n1. Mix the flour.\n2. Knead it [1].\n- Let it rise.\n• Bake it."
    assert split(text) == [
        ("To bake bread, follow these steps:", "heading"),
        ("Mix the flour.", "item"),
        ("Knead it [1].", "item"),
        ("Let it rise.", "item"),
        ("Bake it.", "item"),
    ]


def test_inline_numbers_bullets_and_step_labels_are_not_sentences():
    assert split("Mix the flour. 2. Knead it. 3. Bake it.") == [
        ("Mix the flour.", "sentence"),
        ("Knead it.", "item"),
        ("Bake it.", "item"),
    ]
    assert split("* Eases pain * Improves sleep") == [("Eases pain", "item"), ("Improves sleep", "item")]
    assert split("Step 6: Serve warm.\n(Passage 2) 4.\n7.") == [("Serve warm.", "item")]


def test_headings_are_marked():
    assert split("## Benefits\n**Summary**\nIt helps.") == [
        ("Benefits", "heading"),
        ("**Summary**", "heading"),
        ("It helps.", "sentence"),
    ]


def test_abbreviations_and_initials_do_not_end_sentences():
    text = "Dr. Smith lives in the U.S. near Washington. It rains, e.g. in May. J. R. Smith agreed."
    assert [t for t, _ in split(text)] == [
        "Dr. Smith lives in the U.S. near Washington.",
        "It rains, e.g. in May.",
        "J. R. Smith agreed.",
    ]


def test_meta_statements_are_not_claims():
    for text in (
        "I am unable to answer from the passages.",
        "Passage 3 does not mention the price.",
        "The exact date is not stated in the passages.",
        "There is no information about the cost.",
    ):
        assert is_meta_statement(text), text
    for text in ("The museum does not open on Mondays.", "The answer is cycling."):
        assert not is_meta_statement(text), text
    answer = "Based on the passages, here are the steps:\n1. Mix the flour.\nPassage 2 does not say how long."
    assert answer_claims(answer) == ["Mix the flour."]
