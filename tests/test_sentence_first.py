"""Sentences first, atomic claims where one fails (claim_granularity, pipeline/verification/sentence_first.py)."""

from __future__ import annotations

import dataclasses
import json
from itertools import groupby
from pathlib import Path

import oracle_verifier
import pytest
from test_faithfulness import minicheck_asked

from pipeline.answering.engine import VerifiedQueryEngine, run_config
from pipeline.evaluation.given import check_given, given_config
from pipeline.models.llm import LLM
from pipeline.text import sentences
from pipeline.verification.claims import Passage, context_block
from pipeline.verification.sentence_first import sentence_claim

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
TOWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."
BRIDGE = "The Golden Gate Bridge opened in 1937. Its main span is 1,280 metres long."
WALL = "The Great Wall of China is more than 21,000 kilometres long. Most of it was built during the Ming dynasty."
INVENTED = "The Eiffel Tower is 330 metres tall. It was painted green in 1850. Owls nest in its lifts since 1901."


def lean(settings, **changes):
    return dataclasses.replace(settings, cache_enabled=False, precheck_enabled=False, verify_concurrency=1, **changes)


def extractions(run) -> list[str]:
    """The answer text each claim extraction call of a checked given answer was asked to split."""
    asked = [json.loads(c.prompt_text)[-1]["content"] for c in run.log.calls if c.stage == "extract_claims"]
    return [text.split("Answer:\n", 1)[1] for text in asked]


def test_the_setting_is_part_of_every_runs_configuration(settings):
    for granularity in ("auto", "sentence", "atomic"):
        changed = dataclasses.replace(settings, claim_granularity=granularity)
        assert run_config(changed)["claim_granularity"] == granularity
        assert given_config(changed, "bot")["claim_granularity"] == granularity
    assert settings.claim_granularity == "auto"


@pytest.mark.parametrize(
    "granularity, decomposed",
    [
        ("auto", ["It was painted green in 1850.\nOwls nest in its lifts since 1901."]),  # the failing two alone
        ("atomic", [INVENTED]),  # every sentence
        ("sentence", []),  # none
    ],
)
def test_only_a_failing_sentence_is_decomposed(fake, settings, db, granularity, decomposed):
    checked = lean(settings, claim_granularity=granularity)
    run = check_given(checked, LLM(checked, db), "How tall is the Eiffel Tower?", INVENTED, [TOWER], "bot")
    assert extractions(run) == decomposed
    claims = run.result.attempts[0].claims
    assert claims[0].text == "The Eiffel Tower is 330 metres tall." and claims[0].verdict == "supported"
    assert claims[0].evidence == "The Eiffel Tower is 330 metres tall."
    failed = [c for c in claims if c.verdict != "supported"]
    spans = {(p.start, p.end) for p in sentences(INVENTED)[1:]}
    assert len(failed) == 2 and {c.answer_span for c in failed} == spans  # each named on its own sentence
    assert [c.claim_no for c in claims] == [1, 2, 3]
    assert run.result.faithfulness == pytest.approx(1 / 3)  # over the claims checked


def test_a_run_streamed_with_slots_to_spare_decomposes_only_its_failing_sentence(fake, settings, kb_db):
    """Each sentence is verified as it is written; the one no passage supports, alone, has its claims extracted."""
    # the first sentence is not verbatim in a chunk (which would make it one claim without extraction even in atomic)
    answer = "The RAG authors searched the index with FAISS [1]. It was first described in 1975 by Zorblax [1]."
    fake.enqueue(answer, model="llama3.2", match=lambda body: not body.get("format"))
    four = lean(settings, ollama_slots_per_host=4, max_retries=0, on_topic_check=False)
    result = list(VerifiedQueryEngine(settings=four, db=kb_db).stream("Who searched the RAG index with FAISS?"))[-1]
    result = result.result
    asked = [
        r["body"]["messages"][-1]["content"].split("Answer:\n")[1]
        for r in fake.requests
        if "claims" in (((r["body"] or {}).get("format") or {}).get("properties") or {})
    ]
    assert asked == ["It was first described in 1975 by Zorblax [1]."]
    claims = result.attempts[0].claims
    assert claims[0].text == "The RAG authors searched the index with FAISS." and claims[0].verdict == "supported"
    assert claims[0].passage is not None and "FAISS" in claims[0].evidence
    assert [c.verdict for c in claims[1:]] and all(c.verdict != "supported" for c in claims[1:])


