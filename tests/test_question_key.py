"""One same-question key wherever questions are matched: Unicode NFKC, zero-width and format characters removed,
case and whitespace folded (leave-one-out of the judge's corrections, Compare and imported datasets)."""

from pipeline.evaluation.corrections import relevant_corrections
from pipeline.evaluation.dataset import question_id
from pipeline.evaluation.matching import match_items
from pipeline.text import question_key
from store.annotations import Correction

QUESTION = "How many passages did RAG use?"
ZERO_WIDTH = "How\u200b many pas\u200dsages did RAG\ufeff use?"  # zero-width space, joiner, BOM
FULL_WIDTH = "Ｈｏｗ ｍａｎｙ passages did ＲＡＧ use？"  # full-width letters and question mark
SPACED = "  how   MANY passages,\tdid rag use  "


def test_variants_of_one_question_share_its_key_and_others_do_not():
    assert {question_key(q) for q in (QUESTION, ZERO_WIDTH, FULL_WIDTH, SPACED)} == {"how many passages did rag use"}
    assert question_key("How many passages did BM25 use?") != question_key(QUESTION)


def test_no_variant_of_a_question_is_shown_its_own_correction():
    corrections = [
        Correction(1, "correctness", 10, variant, "x", 1, 4, f"why {n}")
        for n, variant in enumerate([ZERO_WIDTH, FULL_WIDTH])
    ] + [Correction(3, "correctness", 11, "Which constant k did the RRF paper use?", "x", 2, 4, "other")]
    for asked in (QUESTION, ZERO_WIDTH, FULL_WIDTH, SPACED):
        assert [c.id for c in relevant_corrections(corrections, "correctness", asked, k=5)] == [3]


def test_compare_and_imported_files_match_the_variants():
    assert match_items({"a1": QUESTION}, {"b1": FULL_WIDTH, "b2": "Something else?"}) == {"b1": "a1"}
    assert len({question_id(q) for q in (QUESTION, ZERO_WIDTH, FULL_WIDTH, SPACED)}) == 1
