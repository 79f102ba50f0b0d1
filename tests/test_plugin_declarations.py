"""Every part of a run declares the prompts it sends and the settings it reads, and the run records them.

The prompts a run actually used are seen where every prompt is used, `Prompt.messages` (structured calls, the
streamed generation, the instructed Yes/No verifier and the retries all build their messages there), and each
must be in the run's recorded `config["prompts"]` with its version; every model call's system message must come
from such a prompt, so none is sent from a string that no Prompt object (and so no version) stands for.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading

import fake_ollama
import pytest
from test_evaluation import ITEMS, dataset

from pipeline.answering.engine import VerifiedQueryEngine, run_config
from pipeline.declarations import SETTING_NAMES, declared
from pipeline.evaluation import registry
from pipeline.evaluation.judge import judge_pin
from pipeline.evaluation.registry import MetricInput, load_metrics, register_metric
from pipeline.evaluation.runner import run_evaluation
from pipeline.models.llm import LLM
from pipeline.prompt_registry import all_prompts
from pipeline.prompting import Prompt
from pipeline.verification.claims import Passage
from pipeline.verification.registry import load_verifiers, register_verifier, verifier_class
from store import evals
from store.runs import get_run

RAG_QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"
# its second claim holds a number no source has: a decisive pre-check signal (a year or a name would be a hint)
INVENTED = "The RAG index held 21 million passages [1]. The RAG paper won the best paper award with 9173 votes [1]."
DEFAULT_CHAIN = "precheck,minicheck_chunk"
# the default chain, each registered verifier alone, and chains that put the llm verifier before and after others
CHAINS = [DEFAULT_CHAIN, *sorted(load_verifiers()), "precheck,llm", "llm,minicheck_context"]
# the keys every run's configuration has had: comparisons, regression and resumes read them key by key
RUN_KEYS = {
    "generator_model",
    "claim_model",
    "claim_granularity",  # sentences first or atomic claims: faithfulness counts other claims (issue 48)
    "verifier_model",
    "nli_model",
    "embed_model",
    "top_k",
    "chunk_size",
    "chunk_overlap",
    "answer_schedule",
    "context_budget_tokens",
    "faithfulness_threshold",
    "max_retries",
    "repair",
    "abstain_below",
    "when_unverified",
    "temperature",
    "precheck_enabled",
    "precheck_novel_share",
    "precheck_novel_words",
    "verify_scope",
    "llm_backend",
    "model_revision",
    "context_window",
    "retrieval_floor",
    "on_topic_check",
    "on_topic_accept",
    "on_topic_reject",
    "off_topic_final",
    "conversation_history_tokens",
    "verifier_chain",
    "prompts",
}
EVALUATION_KEYS = RUN_KEYS | {"judge_model", "cache_enabled", "metrics", "judge_prompt_versions"}


class Sent:
    """The prompts whose messages were built, and the system messages of the model calls made."""

    def __init__(self):
        self.lock = threading.Lock()
        self.prompts: list[Prompt] = []
        self.built: set[str] = set()
        self.systems: list[str] = []

    def clear(self) -> None:
        with self.lock:
            self.prompts.clear()
            self.systems.clear()

    def unrecorded(self, config: dict) -> list[str]:
        """The used prompts the configuration does not record with their version."""
        recorded = config.get("prompts", {})
        return sorted({f"{p.name} v{p.version}" for p in self.prompts if recorded.get(p.name) != p.version})

    def stray_systems(self) -> list[str]:
        """System messages sent that no Prompt built."""
        return [s[:80] for s in self.systems if s not in self.built]

    def names(self) -> set[str]:
        return {p.name for p in self.prompts}


@pytest.fixture
def sent(monkeypatch):
    seen = Sent()
    build = Prompt.messages

    def messages(self, user, last=""):
        built = build(self, user, last)
        with seen.lock:
            seen.prompts.append(self)
            seen.built.add(built[0]["content"])
        return built

    def watched(call):
        def wrapper(llm, stage, model, messages, *args, **kwargs):
            with seen.lock:
                seen.systems += [m["content"] for m in messages if m.get("role") == "system"]
            return call(llm, stage, model, messages, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(Prompt, "messages", messages)
    monkeypatch.setattr(LLM, "chat", watched(LLM.chat))
    monkeypatch.setattr(LLM, "stream_chat", watched(LLM.stream_chat))
    return seen


@pytest.fixture
def fake(fake):
    """The fake Ollama, answering the llm verifier's Yes/No question to the general model as it answers
    bespoke-minicheck; by default it answers that prompt in prose, which no verifier can read."""
    fake.rules["llm_verifier"] = fake_ollama.rules.yes_no
    return fake


def is_generation(body):
    return not body.get("format")


def answer(kb_db, settings, question):
    events = list(VerifiedQueryEngine(settings=settings, db=kb_db).stream(question))
    return events[-1].result


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.slow
def test_every_prompt_a_question_run_sends_is_recorded_with_its_version(fake, settings, kb_db, sent, chain):
    chained = dataclasses.replace(settings, verifier_chain=chain, retrieval_floor=0.0)
    used = set()
    # an answer with an invented claim (rejected, classified, retried with the strict prompt), then a question
    # the knowledge base does not cover (rewritten, then abstained: no retrieval floor, which would abstain at once)
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    for question in (RAG_QUESTION, "What is the capital city of Peru?"):
        sent.clear()
        result = answer(kb_db, chained, question)
        assert result.status not in ("failed", "running"), result.error
        assert result.config["verifier_chain"] == chain
        assert not sent.unrecorded(result.config), f"{chain}: sent but not recorded: {sent.unrecorded(result.config)}"
        assert not sent.unrecorded(json.loads(get_run(kb_db, result.run_id)["config"]))  # as stored
        assert not sent.stray_systems(), f"{chain}: system messages no Prompt built: {sent.stray_systems()}"
        assert RUN_KEYS <= set(result.config), RUN_KEYS - set(result.config)
        used |= sent.names()
    assert {"grade_context", "generate", "generate_strict", "extract_sentence_claims", "rewrite_query"} <= used
    for name in chain.split(","):  # each verifier's declared prompts were really exercised, so really checked
        assert {p.name for p in verifier_class(name).prompts} <= used, name
    if "llm" in chain.split(","):
        assert "llm_verifier" in used


@pytest.mark.parametrize("chain", [DEFAULT_CHAIN, "llm", "precheck,llm"])
@pytest.mark.slow
def test_every_prompt_an_evaluation_sends_is_recorded_with_its_version(fake, settings, kb_db, sent, chain):
    chained = dataclasses.replace(settings, verifier_chain=chain)
    fake.enqueue(INVENTED, model="llama3.2", match=is_generation)
    outcome = run_evaluation(chained, kb_db, dataset(ITEMS[:1]), f"declared-{chain}", concurrency=1)
    assert outcome.status == "finished" and outcome.progress.failed == 0
    config = evals.get_eval_run(kb_db, f"declared-{chain}").config
    assert not sent.unrecorded(config), f"{chain}: sent but not recorded: {sent.unrecorded(config)}"
    assert not sent.stray_systems(), f"{chain}: system messages no Prompt built: {sent.stray_systems()}"
    assert EVALUATION_KEYS <= set(config), EVALUATION_KEYS - set(config)
    # judge_question_rewrite's rubric is sent only for a rewritten turn of a conversation (test_conversation_eval.py)
    metric_prompts = {p.name for m in load_metrics().values() for p in m.prompts} - {"judge_question_rewrite"}
    assert metric_prompts <= sent.names()  # the judge's rubrics, answer relevancy's, context precision's: all used
    assert config["judge_corrections_k"] == settings.judge_corrections_k
    if "llm" in chain:
        assert config["prompts"]["llm_verifier"] == "1" and "llm_verifier" in sent.names()


def test_a_question_run_records_what_the_parts_of_its_chain_declare(settings):
    default = run_config(settings)
    with_llm = run_config(dataclasses.replace(settings, verifier_chain="precheck,llm"))
    assert set(default) == set(with_llm) == RUN_KEYS  # the same keys whatever the chain: runs compare key by key
    assert "llm_verifier" not in default["prompts"] and with_llm["prompts"]["llm_verifier"] == "1"
    assert {k: v for k, v in with_llm["prompts"].items() if k != "llm_verifier"} == default["prompts"]
    assert default["prompts"] == {  # the versions stored runs carry (issue 30: the grade names the chunks it keeps,
        # the calls on one context share its system text and the context, each with its task after them)
        "standalone_question": "1",
        "grade_context": "3",
        "rewrite_query": "1",
        "generate": "3",
        "generate_strict": "4",
        "extract_sentence_claims": "1",
        "extract_claims_in_context": "1",
        "extract_claims": "1",
        "nli_judge": "2",
        "on_topic": "1",
        "generate_on_topic": "3",
    }


def test_an_evaluation_records_the_prompts_and_options_of_the_metrics_it_measures(settings):
    some = registry.evaluation_config(settings, ["faithfulness", "context_recall"])
    every = registry.evaluation_config(settings, registry.metric_names())
    assert some["prompts"] == run_config(settings)["prompts"]  # neither metric sends a prompt
    assert "judge_prompt_versions" not in some and "judge_corrections_k" not in some
    assert every["prompts"]["judge_grounding"] == "judge-grounding-v1" == every["judge_prompt_versions"]["grounding"]
    assert every["prompts"]["answer_questions"] == every["prompts"]["chunk_relevance"] == "1"
    assert every["judge_corrections_k"] == settings.judge_corrections_k
    gone = registry.evaluation_config(settings, ["faithfulness", "a_metric_no_longer_registered"])
    assert gone["metrics"] == ["faithfulness", "a_metric_no_longer_registered"]


def test_every_registered_plugin_declares_its_prompts_and_options():
    plugins = [(f"verifier {n}", cls.__dict__) for n, cls in load_verifiers().items()]
    plugins += [(f"metric {n}", vars(m)) for n, m in load_metrics().items()]
    for owner, attributes in plugins:
        # set on the plugin itself by its registration, never inherited from another plugin's class
        assert "prompts" in attributes and "options" in attributes, owner
        prompts, options = attributes["prompts"], attributes["options"]
        assert isinstance(prompts, tuple) and all(isinstance(p, Prompt) and p.name and p.version for p in prompts)
        assert isinstance(options, tuple) and all(isinstance(o, str) for o in options), owner
        assert set(options) <= SETTING_NAMES, f"{owner}: {set(options) - SETTING_NAMES} are not settings"
    assert load_verifiers()["llm"].prompts and load_verifiers()["llm"].options == ("nli_model",)


def test_every_prompt_object_in_the_code_is_declared_by_a_part(settings):
    load_verifiers(), load_metrics(), run_config(settings)
    declared_prompts = all_prompts()  # also checks that no two prompts share a name with different versions
    for module in [m for name, m in sorted(sys.modules.items()) if name.startswith("pipeline.")]:
        for attribute, value in vars(module).items():
            if isinstance(value, Prompt):
                assert declared_prompts.get(value.name) == value, f"{module.__name__}.{attribute} is declared by none"


def test_a_declaration_names_prompts_and_settings():
    with pytest.raises(ValueError, match="'nli_modle'"):
        register_verifier("typo", options=("nli_modle",))
    with pytest.raises(TypeError):
        register_verifier("bare_string", options="nli_model")
    with pytest.raises(TypeError):
        register_metric("not_a_prompt", component="generator", prompts=("Answer yes or no.",))
    twins = [Prompt("twin", "1", "a"), Prompt("twin", "2", "b")]
    with pytest.raises(ValueError, match="twin"):
        declared("a plugin", twins, ())


class Reading:
    """Settings that note each setting read through them."""

    def __init__(self, settings):
        self._settings, self.read = settings, set()

    def __getattr__(self, name):
        if name in SETTING_NAMES:
            self.read.add(name)
        return getattr(self._settings, name)


PASSAGES = [
    Passage(1, 10, "/kb/rag.md", "RAG was published at NeurIPS 2020 by Lewis et al. Its index held 21M passages.", 0.9),
    Passage(2, 11, "/kb/bert.md", "BERT was released by Google in 2018.", 0.5),
]


@pytest.mark.parametrize("name", sorted(load_verifiers()))
def test_a_verifier_reads_no_setting_it_does_not_declare(fake, settings, db, name):
    reading = Reading(settings)
    verifier = verifier_class(name)(LLM(settings, db), reading)
    for claim in ("RAG was published at NeurIPS 2020.", "RAG was published by Meta in 2019.", "RAG is widely used."):
        verifier.verify(1, claim, PASSAGES, "When was RAG published?")
    assert reading.read <= set(verifier.options), f"{name} reads {reading.read - set(verifier.options)} undeclared"


def test_a_metric_reads_no_setting_it_does_not_declare(fake, settings, kb_db):
    result = answer(kb_db, settings, RAG_QUESTION)
    llm = LLM(settings, kb_db)
    pin = judge_pin(llm, settings)
    for name, metric in load_metrics().items():
        reading = Reading(settings)
        metric.measure(MetricInput(llm, reading, ITEMS[0], result, pin))
        assert reading.read <= set(metric.options), f"{name} reads {reading.read - set(metric.options)} undeclared"


def test_a_resume_compares_the_prompts_both_configurations_record(settings):
    now = registry.evaluation_config(settings, registry.metric_names())
    before_metric_prompts = {**now, "prompts": run_config(settings)["prompts"]}  # recorded before they were
    assert registry.config_changes(before_metric_prompts, now) == []
    revised = {**now, "prompts": {**now["prompts"], "chunk_relevance": "2"}}
    assert registry.config_changes(revised, now) == ["prompts"]
    renamed = {k: v for k, v in now["prompts"].items() if k != "generate"} | {"answer": "1"}
    assert registry.config_changes({**now, "prompts": renamed}, now) == ["prompts"]  # not a metric's: compared
    assert registry.config_changes({**now, "cache_enabled": not now["cache_enabled"]}, now) == []
