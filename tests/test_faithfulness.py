"""The three steps of the faithfulness check, on crafted inputs."""

import dataclasses
import json
import threading

import pytest

from pages.views.markup import annotated_markdown, escape_markdown
from pipeline.history.present import annotate
from pipeline.models.llm import LLM
from pipeline.text import best_sentence, cited_numbers, content_words, find_span, sentences, strip_citations
from pipeline.verification.faithfulness import CheckedClaim, FaithfulnessChecker, Passage, locate_quote, parse_yes_no

PASSAGES = [
    Passage(
        1,
        10,
        "/kb/transformer.md",
        "The Transformer was introduced in 2017. The big model scored 28.4 BLEU on WMT 2014 English-German.",
        0.9,
    ),
    Passage(2, 11, "/kb/rag.md", "RAG was published at NeurIPS 2020 by Lewis et al.", 0.7),
]


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("Yes", True),
        ("yes.", True),
        (" No", False),
        ("No, the document says 2018.", False),
        ("**Yes**", True),
        ("eyes", None),
        ("Nope", None),
        ("", None),
        ("Maybe yes", None),
    ],
)
def test_verifier_reply_is_read_from_its_first_word_not_by_substring(reply, expected):
    assert parse_yes_no(reply) is expected


def test_score_keeps_no_claims_and_unverified_apart_from_zero():
    assert FaithfulnessChecker.score([]) == (None, "no_claims")
    unverified = CheckedClaim(1, "x", "unverified", "m")
    assert FaithfulnessChecker.score([unverified]) == (None, "unverified")
    claims = [
        CheckedClaim(1, "a", "supported", "m"),
        CheckedClaim(2, "b", "contradicted", "m"),
        CheckedClaim(3, "c", "unsupported", "m"),
        CheckedClaim(4, "d", "supported", "m"),
        unverified,
    ]
    assert FaithfulnessChecker.score(claims) == (0.5, "verified")


def test_each_claim_is_checked_against_the_passage_that_supports_it(settings, db):
    checker = FaithfulnessChecker(LLM(settings, db), settings)
    checked = checker.verify_claims(
        ["RAG was published at NeurIPS 2020.", "The big Transformer scored 28.4 BLEU on WMT 2014 English-German."],
        PASSAGES,
    )
    assert [c.verdict for c in checked] == ["supported", "supported"]
    assert [c.passage.n for c in checked] == [2, 1]
    assert checked[1].evidence == "The big model scored 28.4 BLEU on WMT 2014 English-German."


def test_an_unreadable_verifier_reply_leaves_the_claim_unverified(fake, settings, db):
    fake.enqueue("I think so", model="bespoke-minicheck", times=2)
    claim = FaithfulnessChecker(LLM(settings, db), settings).verify_claim(1, "RAG is from 2020.", PASSAGES)
    assert claim.verdict == "unverified" and "'I think so'" in claim.reason


def test_claims_are_verified_concurrently(fake, settings, db):
    one = [Passage(1, 1, "a.md", "Cats sleep in boxes 0 1 2 3 4 5 6 7.", 1.0)]
    claims = [f"Cats sleep in boxes {n}." for n in range(8)]

    def claims_asked(f) -> set[str]:
        """The claims the verifier has been asked about so far."""
        bodies = [json.dumps(r["body"]) for r in list(f.requests) if r["path"] == "/api/chat"]
        return {c for c in claims if any(c in b for b in bodies)}

    model_only = dataclasses.replace(settings, precheck_enabled=False)
    limit = settings.verify_concurrency
    checked = []
    with fake.hold() as gate:  # no verdict leaves the fake until the test has seen how many checks wait on it
        verifying = threading.Thread(
            target=lambda: checked.extend(
                FaithfulnessChecker(LLM(model_only, db), model_only).verify_claims(claims, one)
            )
        )
        verifying.start()
        reached = fake.wait_until(lambda f: gate.waiting >= limit and len(claims_asked(f)) >= limit)
        # a grace period for a check beyond the limit to show up: it never fails a correct pool, and a pool wider
        # than the setting has its extra thread's request here long before it ends
        beyond = fake.wait_until(lambda f: gate.waiting > limit, timeout_s=0.5)
        held, asked = gate.waiting, len(claims_asked(fake))
    verifying.join()
    assert reached and not beyond and held == asked == limit == 4  # `limit` different claims at once, no more
    assert [(c.claim_no, c.verdict) for c in checked] == [(n, "supported") for n in range(1, 9)]
    assert len([r for r in fake.requests if r["path"] == "/api/chat"]) == 8
    assert gate.timed_out == 0 and fake.max_in_flight == limit  # and never more than the setting allows


