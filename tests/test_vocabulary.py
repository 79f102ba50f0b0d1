"""The status and verdict vocabularies: enum members that are their own stored strings, on Python 3.10 too."""

from __future__ import annotations

import enum
import importlib.util
import json

import duckdb
import pytest
from conftest import ROOT

from pipeline.answering.status import STATUS_TEXT, status_label
from pipeline.history.present import VERDICT_RANK, VERDICT_STYLES
from pipeline.verification.claims import Verdict
from pipeline.vocabulary import Status


def test_a_member_is_stored_and_printed_as_its_word():
    con = duckdb.connect()
    con.execute("CREATE TABLE runs (status VARCHAR, verdict VARCHAR)")
    con.execute("INSERT INTO runs VALUES (?, ?)", [Status.ACCEPTED, Verdict.EXTRACTION_ERROR])
    assert con.execute("SELECT status, verdict FROM runs").fetchone() == ("accepted", "extraction_error")
    assert json.dumps({"status": Status.NO_CLAIMS}) == '{"status": "no_claims"}'
    assert f"{Status.FLAGGED:9}|{Verdict.SUPPORTED}" == "flagged  |supported"
    # a word read back from the store finds what the member keys, and is the member
    assert STATUS_TEXT["abstained"] == STATUS_TEXT[Status.ABSTAINED] and Status("off_topic") is Status.OFF_TOPIC


def test_every_status_has_its_text():
    assert all(status_label(s) != s.value for s in Status)


def test_every_verdict_a_claim_keeps_has_one_style():
    shown = set(Verdict) - {Verdict.UNDECIDED}  # undecided passes a claim on in the chain; no claim keeps it
    assert set(VERDICT_STYLES) == shown
    assert VERDICT_RANK[Verdict.CONTRADICTED] < VERDICT_RANK[Verdict.UNSUPPORTED] < VERDICT_RANK[Verdict.SUPPORTED]


def test_the_python_3_10_str_enum_behaves_as_python_3_11s(monkeypatch):
    monkeypatch.delattr(enum, "StrEnum")
    spec = importlib.util.spec_from_file_location("vocabulary_310", ROOT / "pipeline" / "vocabulary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.StrEnum.__module__ == "vocabulary_310"  # the fallback class, not enum.StrEnum
    old = module.Status.ACCEPTED
    assert old == "accepted" and str(old) == "accepted" and f"{old:>10}" == "  accepted"
    assert json.dumps([old]) == '["accepted"]' and {"accepted": 1}[old] == 1
    with pytest.raises(ValueError):
        module.Status("accepted ")
