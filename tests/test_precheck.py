"""The deterministic grounding pre-check on crafted claims, and its precision on the development set."""

import json
from pathlib import Path

import pytest

from pipeline.verification.precheck import entities, numbers, precheck

CONTEXT = (
    "The RAG index held 21 million passages from a December 2018 Wikipedia dump. Training used "
    "one thousand steps and 5% dropout. Patrick Lewis presented it at NeurIPS 2020 in Vancouver."
)


@pytest.mark.parametrize(
    "claim",
    [
        "The index held 21,000,000 passages.",
        "The index held twenty-one million passages.",
        "Training used 1,000 steps.",
        "Training used 1000 steps.",
        "Dropout was five percent.",
        "Dropout was 5 per cent.",
        "PATRICK LEWIS presented RAG.",
        "It was presented at neurips 2020.",
        "Lewis presented it in Vancouver.",
    ],
)
def test_numbers_and_names_in_other_formats_are_not_flagged(claim):
    assert precheck(claim, CONTEXT).verdict is None


@pytest.mark.parametrize(
    "claim, missing",
    [
        ("RAG was presented at ICML 2020.", ["ICML"]),
        ("The index held 50 million passages.", ["50 million"]),
        ("RAG appeared in 2019 at NeurIPS.", ["2019"]),
        ("Sebastian Riedel and Douwe Kiela wrote it.", ["Sebastian Riedel", "Douwe Kiela"]),
        ("Dropout was 10%.", ["10%"]),
    ],
)
def test_a_missing_number_or_entity_is_named(claim, missing):
    result = precheck(claim, CONTEXT)
    assert result.verdict == "unsupported" and result.missing == missing
    assert result.reason.startswith(f"'{missing[0]}'") and "in no retrieved source" in result.reason


def test_a_verbatim_claim_is_supported_after_normalisation():
    assert precheck("Training used one  thousand steps and 5% dropout [2].", CONTEXT).verdict == "supported"
    assert precheck("the rag index held 21 million passages", CONTEXT).verdict == "supported"


def test_number_and_entity_extraction():
    assert numbers("1,000 and one thousand and 21 million and 3.5 days") == {
        1000.0: "1,000",
        21_000_000.0: "21 million",
        3.5: "3.5",
    }
    assert entities("Yes. The paper by John Russell Taylor cites Vivien Leigh and BLEU.") == [
        "John Russell Taylor",
        "Vivien Leigh",
        "BLEU",
    ]


def test_precheck_is_conservative_on_the_development_set():
    path = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "halueval_qa_dev.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    flagged = [r for r in rows if precheck(r["answer"], r["context"]).verdict == "unsupported"]
    truly = sum(r["label"] == 1 for r in flagged)
    assert len(flagged) >= 50
    assert truly / len(flagged) >= 0.9


# Failure patterns of real answers (issue 11), on short constructed examples.

STEPS_CONTEXT = (
    "Preheat the oven to 350 degrees. Season the ribs with salt. Bake them for two hours. "
    "The Fair Labor Standards Act (FLSA) sets the federal minimum wage in the United States of America. "
    "The average high in July is 86°F."
)


@pytest.mark.parametrize(
    "claim",
    [
        "6.",  # a list marker on its own
        "Step 6: Season the ribs with salt.",  # a step number
        "Repeat steps 7 and 8 for the other ribs.",  # a reference to steps of the answer itself
        "According to passage 3, you should bake them for two hours.",  # a passage reference
        "(Passage 2) Season the ribs with salt [1].",
        "The FLSA sets the minimum wage.",  # an acronym the context spells out
        "The Fair Labor Standards Act applies in the US.",  # US for the United States of America
        "The average high in July is 30°C.",  # a value the answer derives (86°F in Celsius)
        "* Season the ribs with salt * Bake them",
        "Note: Do not open the oven while baking.",  # an imperative after a label is no name
        "Tip: Bake them for two hours.",
        "Scope of Coverage: the FLSA sets the federal minimum wage.",
    ],
)
def test_shapes_of_real_answers_are_not_flagged(claim):
    assert precheck(claim, STEPS_CONTEXT).verdict != "unsupported", precheck(claim, STEPS_CONTEXT).reason


def test_a_name_from_the_question_is_not_missing():
    claim = "According to Allrecipes, season the ribs with salt."
    assert precheck(claim, STEPS_CONTEXT).verdict == "unsupported"
    assert precheck(claim, STEPS_CONTEXT, question="how to bake ribs allrecipes").verdict is None


def test_a_claim_made_mostly_of_new_content_is_unsupported():
    claim = "Marinate overnight in buttermilk, garlic, paprika and brown sugar before smoking over hickory wood."
    result = precheck(claim, STEPS_CONTEXT)
    assert result.verdict == "unsupported" and "content words" in result.reason
    assert {"buttermilk", "garlic", "hickory"} <= set(result.missing)
    # a paraphrase that reuses the sources' words is left to the model
    assert precheck("Bake the seasoned ribs in a preheated oven for two hours.", STEPS_CONTEXT).verdict is None
    # a short claim is never judged by its vocabulary alone
    assert precheck("Use hickory wood.", STEPS_CONTEXT).verdict is None
    # the thresholds are settings
    assert precheck(claim, STEPS_CONTEXT, novel_words_min=50).verdict is None


def test_units_and_converted_values_are_not_missing_names_or_numbers():
    context = "Tallahassee has an average high of 79 degrees and a low of 56 degrees."
    assert precheck("The average high is 79 degrees Fahrenheit (26 degrees Celsius).", context).verdict is None
    result = precheck("The average high is 95 degrees Fahrenheit.", context)
    assert result.verdict == "unsupported" and result.missing == ["95"]


def test_small_numbers_written_as_words_in_the_sources_are_found():
    assert precheck("Try again after 10 or 20 years.", "Wait ten or twenty years before trying.").verdict is None


def _ragtruth_rows():
    path = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ragtruth_qa_dev.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_precheck_holds_on_real_prose():
    """The issue's target on the RAGTruth development set with the answer's own sentences as claims:
    answer-level precision >= 0.85 at recall >= 0.30."""
    from pipeline.detector.bench import answer_claims

    rows = _ragtruth_rows()
    flagged = [
        r
        for r in rows
        if any(precheck(c, r["context"], r["question"]).verdict == "unsupported" for c in answer_claims(r["answer"]))
    ]
    truly = sum(r["label"] for r in flagged)
    assert truly / len(flagged) >= 0.85
    assert truly / sum(r["label"] for r in rows) >= 0.30
