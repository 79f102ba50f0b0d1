"""The quality gates a candidate question passes before it is kept; each says why when it drops one.

- source: a question that names where it comes from ("according to the passage") is not how a user asks. A leading
  clause of that kind is removed (the candidate is kept, rewritten, with a note); anywhere else it is dropped.
- copy: a question that copies its chunk: COPY_RUN_WORDS words in a row from a chunk, or a run of at least
  COPY_MIN_WORDS that makes up COPY_SHARE of the question. Such a question is answered by word matching, not
  understanding, and gives its answer's wording away.
- reference: the reference answer, claim by claim, through the workbench's own verifier (claim extraction and the
  verifier chain) against the candidate's own chunks; one claim it does not support drops the candidate. A paired
  kind's reference must rest on both chunks.
- premise: a false premise that its chunk supports is not false.
- negative: a question meant to be unanswerable is retrieved for as the engine retrieves: kept when the best chunk is
  no closer than unrelated text (the retrieval floor), or when the engine's context grade finds no retrieved passage
  that answers it; dropped when the grade says the knowledge base answers it.
- duplicate: a question as similar to a kept one as a paraphrase, on the embedding model's own scale (see
  question_scale): similarity on that scale at or above the setting synth_duplicate_similarity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from pipeline.answering import prompts as answer_prompts
from pipeline.answering.live import grade_view
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.config import Settings
from pipeline.evaluation.synth.kinds import PAIRED
from pipeline.knowledge.similarity_scale import PROBES, SAMPLE_POINTS, SimilarityScale, floor
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.text import short_source
from pipeline.verification.claims import SUPPORTED, Passage, scored_claims
from pipeline.verification.faithfulness import FaithfulnessChecker, example_text
from pipeline.verification.prompts import EXTRACT_CLAIMS
from store.db import Database

# gate -> what it drops, in the order a candidate meets them (the report lists drops in this order)
GATES = {
    "chunks": "its chunks are no longer in the knowledge base",
    "unreadable": "the model's reply could not be read",
    "source": "names its source",
    "copy": "copies its chunk verbatim",
    "reference": "the verifier does not support its reference",
    "premise": "its false premise is what its chunk says",
    "negative": "a negative the knowledge base answers",
    "duplicate": "a near-duplicate of a kept question",
}


@dataclass(frozen=True)
class Verdict:
    """A gate's outcome: dropped (reason set), or passed, possibly with a note (a rewrite, what was found)."""

    reason: str | None = None
    note: str | None = None
    details: dict | None = None

    @property
    def dropped(self) -> bool:
        return self.reason is not None


PASS = Verdict()

# -- source --------------------------------------------------------------------------------------------------------
_NOUN = r"(?:passages?|texts?|documents?|context|excerpts?|articles?|paragraphs?|sources?|snippets?)"
_FRAMED = r"(?:given\s+|provided\s+|above\s+|following\s+|first\s+|second\s+)?"
LEADING_SOURCE = re.compile(
    r"^\s*(?:according\s+to|based\s+on|as\s+(?:stated|described|mentioned|explained|given)\s+in|in|from)\s+"
    r"(?:the|this|these)\s+" + _FRAMED + _NOUN + r"\s*,\s*",
    re.IGNORECASE,
)
NAMES_SOURCE = re.compile(
    r"\b(?:according\s+to|based\s+on|as\s+(?:stated|described|mentioned|explained|given)\s+in)\s+(?:the|this|these)"
    r"\s+" + _FRAMED + _NOUN + r"\b"
    r"|\b(?:in|from|of)\s+the\s+(?:"
    + _FRAMED
    + r"(?:passages?|excerpts?|paragraphs?|snippets?)|(?:given|provided|above"
    r"|following)\s+" + _NOUN + r")\b"
    r"|\bthe\s+" + _FRAMED + _NOUN + r"\s+(?:says?|stated?s?|mentions?|describes?|discuss(?:es)?|claims?|suggests?|"
    r"reports?|notes?|explains?|indicates?|tells?|lists?)\b"
    r"|\bth(?:is|ese)\s+(?:passages?|excerpts?|paragraphs?|articles?|snippets?)\b"
    r"|\b(?:passage|excerpt|source|document)\s*\[?\d+\]?"
    r"|\[\d+\]",
    re.IGNORECASE,
)


