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