def test_quote_is_located_ignoring_case_and_spacing():
    passage, span = locate_quote("the big model  scored 28.4 bleu", PASSAGES)
    assert passage.n == 1 and PASSAGES[0].text[span[0] : span[1]] == "The big model scored 28.4 BLEU"
    assert locate_quote("scored 99 BLEU", PASSAGES) == (None, None)
    assert find_span("abc", "  ") is None


def test_text_helpers():
    assert content_words("It has 1,000 heads and 28.4 BLEU") == {"1000", "head", "28.4", "bleu"}
    text = "BERT came in 2018 [1]. It has 340 million parameters [2, 3]! (Base is smaller.)"
    assert [s.text for s in sentences(text)] == [
        "BERT came in 2018 [1].",
        "It has 340 million parameters [2, 3]!",
        "(Base is smaller.)",
    ]
    assert all(text[s.start : s.end] == s.text for s in sentences(text))
    assert strip_citations(text).startswith("BERT came in 2018.")
    assert cited_numbers(text) == {1, 2, 3}
    assert best_sentence(text, "BERT parameters 340 million").text.startswith("It has 340")


def test_claims_are_placed_on_the_sentence_they_came_from():
    answer = "The Transformer appeared in 2017 [1]. RAG won an award at ICML 2019 [2]."
    claims = [
        CheckedClaim(1, "The Transformer appeared in 2017.", "supported", "m"),
        CheckedClaim(2, "RAG won an award at ICML 2019.", "unsupported", "m"),
    ]
    segments = annotate(answer, claims)
    assert [(s.verdict, s.claim_nos) for s in segments] == [("supported", [1]), ("unsupported", [2])]
    markdown = annotated_markdown(answer, claims)
    assert ":green-background[The Transformer appeared in 2017 \\[1\\]\\.]" in markdown
    assert ":orange-background[RAG won an award at ICML 2019 \\[2\\]\\.]" in markdown


def test_model_output_with_html_and_markdown_is_escaped():
    hostile = "<script>alert('x')</script> **bold** [link](http://evil) $x$ :red[y]"
    escaped = escape_markdown(hostile)
    assert "<" not in escaped.replace("\\<", "") and "[" not in escaped.replace("\\[", "")
    assert "**" not in escaped and "$" not in escaped.replace("\\$", "")
    assert escaped.replace("\\", "").replace("\u200b", "") == hostile.replace("\\", "")  # \u200b: no autolink


def test_a_claim_sharing_one_word_is_not_pinned_on_a_sentence():
    from pipeline.history.present import placement

    answer = "The index holds 21 million passages [1]. Retrieval uses dense vectors [2]."
    claims = [
        CheckedClaim(1, "The index holds 21 million passages.", "supported", "m"),
        CheckedClaim(2, "The index was rebuilt by volunteers every winter.", "unsupported", "m"),
    ]
    placed = placement(answer, claims)
    assert [(s.verdict, s.claim_nos) for s in placed.segments] == [("supported", [1]), (None, [])]
    assert [c.claim_no for c in placed.unplaced] == [2]
    markdown = annotated_markdown(answer, claims)
    # an unsupported claim that is not placed: listed, and no sentence painted green
    assert "green-background" not in markdown
    assert "**Not placed**" in markdown and "claim 2 (unsupported): The index was rebuilt" in markdown


