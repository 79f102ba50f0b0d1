"""What the fake replies to a chat or generate request: the rule for the registered prompt it was built from.

`classify` names what a request is, from what a real server receives (the model's name, the messages, the format):
- sent to a verifier model (bespoke-minicheck): VERIFIER_MODEL, whatever the prompt, as that model answers only
  Yes or No;
- built from a prompt in the pipeline's registry, or the seed pipeline's (prompts.prompt_name): that prompt's name;
- one of Ragas's prompts (ragas.py): RAGAS;
- a plain chat, user messages only and no format (an app's own template, an ad hoc question): PLAIN.
Anything else has no name: a system message or a JSON format that no registered prompt built. `RULES` holds the rule
for each name; a request with no name, or with a name that has no rule, is refused with the reason (`refusal`).

A rule reads an `Asked` (the prompt text, the format's schema and the fake's answer settings) and returns the reply
text.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass

from .brain import (
    answer,
    answer_questions,
    clarify_rubric,
    extract_claims,
    judge_addresses,
    judge_claim,
    judge_relevance,
    judge_rewrite,
    judge_score,
    paraphrase,
    rewrite_query,
    standalone_question,
    verify,
)
from .prompts import first, prompt_name, rule_input
from .ragas import ragas_reply
from .synth import synth_candidate

VERIFIER_MODEL, RAGAS, PLAIN = "verifier model", "ragas", "plain"


@dataclass
class Asked:
    """A chat or generate request as a rule reads it."""

    text: str  # the prompt text the rules read (prompts.rule_input)
    schema: dict  # the request's format when it is a JSON schema, else {}
    style: str = "quote"  # FakeOllama.answer_style
    answer_sentences: int = 2  # FakeOllama.answer_sentences
    first_answer: Callable[[str], bool] = lambda text: False  # whether a paraphrased answer fabricates


def prose(asked):
    """The generator's answer: quoted context sentences, or in the paraphrase style reworded ones (with invented
    sentences the first time a question is answered)."""
    if asked.style == "paraphrase":
        return paraphrase(asked.text, asked.first_answer(asked.text))
    return answer(asked.text, asked.answer_sentences)


def yes_no(asked):
    """MiniCheck's Yes or No for a "Document: ...\\nClaim: ..." input."""
    return verify(asked.text)


def structured(reply):
    """A rule answering `reply(text)`'s object as JSON, fitted to the request's schema."""

    def rule(asked):
        return json.dumps(fit_schema(reply(asked.text), asked.schema))

    rule.__name__ = rule.__qualname__ = f"structured_{reply.__name__}"
    return rule


def claims(asked):
    """The claims of the text under "Answer:"; in the paraphrase style joined sentences are split."""
    return json.dumps(fit_schema(extract_claims(asked.text, split=asked.style == "paraphrase"), asked.schema))


def ragas(asked):
    return json.dumps(ragas_reply(asked.text))


judged = structured(judge_score)
rewrite_judged = structured(judge_rewrite)
relevance = structured(judge_relevance)
synth = structured(synth_candidate)

RULES = {
    VERIFIER_MODEL: yes_no,
    RAGAS: ragas,
    PLAIN: prose,
    # the engine (pipeline/answering/prompts.py)
    "standalone_question": structured(standalone_question),
    "grade_context": relevance,
    "rewrite_query": structured(rewrite_query),
    "generate": prose,
    "generate_strict": prose,
    "generate_on_topic": prose,
    "on_topic": structured(judge_addresses),
    # the faithfulness checker (pipeline/verification/prompts.py)
    "extract_claims": claims,
    "extract_claims_in_context": claims,
    "extract_sentence_claims": claims,
    "nli_judge": structured(judge_claim),
    # the llm verifier's Yes/No question to a general model gets the generator's prose, which no verifier reads (its
    # verdicts are invalid); a test that needs its Yes/No sets fake.rules["llm_verifier"] = rules.yes_no
    "llm_verifier": prose,
    # metrics (pipeline/evaluation/metrics/) and the judge's rubrics (pipeline/evaluation/judge_prompts.py)
    "answer_questions": structured(answer_questions),
    "chunk_relevance": relevance,
    "judge_correctness": judged,
    "judge_helpfulness": judged,
    "judge_faithfulness": judged,
    "judge_grounding": judged,
    "judge_topicality": judged,
    "judge_question_rewrite": rewrite_judged,
    # the seed pipeline the workbench replaced (bench/seed_pipeline.py: prompts.outside)
    # judge alignment's rubric clarification (pipeline/calibration/align_judge.py)
    "align_clarify": structured(clarify_rubric),
    "seed_generate": prose,
    "seed_extract": claims,
    # synth's question writers (pipeline/evaluation/synth/prompts.py)
    "synth_fact": synth,
    "synth_multi_hop": synth,
    "synth_numeric": synth,
    "synth_comparison": synth,
    "synth_negative": synth,
    "synth_false_premise": synth,
}
# the judge's rubric prompts: FakeOllama.judge_noise picks their score
JUDGE_PROMPTS = frozenset(name for name, rule in RULES.items() if rule in (judged, rewrite_judged))


def classify(messages, fmt, verifier_model):
    """The name of what a request is (see the module's doc); None when it is nothing the fake knows."""
    if verifier_model:
        return VERIFIER_MODEL
    name = prompt_name(messages)
    if name:
        return name
    if ragas_reply(rule_input(messages)) is not None:
        return RAGAS
    if first(messages, "system") is None and not fmt:
        return PLAIN
    return None


def refusal(name, messages, rules):
    """Why the fake cannot answer a request named `name` with `rules`; None when it can."""
    if name is None:
        system = first(messages, "system")
        shown = f"its system message begins {system[:60]!r}" if system is not None else "it asks for a JSON format"
        return (
            f"fake Ollama: the request was built from no registered prompt ({shown}): the fake answers the prompts "
            "of pipeline/prompt_registry.py, Ragas's prompts and plain user messages. Declare the prompt, or script "
            "the reply with enqueue()"
        )
    if name not in rules:
        return (
            f"fake Ollama: no rule for the registered prompt {name!r}: add one to RULES in "
            "tests/fake_ollama/rules.py, or script the reply with enqueue()"
        )
    return None


def empty_value(schema, defs):
    """A type-appropriate empty value for a JSON schema."""
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if schema.get("enum"):
        return schema["enum"][0]
    options = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if options:
        return empty_value(next((o for o in options if o.get("type") != "null"), options[0]), defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return fit_schema({}, schema, defs)
    return {"string": "", "integer": 0, "number": 0.0, "boolean": False, "array": [], "null": None}.get(kind, "")


def fit_schema(values, schema, defs=None):
    """Keep only the schema's properties and add missing required ones as empty values."""
    defs = schema.get("$defs", {}) if defs is None else defs
    properties = schema.get("properties") or {}
    out = {k: v for k, v in values.items() if k in properties}
    for key in schema.get("required", []):
        if key not in out:
            out[key] = empty_value(properties.get(key, {}), defs)
    return out
