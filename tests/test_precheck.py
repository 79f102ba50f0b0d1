"""The deterministic grounding pre-check on crafted claims, and its precision on the development set."""

import json
from pathlib import Path

import pytest

from pipeline.verification.precheck import DECISIVE, entities, numbers, precheck, signals

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
        ("Dropout was 10%.", ["10%"]),
    ],
)
def test_a_missing_number_or_acronym_decides(claim, missing):
    result = precheck(claim, CONTEXT)
    assert result.verdict == "unsupported" and result.missing == missing
    assert result.reason.startswith(f"'{missing[0]}'") and "in no retrieved source" in result.reason


@pytest.mark.parametrize(
    "claim, hinted",
    [
        ("RAG appeared in 2019 at NeurIPS.", ["2019"]),
        ("Sebastian Riedel and Douwe Kiela wrote it.", ["Sebastian Riedel", "Douwe Kiela"]),
    ],
)
def test_a_missing_year_or_name_is_a_hint_not_a_verdict(claim, hinted):
    """Years and names fell below 0.90 precision on a style they were not chosen on (bench/precheck_cv.py): the
    claim goes on to the next verifier, with what is missing in the reason."""
    result = precheck(claim, CONTEXT)
    assert result.verdict is None and [h.token for h in result.hints] == hinted
    assert result.reason.startswith(f"'{hinted[0]}'") and "in no retrieved source" in result.reason
    assert precheck(claim, CONTEXT, decisive=DECISIVE | {"year", "name"}).verdict == "unsupported"


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
    assert len(flagged) >= 10  # numbers and acronyms decide; names and years are hints for the model
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
    assert [h.token for h in precheck(claim, STEPS_CONTEXT).hints] == ["Allrecipes"]
    assert precheck(claim, STEPS_CONTEXT, question="how to bake ribs allrecipes").hints == []


def test_a_claim_made_mostly_of_new_content_is_a_hint():
    claim = "Marinate overnight in buttermilk, garlic, paprika and brown sugar before smoking over hickory wood."
    result = precheck(claim, STEPS_CONTEXT)
    assert result.verdict is None and "content words" in result.reason
    assert [h.kind for h in result.hints] == ["novel"] and "buttermilk" in result.hints[0].token
    # a paraphrase that reuses the sources' words raises nothing
    assert precheck("Bake the seasoned ribs in a preheated oven for two hours.", STEPS_CONTEXT).hints == []
    # a short claim is never judged by its vocabulary alone
    assert precheck("Use hickory wood.", STEPS_CONTEXT).hints == []
    # the thresholds are settings
    assert precheck(claim, STEPS_CONTEXT, novel_words_min=50).hints == []


def test_units_and_converted_values_are_not_missing_names_or_numbers():
    context = "Tallahassee has an average high of 79 degrees and a low of 56 degrees."
    assert precheck("The average high is 79 degrees Fahrenheit (26 degrees Celsius).", context).verdict is None
    result = precheck("The average high is 95 degrees Fahrenheit.", context)
    assert result.verdict == "unsupported" and result.missing == ["95"]


def test_small_numbers_written_as_words_in_the_sources_are_found():
    assert precheck("Try again after 10 or 20 years.", "Wait ten or twenty years before trying.").verdict is None


def _rows(name):
    path = Path(__file__).resolve().parents[2] / "shared" / "datasets" / name
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", ["ragtruth_qa_dev.jsonl", "ragtruth_summary_dev.jsonl", "ragtruth_data2txt_dev.jsonl"])
@pytest.mark.slow
def test_decisive_flags_hold_on_real_prose(name):
    """The issue's target on each RAGTruth development set with the answer's own sentences as claims: the
    pre-check's own verdicts hold precision >= 0.90 (whole set; bench/precheck_cv.py holds each style out)."""
    from pipeline.detector.bench import answer_claims

    rows = _rows(name)
    flagged = [
        r
        for r in rows
        if any(precheck(c, r["context"], r["question"]).verdict == "unsupported" for c in answer_claims(r["answer"]))
    ]
    truly = sum(r["label"] for r in flagged)
    assert len(flagged) >= 10 and truly / len(flagged) >= 0.9


# One test per cause of false positives seen on other answers (issue 25), each from the general rule.

PARK = (
    "The visitor centre opens at 9:0 and closes at 17:30. Entry costs 12 dollars. "
    '{"OutdoorSeating": true, "RestaurantsTakeOut": false, "WiFi": "free"} '
    "Rangers from Norway and Pakistan lead tours of the caves in California."
)


def test_numbers_and_names_from_the_question_are_known():
    question = "does form 8843 go with my 1040 for the park permit"
    claim = "Yes, file form 8843 together with your 1040."
    assert {s.token for s in signals(claim, PARK)[1]} >= {"8843", "1040"}
    assert signals(claim, PARK, question)[1] == []


