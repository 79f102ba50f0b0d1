"""The verifier registry and the configured chain: a verifier is one class registered by name."""

import dataclasses

import pytest
from llama_index.core.evaluation import BaseEvaluator
from test_faithfulness import PASSAGES

from pipeline.answering.engine import run_config
from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.models.llm import LLM
from pipeline.verification.base import Verifier
from pipeline.verification.chain import effective_chain
from pipeline.verification.claims import SUPPORTED, UNDECIDED, UNSUPPORTED, CheckedClaim
from pipeline.verification.faithfulness import FaithfulnessChecker
from pipeline.verification.registry import VERIFIERS, register_verifier, unregister_verifier, verifier_names


class FruitGuard(Verifier):
    """A throwaway verifier: claims about fruit are unsupported, claims saying 'by definition' supported,
    everything else is left to the next verifier."""

    def _verify(self, claim_no, claim, passages):
        if "banana" in claim.lower():
            return CheckedClaim(claim_no, claim, UNSUPPORTED, self.label, reason="no passage is about fruit")
        if "by definition" in claim:
            return CheckedClaim(claim_no, claim, SUPPORTED, self.label, passages[0], None, "true by definition")
        return CheckedClaim(claim_no, claim, UNDECIDED, self.label, reason="not about fruit")


@pytest.fixture
def fruit_guard():
    register_verifier("fruit_guard")(FruitGuard)
    try:
        yield FruitGuard
    finally:
        unregister_verifier("fruit_guard")
    assert "fruit_guard" not in verifier_names()


def test_the_built_in_verifiers_are_registered():
    assert {"precheck", "minicheck_chunk", "minicheck_context", "llm"} <= set(verifier_names())
    assert all(VERIFIERS[name].name == name for name in verifier_names())


def test_a_registered_verifier_runs_in_the_chain_and_hands_on_what_it_leaves_undecided(fake, settings, db, fruit_guard):
    chained = dataclasses.replace(settings, verifier_chain="fruit_guard,minicheck_chunk")
    assert effective_chain(chained) == ["fruit_guard", "minicheck_chunk"]
    checker = FaithfulnessChecker(LLM(chained, db), chained)
    before = len(fake.requests)
    banana, defined, rag = checker.verify_claims(
        [
            "RAG was published with a banana.",
            "A Transformer is a model by definition.",
            "RAG was published at NeurIPS 2020.",
        ],
        PASSAGES,
    )
    assert (defined.verdict, defined.verifier, defined.reason) == (SUPPORTED, "fruit_guard", "true by definition")
    assert (rag.verdict, rag.verifier, rag.passage.n) == (SUPPORTED, "bespoke-minicheck", 2)
    # a rejection goes on to the NLI step, which tells contradicted from unsupported
    assert (banana.verdict, banana.verifier) == (UNSUPPORTED, "fruit_guard + llama3.2")
    assert banana.reason == "the context does not state the claim"
    models = [r["body"]["model"] for r in fake.requests[before:] if r["path"] == "/api/chat"]
    assert models.count("llama3.2") == 1 and models.count("bespoke-minicheck") >= 1


def test_a_chain_in_which_no_verifier_decides_leaves_the_claim_unverified_with_the_reason(
    fake, settings, db, fruit_guard
):
    checker = FaithfulnessChecker(LLM(settings, db), settings, chain=["fruit_guard"])
    claim = checker.verify_claim(1, "RAG was published at NeurIPS 2020.", PASSAGES)
    assert (claim.verdict, claim.verifier, claim.reason) == ("unverified", "fruit_guard", "not about fruit")
    fake.enqueue("I think so", model="bespoke-minicheck", times=2)
    both = FaithfulnessChecker(LLM(settings, db), settings, chain=["fruit_guard", "minicheck_chunk"])
    claim = both.verify_claim(1, "RAG is from 2020.", PASSAGES)
    assert claim.verdict == "unverified" and claim.verifier == "bespoke-minicheck"
    assert claim.reason == (
        "the verifier's replies could not be read as Yes/No: 'I think so' (undecided by fruit_guard, minicheck_chunk)"
    )
    assert FaithfulnessChecker.score([claim]) == (None, "unverified")


def test_the_chain_comes_from_the_setting_and_the_older_settings_still_work():
    settings = load_settings(environ={})
    assert settings.verifier_chain == "precheck,minicheck_chunk" == ",".join(effective_chain(settings))
    custom = load_settings(environ={"WORKBENCH_VERIFIER_CHAIN": " llm , minicheck_context "})
    assert effective_chain(custom) == ["llm", "minicheck_context"]
    legacy = load_settings(environ={"WORKBENCH_PRECHECK_ENABLED": "false", "WORKBENCH_VERIFY_SCOPE": "context"})
    assert effective_chain(legacy) == ["minicheck_context"]
    assert run_config(legacy)["verifier_chain"] == "minicheck_context"
    with pytest.raises(ConfigError):
        load_settings(environ={"WORKBENCH_VERIFIER_CHAIN": " , "})


def test_an_unknown_verifier_in_the_chain_says_which_exist(settings, db):
    wrong = dataclasses.replace(settings, verifier_chain="precheck,minichek")
    with pytest.raises(ConfigError) as caught:
        FaithfulnessChecker(LLM(wrong, db), wrong)
    assert "'minichek'" in caught.value.message and "minicheck_chunk" in caught.value.fix


def test_the_interface_checks_input_and_verdict(settings, db, fruit_guard):
    class Sloppy(Verifier):
        def _verify(self, claim_no, claim, passages):
            return CheckedClaim(claim_no, claim, "probably", self.label)

    guard = fruit_guard(LLM(settings, db), settings)
    with pytest.raises(ValueError):
        guard.verify(1, "  ", PASSAGES)
    no_context = guard.verify(1, "A banana is yellow.", [])
    assert (no_context.verdict, no_context.reason) == (UNSUPPORTED, "there is no passage to check it against")
    with pytest.raises(ValueError, match="'probably'"):
        Sloppy(LLM(settings, db), settings).verify(1, "A claim.", PASSAGES)
    with pytest.raises(ValueError, match="taken"):
        register_verifier("precheck")(Sloppy)
    with pytest.raises(TypeError):
        register_verifier("not_a_class")(lambda: None)


@pytest.mark.slow
def test_the_checker_is_a_llama_index_evaluator(fake, settings, db):
    checker = FaithfulnessChecker(LLM(settings, db), settings)
    assert isinstance(checker, BaseEvaluator) and checker.get_prompts() == {}
    contexts = [p.text for p in PASSAGES]
    good = checker.evaluate("When was RAG published?", "RAG was published at NeurIPS 2020.", contexts)
    assert (good.passing, good.score, good.invalid_result) == (True, 1.0, False)
    assert good.feedback.startswith("supported: RAG was published at NeurIPS 2020.")
    bad = checker.evaluate("q", "RAG was published at ICML 2019. RAG was published at NeurIPS 2020.", contexts)
    assert (bad.passing, bad.score) == (False, 0.5)
    silent = checker.evaluate("q", "Ok.", contexts)  # no claim of three words or more
    assert (silent.passing, silent.score, silent.invalid_result) == (None, None, False)
    fake.enqueue("not json", match=lambda body: "claims" in str(body.get("format")), times=2)
    broken = checker.evaluate("q", "RAG was published at NeurIPS 2020.", contexts)
    assert broken.invalid_result and broken.score is None and "claims could not be extracted" in broken.invalid_reason