def document(*texts: str) -> str:
    """A verifier document as the context block lays the passages out (numbered 1, 2, ... in rank order)."""
    return context_block([Passage(n, n, f"context {n}", text, 0.0) for n, text in enumerate(texts, start=1)])


def cited_document(answer_passages: list[str], *numbers: int) -> str:
    """The document of the passages numbered `numbers`, keeping their numbers."""
    return context_block(
        [Passage(n, n, f"context {n}", t, 0.0) for n, t in enumerate(answer_passages, start=1) if n in numbers]
    )


@pytest.mark.parametrize("slots, shared", [(1, True), (4, False)])
def test_one_slot_orders_the_verifier_calls_so_that_consecutive_calls_share_a_passage(
    fake, settings, db, slots, shared
):
    """One answer checked at a time on one slot: its sentences are verified together, those citing the same
    passages in a row (one call each, on those passages together), then those left on the whole context (one
    document for all), and then the claims of the sentences that failed there, passage by passage."""
    fake.answer_style = "paraphrase"  # the fake's extraction splits a sentence at ", and "
    answer = (
        "The Eiffel Tower is 330 metres tall [1]. The Golden Gate Bridge opened in 1937 [2]. "
        "It was painted green in 1850, and owls nest in its lifts since 1901 [1]. "
        "Its lifts were made by Zorblax in 1888."
    )
    passages = [TOWER, BRIDGE, WALL]
    checked = lean(settings, ollama_slots_per_host=slots)
    run = check_given(checked, LLM(checked, db), "How tall?", answer, passages, "b", one_at_a_time=True)
    asked = minicheck_asked(fake)
    # sentences: 1, 2 on their cited passage; 3 on its cited passage, then the whole context; 4 (no citation) on the
    # whole context; claims: the two of sentence 3 and sentence 4's one, each on the three passages
    assert len(asked) == 3 + 2 + 3 * 3
    claims_of = [sentence_claim(p.text) for p in sentences(answer)]
    whole = document(*passages)
    on_sentences = [(cited_document(passages, 1), claims_of[0]), (cited_document(passages, 2), claims_of[1])]
    on_sentences += [(cited_document(passages, 1), claims_of[2]), (whole, claims_of[2]), (whole, claims_of[3])]
    assert sorted(asked[:5]) == sorted(on_sentences)
    by_sentence = [doc for doc, _ in groupby(doc for doc, _ in asked[:5])]
    assert (by_sentence == [cited_document(passages, 1), cited_document(passages, 2), whole]) is shared
    if shared:  # a consecutive pair shares its document: the one passage both sentences cite, then the whole context
        assert asked[0] == (cited_document(passages, 1), claims_of[0]) and asked[1][0] == asked[0][0]
        assert asked[3][0] == asked[4][0] == whole
    assert {claim for _, claim in asked[5:]} == {
        "It was painted green in 1850.",
        "Owls nest in its lifts since 1901.",
        "Its lifts were made by Zorblax in 1888.",
    }
    by_claim = [doc for doc, _ in groupby(doc for doc, _ in asked[5:])]
    assert (by_claim == [TOWER, BRIDGE, WALL]) is shared
    claims = run.result.attempts[0].claims
    assert [c.verdict for c in claims] == ["supported", "supported", "unsupported", "unsupported", "unsupported"]
    assert claims[1].passage.text == BRIDGE and claims[1].evidence == "The Golden Gate Bridge opened in 1937."
    assert claims[-1].text == "Its lifts were made by Zorblax in 1888." and claims[-1].claim_no == 5


def test_a_sentence_combining_two_cited_passages_is_supported_in_one_call(fake, settings, db):
    """No single passage holds the sentence; the two it cites, read together, do: one verifier call, no extraction."""
    answer = "The Eiffel Tower is 330 metres tall and the Golden Gate Bridge opened in 1937 [1][2]."
    passages = [TOWER, BRIDGE, WALL]
    checked = lean(settings)
    run = check_given(checked, LLM(checked, db), "How tall?", answer, passages, "b")
    assert minicheck_asked(fake) == [(cited_document(passages, 1, 2), sentence_claim(answer))]
    assert extractions(run) == []
    (claim,) = run.result.attempts[0].claims
    assert claim.verdict == "supported" and claim.passage.n in (1, 2) and claim.evidence in (TOWER + BRIDGE)