def source_gate(question: str) -> tuple[str, Verdict]:
    """(the question, possibly rewritten; the verdict). A leading "According to the passage," is removed when what
    is left is a question that names no source; a source named anywhere else drops the candidate."""
    found = NAMES_SOURCE.search(question)
    if not found:
        return question, PASS
    lead = LEADING_SOURCE.match(question)
    if lead:
        rest = question[lead.end() :].strip()
        if len(rest.split()) >= 3 and not NAMES_SOURCE.search(rest):
            rewritten = rest[:1].upper() + rest[1:]
            return rewritten, Verdict(note=f"rewritten: removed {lead.group().strip()!r} from the question's start")
    return question, Verdict(f"names its source ({found.group()!r}): a user of the knowledge base would not ask so")


# -- copy ----------------------------------------------------------------------------------------------------------
COPY_RUN_WORDS = 10  # this many words in a row from a chunk is a copy, however long the question
COPY_MIN_WORDS = 6  # a shorter run is a copy only when it is most of the question:
COPY_SHARE = 0.8  # at least this share of the question's words
_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def longest_run(question: list[str], chunk: list[str]) -> tuple[int, int]:
    """(length, end in the question) of the longest run of words the question shares with the chunk, in order."""
    best, end = 0, 0
    previous = [0] * (len(chunk) + 1)
    for i, word in enumerate(question, start=1):
        current = [0] * (len(chunk) + 1)
        for j, other in enumerate(chunk, start=1):
            if word == other:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, end = current[j], i
        previous = current
    return best, end


def copy_gate(question: str, passages: list[Passage]) -> Verdict:
    words = _tokens(question)
    for passage in passages:
        run, end = longest_run(words, _tokens(passage.text))
        if run >= COPY_RUN_WORDS or (run >= COPY_MIN_WORDS and run >= COPY_SHARE * len(words)):
            copied = " ".join(words[end - run : end])
            return Verdict(
                f"copies its chunk [{passage.n}] {short_source(passage.source)}: {run} of its {len(words)} words in "
                f"a row are the chunk's ({copied!r})"
            )
    return PASS


# -- reference and premise: the workbench's verifier against the candidate's own chunks -----------------------------
def reference_gate(checker: FaithfulnessChecker, question: str, reference: str, passages: list[Passage], kind: str):
    """The reference's claims, each verified against the candidate's chunks; dropped unless every one is supported
    (and, for a paired kind, unless both chunks support one)."""
    extraction = checker.extract_claims(question, reference)
    if extraction.claims is None:
        return Verdict(f"the reference's claims could not be extracted: {extraction.invalid_reason}")
    checked = checker.verify_extracted(
        extraction.claims, reference, passages, question=question, examples=example_text(EXTRACT_CLAIMS)
    )
    scored = scored_claims(checked)
    claims = [{"claim": c.text, "verdict": c.verdict, "reason": c.reason} for c in checked]
    if not scored:
        return Verdict("the reference makes no claim the verifier can check", details={"claims": claims})
    failed = [c for c in scored if c.verdict != SUPPORTED]
    if failed:
        more = f" (and {len(failed) - 1} more of {len(scored)} claims)" if len(failed) > 1 else ""
        first = failed[0]
        return Verdict(
            f"the verifier does not support the reference's claim {first.text!r}: {first.verdict}, "
            f"{first.reason or 'no reason given'}{more}",
            details={"claims": claims},
        )
    if kind in PAIRED and len(passages) > 1 and all(c.passage for c in scored):
        used = {c.passage.chunk_id for c in scored}
        if len(used) < 2:
            only = next(p for p in passages if p.chunk_id in used)
            return Verdict(
                f"a {kind} reference that rests on one chunk only ([{only.n}] {short_source(only.source)}): "
                "the question does not need the other",
                details={"claims": claims},
            )
    return Verdict(note=f"{len(scored)} claims supported", details={"claims": claims})


