"""Does the answer address the question? The on-topic check of every attempt, after its verification.

A faithful answer can talk past the question; faithfulness alone accepts it. The check:

1. a cheap signal with no generation call: the cosine similarity between the question (embedded as a
   query, normally a cache hit left by retrieval) and the answer's closest sentence (the sentences
   embedded as documents in one call), on the embedding model's calibrated scale (0: a typical unrelated
   pair; pipeline/knowledge/similarity_scale.py). At or above `on_topic_accept` the answer is on target, below
   `on_topic_reject` off target: no model call;
2. between the two (unsure), one short structured model call (prompts.ON_TOPIC) decides and says what the
   answer leaves out; an unreadable reply leaves the check undecided, with its reason, never guessed.

The question's content words that the answer never mentions (`missing`) go into the retry prompt of an
off-target answer. The thresholds are measured by `python -m bench on_topic` (golden answers against
answers swapped between questions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipeline.answering import prompts
from pipeline.config import Settings
from pipeline.knowledge.similarity_scale import SimilarityScale
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.text import content_words, sentences, strip_references
from pipeline.verification.precheck import stem, stems
from store.records import AttemptRecord

EMBEDDING, MODEL = "embedding", "model"
# Words a question asks with that an answer has no reason to repeat ("how many", "what kind of").
ASKING_WORDS = frozenset("many much long often kind type sort exactly main name named list describe explain".split())


@dataclass
class TopicCheck:
    on_topic: bool | None  # None: undecided (no sentence to compare, or the model's reply unreadable; see reason)
    score: float | None  # the similarity of the question and the answer's closest sentence (calibrated scale)
    method: str  # embedding (the cheap signal decided) | model (it was unsure and the model decided)
    reason: str
    missing: list[str] = field(default_factory=list)  # question content words the answer does not mention
    gap: str = ""  # what the model said the answer leaves out (method model, off target)


def missing_terms(question: str, answer: str) -> list[str]:
    """The question's content words that the answer never uses (compared by stem), in question order."""
    present = stems(answer)
    words = dict.fromkeys(w for token in question.split() for w in sorted(content_words(token)))
    return [w for w in words if w not in ASKING_WORDS and stem(w) not in present]


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences and list items without citations, headings left out when others remain."""
    found = [s for s in sentences(answer) if strip_references(s.text)]
    body = [s for s in found if s.kind != "heading"] or found
    return [strip_references(s.text) for s in body]


def similarity(llm: LLM, question: str, answer: str) -> float | None:
    """Cosine similarity of the question and the answer's closest sentence; None for an answer with no text."""
    texts = answer_sentences(answer)
    if not texts:
        return None
    return float(np.max(cosines(llm.embed_query(question), llm.embed_documents(texts, cached=True))))


def cosines(vector: list[float], others: list[list[float]]) -> np.ndarray:
    """Cosine similarity of one vector with each of the others (a zero vector has similarity 0)."""
    matrix = np.asarray(others, dtype=np.float64)
    target = np.asarray(vector, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(target)
    return np.divide(matrix @ target, norms, out=np.zeros(len(matrix)), where=norms > 0)


def check(llm: LLM, settings: Settings, question: str, answer: str, scale: SimilarityScale | None = None) -> TopicCheck:
    """Whether the answer addresses the question: the cheap signal when it is sure, else one model call. The
    thresholds are on the embedding model's calibrated scale (`scale`, pipeline/knowledge/similarity_scale.py);
    without one the raw cosine is compared with them."""
    missing = missing_terms(question, answer)
    raw = similarity(llm, question, answer)
    if raw is None:
        return TopicCheck(None, None, EMBEDDING, "undecided: the answer has no sentence to compare", missing)
    score = scale.relative(raw) if scale is not None else raw
    accept, reject = settings.on_topic_accept, settings.on_topic_reject
    note = _scale_note(raw, scale)
    if score >= accept:
        return TopicCheck(
            True, score, EMBEDDING, f"similarity {score:.2f} ≥ {accept:.2f}, the on-topic threshold{note}", missing
        )
    if score < reject:
        reason = f"similarity {score:.2f} < {reject:.2f}, the off-topic threshold{note}" + _missing_text(missing)
        return TopicCheck(False, score, EMBEDDING, reason, missing)
    return _ask_model(llm, settings, question, answer, score, missing, note)


def _scale_note(raw: float, scale: SimilarityScale | None) -> str:
    """What follows a calibrated similarity: the raw cosine and the unrelated median, e.g. " (cosine 0.65;
    unrelated pairs' median 0.49)"; with an unmeasured scale, why the cosine is read raw; nothing without one."""
    if scale is None:
        return ""
    if not scale.measured:
        return f" ({scale.raw_note()})"
    return f" (cosine {raw:.2f}; {scale.raw_note()})"


def _ask_model(
    llm: LLM, settings: Settings, question: str, answer: str, score: float, missing: list[str], note: str = ""
):
    unsure = (
        f"similarity {score:.2f} is between {settings.on_topic_reject:.2f} and {settings.on_topic_accept:.2f}{note}"
    )
    reply = ask(
        llm,
        "on_topic",
        settings.generator_model,
        prompts.ON_TOPIC,
        prompts.on_topic_input(question, answer),
    )
    if reply.value is None:
        return TopicCheck(None, score, MODEL, f"{unsure}; the model's verdict is unreadable: {reply.invalid_reason}")
    if reply.value.addresses:
        return TopicCheck(True, score, MODEL, f"{unsure}; the model says the answer addresses the question", missing)
    gap = " ".join(reply.value.gap.split())
    reason = f"{unsure}; the model says it does not address the question" + (f": {gap}" if gap else "")
    return TopicCheck(False, score, MODEL, reason, missing, gap)


def _missing_text(missing: list[str]) -> str:
    return f"; the answer does not mention {', '.join(missing)}" if missing else ""


def keep(record: AttemptRecord, topic: TopicCheck) -> None:
    """Write the check onto the attempt's record (stored with it)."""
    record.on_topic, record.on_topic_score, record.on_topic_method = topic.on_topic, topic.score, topic.method
    record.on_topic_reason, record.missing_terms = topic.reason, list(topic.missing)


VERDICT_TEXT = {
    True: "addresses the question",
    False: "does not address the question",
    None: "on-topic check undecided",
}


def describe(record: AttemptRecord) -> str | None:
    """One line for the chat, the drilldown and the CLI: the check's verdict, which step decided, and why;
    None when the attempt was not checked."""
    if record.on_topic_method is None:
        return None
    return f"{VERDICT_TEXT[record.on_topic]} — {record.on_topic_method} check: {record.on_topic_reason}"