def test_a_sentence_false_on_its_cited_passages_goes_to_the_whole_context_before_any_decomposition(fake, settings, db):
    """Miscited: its cited passage does not support it, another does; the whole context is asked next, and the
    sentence stands supported, its evidence in the passage that holds it, without an extraction call."""
    answer = "The Golden Gate Bridge opened in 1937 [1]."
    passages = [TOWER, BRIDGE, WALL]
    checked = lean(settings)
    run = check_given(checked, LLM(checked, db), "When?", answer, passages, "b")
    claim_text = sentence_claim(answer)
    assert minicheck_asked(fake) == [(cited_document(passages, 1), claim_text), (document(*passages), claim_text)]
    assert extractions(run) == []
    (claim,) = run.result.attempts[0].claims
    assert claim.verdict == "supported" and claim.passage.n == 2
    assert claim.evidence == "The Golden Gate Bridge opened in 1937."


def test_runs_at_different_granularities_are_never_each_others_baseline(db):
    from test_regression import store_run

    from pipeline.evaluation.regression import baseline_of
    from store import evals
    from store.alerts import pin_baseline

    values = {"faithfulness": [0.9, 0.8, 1.0, 0.7, 0.9]}
    old = store_run(db, "old", values, config={"top_k": 5})  # recorded before the setting: atomic claims
    auto = store_run(db, "auto", values, config={"top_k": 5, "claim_granularity": "auto"})
    atomic = store_run(db, "atomic", values, config={"top_k": 5, "claim_granularity": "atomic"})
    store_run(db, "auto2", values, config={"top_k": 5, "claim_granularity": "auto"})
    baseline = {name: baseline_of(db, evals.get_eval_run(db, name)) for name in ("auto", "atomic", "auto2")}
    assert baseline == {"auto": None, "atomic": old, "auto2": auto}
    pin_baseline(db, "golden.jsonl", atomic)  # a pinned run at another granularity is no baseline either
    assert baseline_of(db, evals.get_eval_run(db, "auto2")) == auto
    assert baseline_of(db, evals.get_eval_run(db, "old")) == atomic


# --------------------------------------------------------------------------- the oracle comparison

SAMPLE_EVERY = 4  # every 4th record of each RAGTruth development set: 316 answers, 146 of them labelled


def _ragtruth_sample() -> list[dict]:
    names = ("ragtruth_qa_dev.jsonl", "ragtruth_summary_dev.jsonl", "ragtruth_data2txt_dev.jsonl")
    if not all((DATASETS / n).exists() for n in names):
        pytest.skip(f"the RAGTruth development sets are not in {DATASETS}")
    rows = []
    for name in names:
        lines = (DATASETS / name).read_text().splitlines()
        rows += [json.loads(line) for line in lines[::SAMPLE_EVERY]]
    return rows


def _failing(run) -> list:
    return [c for c in run.result.attempts[0].claims if c.verdict not in ("supported", "extraction_error")]


def _where_said(claim, answer: str, parts) -> set:
    """The answer sentences the claim's text overlaps where it stands in the answer (the oracle's own reading),
    whichever sentence placement put it on."""
    said = oracle_verifier.located(claim.text, answer)
    return {(p.start, p.end) for p in parts if said and p.start < said[1] and said[0] < p.end}


@pytest.fixture
def oracle():
    oracle_verifier.register()
    yield oracle_verifier
    oracle_verifier.unregister()


def test_the_oracle_says_no_exactly_where_a_label_lies(oracle):
    answer = "The tower is 330 metres tall. It was painted green in 1850."
    with oracle.reading(answer, [{"start": 30, "end": 40}]):
        verifier = oracle.OracleVerifier(None, None)
        from pipeline.verification.claims import Passage

        passages = [Passage(1, -1, "c", "anything", 0.0)]
        assert verifier.verify(1, "The tower is 330 metres tall.", passages).verdict == "supported"
        assert verifier.verify(2, "It was painted green in 1850.", passages).verdict == "unsupported"
        assert verifier.verify(3, "Something else entirely.", passages).verdict == "undecided"