@pytest.mark.parametrize(
    "hedge",
    [
        "It is not possible to give a complete answer from the passages.",
        "Therefore, I cannot provide a full schedule based on the given passages.",
        "Without more information, the exact fee cannot be determined.",
        "None of the passages mention winter opening times in 2031.",
        "The passages mainly focus on the caves of Idaho.",
    ],
)
def test_meta_statements_and_hedges_about_the_sources_are_not_claims(hedge):
    from pipeline.detector.bench import answer_claims
    from pipeline.text import is_meta_statement

    assert is_meta_statement(hedge) and answer_claims(hedge) == []
    assert signals(hedge, PARK) == (False, [])


def test_generic_advice_is_not_judged_by_its_vocabulary():
    advice = "It is always a good idea to consult a qualified physician before starting any strenuous hike."
    assert precheck(advice, PARK).hints == []
    novel = "Strenuous hikes demand qualified physicians, hydration packs and sturdy boots before starting."
    assert [h.kind for h in precheck(novel, PARK).hints] == ["novel"]


@pytest.mark.parametrize(
    "claim",
    [
        "Option 2 costs more than Option 1.",
        "Step 4: pay at the visitor centre.",
        "Choose Method B if the caves are closed.",
    ],
)
def test_the_answers_own_labels_are_not_numbers_or_names(claim):
    assert signals(claim, PARK)[1] == []


@pytest.mark.parametrize(
    "claim, missing",
    [
        ("The visitor centre opens at 9 AM and closes at 5:30 PM.", []),
        ("It closes at 5:30 p.m. every day.", []),
        ("It opens at 9:00 and closes at 17:30.", []),
        ("It closes at 6 PM.", ["6 PM"]),
        ("It opens at 10 AM.", ["10 AM"]),
    ],
)
def test_times_in_another_notation_are_compared_as_times(claim, missing):
    result = precheck(claim, PARK)
    assert result.missing == missing and (result.verdict == "unsupported") == bool(missing)
    assert "AM" not in entities(claim) and "PM" not in entities(claim)
    # the hour of "5 PM" is no number of its own to look for
    assert signals("It opens at 5 PM and closes at 10 PM.", "Open 17:0-22:0.")[1] == []


def test_units_and_field_names_in_another_notation():
    assert signals("The loop trail takes 1.5 hours.", "The loop trail takes 90 minutes.")[1] == []
    assert signals("Cyclists ride it at 12 MPH.", "Cyclists ride it at 12 miles per hour.")[1] == []
    assert signals("Guests get Wi-Fi.", "Guests get free wifi.")[1] == []
    # JSON field names are words: "OutdoorSeating" says outdoor seating; "WiFi" is Wi-Fi
    assert signals("Outdoor seating is there.", PARK, novel_share=0.01, novel_words_min=1)[1] == []
    assert signals("It offers free Wi-Fi.", PARK)[1] == []


@pytest.mark.parametrize(
    "claim, question",
    [
        ("The US has more national parks than Norway.", "best parks in the usa"),
        ("Tours run in the United States and in Britain.", "tours in the usa and the uk"),
        ("The caves are in CA.", ""),
        ("Norwegian and Pakistani rangers lead the tours.", ""),
    ],
)
def test_acronym_country_and_demonym_forms_of_a_known_name(claim, question):
    assert signals(claim, PARK, question)[1] == []
    assert [s.token for s in signals("The caves are in TX.", PARK)[1]] == ["TX"]


def _chain(settings, *later):
    """The pre-check as configured, followed by `later` stub verifiers (no model)."""
    from pipeline.verification.chain import VerifierChain

    chain = VerifierChain(["precheck"], None, settings)
    chain.verifiers += list(later)
    chain.verifiers[0].followed_by = tuple(v.name for v in later)
    return chain


class _Stub:
    name = "stub"
    followed_by = ()

    def __init__(self, verdict):
        self.verdict, self.asked = verdict, []

    def verify_many(self, items, passages, question=""):
        from pipeline.verification.claims import CheckedClaim

        self.asked += [claim for _, claim, _ in items]
        return [CheckedClaim(n, claim, self.verdict, "stub", reason="the stub decided") for n, claim, _ in items]


def test_a_hint_passes_the_claim_on_and_a_reliable_signal_decides(settings):
    from pipeline.verification.claims import Passage

    passages = [Passage(1, 1, "park.txt", PARK, 0.0)]
    stub = _Stub("supported")
    chain = _chain(settings, stub)
    checked, _ = chain.verify(1, "Sebastian Riedel leads the tours.", passages)  # a name: a hint
    assert (checked.verdict, checked.verifier) == ("supported", "stub") and stub.asked
    assert "'Sebastian Riedel' appears in no retrieved source" in checked.reason and checked.hint
    stub.asked.clear()
    checked, _ = chain.verify(2, "Entry costs 40 dollars.", passages)  # a number: decisive
    assert (checked.verdict, checked.verifier) == ("unsupported", "precheck") and not stub.asked
    assert checked.reason == "'40' appears in no retrieved source"


