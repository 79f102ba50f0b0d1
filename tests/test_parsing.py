"""The tolerant parser of structured replies: recovers a valid object, never invents one."""

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from pipeline.models.parsing import balanced_objects, parse


class Score(BaseModel):
    score: int = Field(ge=1, le=5)
    reasoning: str


class Verdict(BaseModel):
    verdict: Literal["contradicted", "unsupported"]
    quote: str


def test_a_bare_object_parses():
    value, reason = parse(Score, '  {"score": 4, "reasoning": "close"}\n')
    assert (value, reason) == (Score(score=4, reasoning="close"), None)


@pytest.mark.parametrize("fence", ["```json\n{body}\n```", "```\n{body}\n```", "```JSON {body}```"])
def test_an_object_in_a_code_fence_parses(fence):
    text = "Here is my assessment.\n" + fence.replace("{body}", '{"score": 2, "reasoning": "misses the year"}')
    assert parse(Score, text) == (Score(score=2, reasoning="misses the year"), None)


def test_the_fenced_object_wins_over_an_example_in_the_prose():
    text = (
        'The format is {"score": 1, "reasoning": "example"}. My answer:\n'
        '```json\n{"score": 5, "reasoning": "all facts match"}\n```'
    )
    assert parse(Score, text)[0] == Score(score=5, reasoning="all facts match")


def test_an_object_embedded_in_prose_parses_with_braces_inside_strings():
    text = 'Sure! {"score": 3, "reasoning": "uses {braces} and \\"quotes\\" }"} Hope that helps.'
    assert parse(Score, text)[0] == Score(score=3, reasoning='uses {braces} and "quotes" }')


def test_the_first_object_that_validates_is_taken():
    text = 'First {"note": "not it"} then {"verdict": "unsupported", "quote": ""} and {"verdict": "contradicted"}'
    assert parse(Verdict, text)[0] == Verdict(verdict="unsupported", quote="")


def test_a_nested_object_is_not_taken_for_the_reply():
    text = '{"score": 9, "details": {"score": 2, "reasoning": "inner"}}'
    value, reason = parse(Score, text)
    assert value is None and reason == "score: Input should be less than or equal to 5"


@pytest.mark.parametrize("text", ['{"score": 4, "reasoning": "cut of', 'Result: {"score": 4, "reas'])
def test_truncated_json_is_invalid_with_its_reason(text):
    assert parse(Score, text) == (None, "reply: the JSON object is not closed (truncated reply?)")


def test_a_schema_mismatch_is_invalid_with_the_field_named():
    assert parse(Score, '{"score": "high", "reasoning": "x"}') == (
        None,
        "score: Input should be a valid integer, unable to parse string as an integer",
    )
    assert parse(Score, 'Answer: ```json\n{"score": 3}\n```') == (None, "reasoning: Field required")
    assert parse(Verdict, '{"verdict": "supported", "quote": ""}')[1].startswith("verdict: Input should be")


def test_prose_without_json_is_invalid():
    assert parse(Score, "I would give it a four.") == (None, "reply: no JSON object in the reply")


def test_balanced_objects_are_top_level_only():
    assert list(balanced_objects('a {"x": {"y": 1}} b {"z": "}"} c {')) == ['{"x": {"y": 1}}', '{"z": "}"}']


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("Yes", True),
        ("No.", False),
        ("**Yes**", True),
        ("Answer: No", False),
        ('```json\n{"answer": "yes"}\n```', True),
        ('The verdict is below.\n{"supported": false}', False),
        ("Eyes wide open", None),  # never a substring: "eyes" is not "yes"
        ("I think the answer is yes", None),
        ("", None),
    ],
)
def test_yes_no_verdicts_are_read_tolerantly_but_never_guessed(text, verdict):
    from pipeline.models.parsing import parse_yes_no
    from pipeline.verification.yes_no import parse_yes_no as verifiers_parser

    assert verifiers_parser is parse_yes_no  # the verifiers use the model layer's one parser
    assert parse_yes_no(text) is verdict