def premise_gate(checker: FaithfulnessChecker, question: str, premise: str, passages: list[Passage]) -> Verdict:
    """A false premise is kept only when the verifier does not find it supported by the candidate's chunks."""
    premise = " ".join(premise.split())
    if not premise:
        return Verdict("no false premise was given with the question")
    checked = checker.verify_claims([premise], passages, question=question)[0]
    if checked.verdict == SUPPORTED:
        return Verdict(f"its premise {premise!r} is what the chunk says ({checked.reason}): it is not false")
    return Verdict(note=f"premise {checked.verdict}: {checked.reason}")


# -- negative: retrieval over the whole knowledge base --------------------------------------------------------------
def negative_gate(llm: LLM, settings: Settings, db: Database, question: str, scale: SimilarityScale) -> Verdict:
    """Retrieve as the engine does; below the retrieval floor nothing answers it; otherwise the engine's context
    grade decides whether any retrieved passage answers it (an unreadable grade drops the candidate: a negative is
    kept only when it is known not to be answered)."""
    nodes = DuckDBRetriever(llm, db, settings.top_k).retrieve(question)
    passages = [
        Passage(
            n, int(node.node.metadata["chunk_id"]), node.node.metadata["source"], node.node.get_content(), node.score
        )
        for n, node in enumerate(nodes, start=1)
    ]
    if not passages:
        return Verdict(note="nothing retrieved")
    best = max(p.score for p in passages)
    limit = floor(scale, settings.retrieval_floor)
    if limit is not None and best <= limit:
        return Verdict(note=f"the best chunk's similarity {best:.2f} is no higher than unrelated text ({limit:.2f})")
    result = ask(
        llm,
        "grade_context",
        settings.generator_model,
        answer_prompts.GRADE_CONTEXT,
        answer_prompts.grade_input(question, grade_view(question, passages)),
    )
    if result.value is None:
        return Verdict(f"could not tell whether the knowledge base answers it: {result.invalid_reason}")
    grade = result.value
    if grade.relevant:
        named = [p for p in passages if p.n in set(grade.passages)] or passages[:1]
        where = ", ".join(f"[{p.n}] {short_source(p.source)} (chunk {p.chunk_id})" for p in named)
        return Verdict(
            f"the knowledge base answers it: {where}; {grade.reason}", details={"chunks": [p.chunk_id for p in named]}
        )
    return Verdict(note=f"no retrieved passage answers it: {grade.reason}")


# -- duplicate: similarity on the embedding model's own scale --------------------------------------------------------
def question_scale(llm: LLM) -> SimilarityScale:
    """How similar two unrelated questions are under the embedding model: the pairs of PROBES (everyday questions on
    unrelated topics, pipeline/knowledge/similarity_scale.py), embedded as queries as the candidates are, in one
    call. On this scale 0 is a typical unrelated pair and 1 identical questions, whatever range the model's cosines
    live in (about 0 for a bag of words, about 0.5 for nomic-embed-text)."""
    vectors = np.asarray(llm.embed_queries(list(PROBES)), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1, norms)
    upper = np.triu_indices(len(vectors), k=1)
    pairs = (vectors @ vectors.T)[upper]
    sample = np.quantile(pairs, np.linspace(0, 1, SAMPLE_POINTS))
    return SimilarityScale(
        llm.settings.embed_model,
        sample=tuple(float(x) for x in sample),
        n_pairs=len(pairs),
        n_probes=len(PROBES),
        measured_at=datetime.now(timezone.utc).replace(tzinfo=None),
    )


@dataclass
class Kept:
    position: int
    question: str
    vector: np.ndarray


def unit(vector) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    norm = np.linalg.norm(v)
    return v / norm if norm else v


def duplicate_gate(vector: np.ndarray, kept: list[Kept], scale: SimilarityScale, threshold: float) -> Verdict:
    """Dropped when a kept question is at least `threshold` similar on the model's scale (the closest is named)."""
    if not kept:
        return PASS
    similarities = np.stack([k.vector for k in kept]) @ vector
    closest = int(np.argmax(similarities))
    similarity = scale.relative(float(similarities[closest]))
    if similarity >= threshold:
        other = kept[closest]
        return Verdict(
            f"a near-duplicate of kept question {other.position + 1} ({other.question!r}): similarity "
            f"{similarity:.2f} on the embedding model's scale (0 unrelated questions, 1 identical), at or above "
            f"{threshold:g}",
            details={"duplicate_of": other.position, "similarity": similarity},
        )
    return PASS