def test_without_a_model_verifier_a_flag_says_it_is_a_heuristic(settings):
    from pipeline.verification.claims import Passage

    passages = [Passage(1, 1, "park.txt", PARK, 0.0)]
    chain = _chain(settings)
    checked, _ = chain.verify(1, "Entry costs 40 dollars.", passages)
    assert checked.verdict == "unsupported"
    assert "flagged by a heuristic (no model verifier in the chain)" in checked.reason
    checked, _ = chain.verify(2, "Sebastian Riedel leads the tours.", passages)
    assert checked.verdict == "unverified" and "'Sebastian Riedel'" in checked.reason
    assert "flagged by a heuristic (no model verifier in the chain)" in checked.reason


def test_a_hint_stays_in_view_when_the_rejected_claim_is_classified(fake, settings, db):
    """The model verifier rejects a hinted claim; the contradicted-or-unsupported step keeps the pre-check's signal."""
    from pipeline.models.llm import LLM
    from pipeline.verification.claims import CheckedClaim, Passage
    from pipeline.verification.faithfulness import FaithfulnessChecker

    passages = [Passage(1, 1, "park.txt", PARK, 0.0)]
    hint = "'Sebastian Riedel' appears in no retrieved source"
    rejected = CheckedClaim(1, "Sebastian Riedel leads the tours.", "unsupported", "minicheck", reason="no", hint=hint)
    classified = FaithfulnessChecker(LLM(settings, db), settings).classify_rejected(rejected, passages)
    assert classified.verdict in ("unsupported", "contradicted")
    assert classified.hint == hint and hint in classified.reason


# -- which signals decide: chosen leave one style out (bench/precheck_cv.py, issue 48) -----------------------


def _answer(label, *kinds, novel=None):
    """A record as bench.precheck_cv holds it: one claim raising `kinds` (and novel-word counts)."""
    return {"label": label, "claims": [(frozenset(kinds), novel)]}


def _style(true_flags, false_flags, kind="number", clean=20):
    return [_answer(1, kind)] * true_flags + [_answer(0, kind)] * false_flags + [_answer(0)] * clean


def test_a_signal_below_the_target_on_a_style_it_was_not_chosen_on_is_a_hint():
    from bench import precheck_cv

    data = {
        "qa": _style(9, 0) + _style(5, 0, "acronym"),
        "summary": _style(8, 0) + _style(4, 0, "acronym"),
        "data2txt": _style(2, 8) + _style(3, 0, "acronym"),  # numbers fail here, where they were not chosen
    }
    folds = [precheck_cv.fold(data, held_out) for held_out in data]
    by_style = {f.held_out: f for f in folds}
    assert "number" in by_style["data2txt"].choice.kinds  # chosen on QA and summaries
    assert by_style["data2txt"].per_signal["number"]["precision"] == 0.2
    assert "number" not in by_style["qa"].choice.kinds  # 10 / 18 on data-to-text, a training style here
    kinds, novel, why = precheck_cv.ship(folds)
    assert kinds == {"acronym"} and novel is None
    assert why["number"] == "hint: below 0.90 held out on data2txt" and why["acronym"] == "decides"
    assert why["year"] == "hint: not chosen when qa, summary, data2txt was held out"  # never flagged: no evidence


def test_the_choice_never_reads_the_held_out_style():
    """Poison the held-out style (every flag there false, new signals raised on faithful answers): the choice
    made on the other two is the same; only the held-out figures move."""
    from bench import precheck_cv

    data = {
        "qa": _style(9, 0) + _style(4, 0, "time"),
        "summary": _style(8, 0) + [_answer(1, novel=(12, 12))] * 3,
        "data2txt": _style(6, 0) + _style(5, 0, "time"),
    }
    for held_out in data:
        before = precheck_cv.fold(data, held_out)
        poisoned = [{**r, "label": 0} for r in data[held_out]] + [_answer(0, *precheck_cv.NAMED_KINDS)] * 50
        after = precheck_cv.fold({**data, held_out: poisoned}, held_out)
        assert after.choice == before.choice, held_out
        assert after.choice_held_out["precision"] == 0.0 and before.choice_held_out["precision"] == 1.0
        assert precheck_cv.select({k: v for k, v in data.items() if k != held_out}) == before.choice


@pytest.fixture(scope="module")
def development_styles():
    from bench import precheck_cv

    missing = [name for name in precheck_cv.STYLES.values() if not (precheck_cv.DATASETS / name).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not in {precheck_cv.DATASETS}")
    return {key: precheck_cv.load(name) for key, name in precheck_cv.STYLES.items()}


@pytest.mark.slow
def test_the_shipped_decisive_signals_are_the_leave_one_style_out_choice(development_styles):
    from bench import precheck_cv

    folds = [precheck_cv.fold(development_styles, held_out) for held_out in development_styles]
    kinds, novel, why = precheck_cv.ship(folds)
    assert kinds == DECISIVE and novel is None, why
    for f in folds:  # every shipped signal was held out on every style and kept its precision there
        assert all(precheck_cv.holds(f.per_signal[kind]) for kind in kinds)
        poisoned = [{**r, "label": 1 - r["label"]} for r in development_styles[f.held_out]]
        assert precheck_cv.fold({**development_styles, f.held_out: poisoned}, f.held_out).choice == f.choice