def test_claims_land_on_list_items_and_carry_their_answer_span():
    from pipeline.verification.placement import place_claims

    answer = "To bake bread:\n1. Mix flour and water.\n2. Bake it at 220 degrees for 40 minutes [1]."
    claims = place_claims(
        answer,
        [
            CheckedClaim(1, "Bread is baked at 220 degrees.", "unsupported", "m"),
            CheckedClaim(2, "Flour and water are mixed.", "supported", "m"),
        ],
    )
    assert answer[claims[0].answer_span[0] : claims[0].answer_span[1]].startswith("Bake it at 220")
    assert answer[claims[1].answer_span[0] : claims[1].answer_span[1]] == "Mix flour and water."
    markdown = annotated_markdown(answer, claims)
    assert ":orange-background[Bake it at 220 degrees" in markdown
    assert ":green-background[Mix flour and water\\.]" in markdown and "Not placed" not in markdown


BIRDS = [
    Passage(1, 1, "/kb/herons.md", "Herons wade in shallow marshes.", 0.5),
    Passage(2, 2, "/kb/ravens.md", "Ravens nest on high cliffs.", 0.5),
    Passage(3, 3, "/kb/swifts.md", "Swifts sleep while flying.", 0.5),
]
# (claim number, claim, the passages its sentence cites): one supported by the passage it cites, two by none
BIRD_CLAIMS = [(1, "Ravens nest on high cliffs.", {2}), (2, "Owls hunt at night.", ()), (3, "Geese fly south.", ())]


def minicheck_asked(fake) -> list[tuple[str, str]]:
    """(document, claim) of each bespoke-minicheck request, in the order the server took them."""
    asked = [
        r for r in fake.requests if r["path"] == "/api/chat" and (r["model"] or "").startswith("bespoke-minicheck")
    ]
    ordered = sorted(asked, key=lambda r: r["started"])
    return [tuple(r["body"]["messages"][-1]["content"].removeprefix("Document: ").split("\nClaim: ")) for r in ordered]


def processed(fake) -> int:
    """Prompt words the server processed: those its prompt cache did not hold."""
    return sum(r.get("prompt_tokens", 0) - r.get("cached_tokens", 0) for r in fake.requests)


def test_claims_verified_together_are_asked_passage_by_passage_with_the_verdicts_of_one_by_one(fake, settings, db):
    """One slot: the claims of a whole answer go to the verifier together, and it asks each passage about every
    claim waiting on it in a row, so the server's prompt cache holds the passage; each claim still makes the calls
    it makes alone (its cited passage first), so the verdicts and the evidence are the same."""
    fake.prompt_cache = True
    fake.set_latency(0.0, slots=1)
    model_only = dataclasses.replace(settings, precheck_enabled=False, cache_enabled=False)
    checker = FaithfulnessChecker(LLM(model_only, db), model_only, classify=False)

    alone = [checker.verify_claim(n, claim, BIRDS, cited=cited) for n, claim, cited in BIRD_CLAIMS]
    asked_alone, processed_alone = minicheck_asked(fake), processed(fake)
    fake.clear()
    fake.set_latency(0.0, slots=1)  # an empty cache
    checker = FaithfulnessChecker(LLM(model_only, db), model_only, classify=False)  # nor the rejections it knows
    together = checker.verify_together(BIRD_CLAIMS, BIRDS)
    asked_together, processed_together = minicheck_asked(fake), processed(fake)

    verdicts = [(c.claim_no, c.verdict, c.passage.n if c.passage else None, c.evidence) for c in together]
    assert verdicts == [(c.claim_no, c.verdict, c.passage.n if c.passage else None, c.evidence) for c in alone]
    assert verdicts[0] == (1, "supported", 2, "Ravens nest on high cliffs.") and verdicts[1][1:3] == (
        "unsupported",
        None,
    )
    assert sorted(asked_together) == sorted(asked_alone) and len(asked_together) == 7  # the same calls
    assert [doc for doc, _ in asked_alone] == [BIRDS[n - 1].text for n in (2, 1, 2, 3, 1, 2, 3)]
    assert [doc for doc, _ in asked_together] == [BIRDS[n - 1].text for n in (1, 1, 2, 2, 2, 3, 3)]
    # the server's prompt cache held the passage for the second claim asked about it: 4 calls of 7 paid only the claim
    assert processed_together < processed_alone