@pytest.mark.slow
def test_auto_and_atomic_flag_the_same_ragtruth_answers_in_the_same_sentences(fake, settings, db, oracle):
    """With a verifier that says No exactly on RAGTruth's labelled spans, sentences first (auto) must flag the same
    answers as atomic claims do, and every failing claim must lie in the same answer sentence; claims are extracted
    by the fake Ollama.

    Atomic's claim is taken where its text stands in the answer: twice in this sample, placement put atomic's claim on
    another sentence than the one it came from (ragtruth-15275-5: the heading "Potential Energy:" is contained in the
    claim "Elastic potential energy: ..." of the next line; ragtruth-15800-2: the fake's splitter joins two sentences
    at '."', and the joined claim went on the first), while auto checks each sentence where it stands."""
    rows = _ragtruth_sample()
    base = lean(settings, verifier_chain="oracle")
    differences, flagged, extracted = [], 0, {"auto": 0, "atomic": 0}
    for row in rows:
        outcome, parts = {}, sentences(row["answer"])
        with oracle.reading(row["answer"], row["spans"]):
            for granularity in ("auto", "atomic"):
                checked = dataclasses.replace(base, claim_granularity=granularity)
                run = check_given(checked, LLM(checked, db), row["question"], row["answer"], [row["context"]], "r")
                extracted[granularity] += len(extractions(run))
                outcome[granularity] = _failing(run)
        auto = {c.answer_span for c in outcome["auto"]}
        atomic = [_where_said(c, row["answer"], parts) for c in outcome["atomic"]]
        flagged += bool(atomic)
        same = bool(auto) == bool(atomic) and all(where & auto for where in atomic)
        if not (same and auto <= set().union(*atomic)):
            differences.append((row["id"], sorted(auto), atomic))
    assert len(rows) >= 300 and flagged >= 60
    assert differences == []
    assert extracted["auto"] < extracted["atomic"] / 2  # only the answers with a failing sentence are split


def test_every_faithfulness_figure_says_which_claims_it_counts(fake, settings, kb_db):
    """The CLI's answer and its show command, and Compare, which does not compare faithfulness across granularities."""
    from rich.console import Console

    from pipeline.cli.ask import print_result
    from pipeline.evaluation.compare_runs import GRANULARITY_DIFFERS, Side, _not_comparable
    from store import evals

    sentence = dataclasses.replace(settings, claim_granularity="sentence", max_retries=0)
    result = list(VerifiedQueryEngine(settings=sentence, db=kb_db).stream("Who searched the RAG index?"))[-1]
    out = Console(record=True, width=200)
    print_result(result.result, out)
    assert "(claims: sentence)" in out.export_text()

    def side(granularity):
        config = {} if granularity is None else {"claim_granularity": granularity}
        return Side(evals.EvalRun(1, "e", "golden.jsonl", "finished", config, "llama3.2", "d", "v1", 3, 1.0), "h")

    assert side("auto").claims == "claims: auto" and side(None).claims == "claims: atomic"
    assert _not_comparable("faithfulness", side("auto"), side("atomic")) == GRANULARITY_DIFFERS
    assert _not_comparable("faithfulness", side(None), side("atomic")) is None
    assert _not_comparable("context_recall", side("auto"), side("atomic")) is None


def test_on_one_slot_the_classification_waits_until_the_answer_is_decided(fake, settings, kb_db):
    """Whether a rejected claim is contradicted or unsupported changes neither the score nor the repair: on one slot
    its calls come after every call the shown answer waits on (the regeneration included) and after the decision."""
    from test_schedule import RAG_QUESTION, chats

    fake.answer_style = "paraphrase"  # a first answer with invented sentences: rejected claims to classify
    fake.set_latency(0.0, slots=1)
    one = dataclasses.replace(settings, ollama_slots_per_host=1, cache_enabled=False, repair="regenerate")
    events = list(VerifiedQueryEngine(settings=one, db=kb_db).stream(RAG_QUESTION))
    kinds = [e.kind for e in events]
    classified, generations = chats(fake, "verdict"), chats(fake)
    checks = [r for r in fake.requests if (r["model"] or "").startswith("bespoke-minicheck")]
    assert classified and len(generations) >= 2  # claims to classify, and a regeneration
    assert min(r["received"] for r in classified) >= max(r["done"] for r in generations + checks)
    assert "verdict" in kinds and kinds.index("decide") < kinds.index("verdict") < kinds.index("final")
