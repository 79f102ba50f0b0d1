"""The embedding model's own similarity scale, so that decisions taken on a cosine similarity mean the same with
any embedding model.

Embedding models put similarities in ranges of their own: the fake Ollama's bag of words gives about 0 for
unrelated texts, nomic-embed-text about 0.5. A fixed threshold on raw cosines is calibrated for one model only.
So the workbench measures, once per embedding model (name and digest) and knowledge base (fingerprint), how
similar the knowledge base's chunks are to questions about unrelated things: PROBES, everyday questions on
topics a knowledge base rarely covers (cooking, sport, geography, pets...), embedded as queries in one call and
compared with every chunk, as retrieval compares a question. Why probes, not sentences of the knowledge base
against chunks of its other documents: a knowledge base is usually about one field, so its documents share
vocabulary; on the sample knowledge base those "unrelated" pairs have a median of 0.09 and a 95th percentile of
0.25 under the bag of words, above the top chunk of 13 of the 68 golden questions, so a floor set there would
refuse questions it can answer. The probes measure the model, not the field.

`SimilarityScale.relative(cos)` puts a similarity on the calibrated scale: 0 is a typical unrelated pair (the
median), 1 identical texts. The on-topic check and answer relevancy read similarities on it; the retrieval floor
compares the top chunk's raw similarity with a high quantile of the unrelated pairs (`retrieval_floor`).

The scale is stored (store/similarity.py), cached per process, measured lazily on first need and again after an
ingest that changes the knowledge base. When it cannot be measured (too few chunks, no store, the embedding
call failed) it is unmeasured: similarities are read raw and the floor is off, and the reason says why.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.models.llm import LLM
from pipeline.text import plural
from store import kb, similarity
from store.db import OPTIONAL_READ_WAIT_S, Database
from store.errors import StoreError
from store.llm_log import save_calls

# Questions about things a knowledge base rarely covers, many topics so that one a knowledge base does cover
# moves the median and the upper quantiles little.
PROBES = (
    "What time does the bakery open on Sunday mornings?",
    "How long should I boil an egg for a soft yolk?",
    "Who painted the ceiling of the Sistine Chapel?",
    "What is the capital city of Australia?",
    "How many players are on a football team?",
    "When did the Roman Empire fall?",
    "How do I get red wine out of a carpet?",
    "Which planet is closest to the Sun?",
    "What should I feed a young kitten?",
    "How far is Mars from the Earth?",
    "When is the best season to plant tulip bulbs?",
    "Who wrote the novel Pride and Prejudice?",
    "How do I fix a flat bicycle tyre?",
    "What is the tallest mountain in Africa?",
    "How much does a blue whale weigh?",
    "Which wine goes well with grilled salmon?",
    "How do you knit a scarf for beginners?",
    "What are the rules of cricket?",
    "Where can I buy cheap flights to Lisbon?",
    "How often should I water a cactus?",
    "Why do cats purr?",
    "What is the recipe for banana bread?",
    "Who won the Tour de France last summer?",
    "How do I remove rust from garden tools?",
    "What causes thunderstorms in the afternoon?",
    "Which breed of dog is best for a small flat?",
    "How deep is the Pacific Ocean?",
    "When was the Eiffel Tower built?",
    "How do I tune a guitar by ear?",
    "What vitamins are in oranges?",
    "How can I stop my glasses from fogging up?",
    "What is the population of Brazil?",
    "How do bees make honey?",
    "Which museum in Paris has the Mona Lisa?",
    "How long does it take to walk a marathon?",
    "What is the difference between a frog and a toad?",
    "How do I paint a wooden fence?",
    "Who composed the Four Seasons concertos?",
    "What should I pack for a ski holiday?",
    "How do volcanoes erupt?",
)
SAMPLE_POINTS = 401  # evenly spaced order statistics kept of all the pairs
MIN_PAIRS = 100  # fewer unrelated pairs than this (fewer than 3 chunks) are too few to measure a scale on


@dataclass(frozen=True)
class SimilarityScale:
    """How similar unrelated texts are under one embedding model, over one knowledge base."""

    embed_model: str
    digest: str = ""
    kb_fingerprint: str = ""
    sample: tuple[float, ...] = ()  # sorted similarities of unrelated pairs (order statistics); empty: unmeasured
    n_pairs: int = 0
    n_probes: int = 0
    n_chunks: int = 0
    measured_at: datetime | None = None
    reason: str = ""  # why there is no measurement (unmeasured only)
    values: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "values", np.asarray(self.sample, dtype=np.float64))

    @property
    def measured(self) -> bool:
        return len(self.sample) > 0

    @property
    def median(self) -> float | None:
        return self.quantile(0.5)

    def quantile(self, q: float) -> float | None:
        """The q quantile of the unrelated pairs' similarities; None when unmeasured."""
        return float(np.quantile(self.values, q)) if self.measured else None

    def relative(self, cosine: float) -> float:
        """The similarity on the calibrated scale: (cos - median) / (1 - median), 0 for a typical unrelated
        pair, 1 for identical texts (clipped at 1); the raw cosine when unmeasured."""
        if not self.measured:
            return cosine
        median = self.median
        return min(1.0, (cosine - median) / (1.0 - median)) if median < 1 else cosine

    def describe(self) -> str:
        """One line: what was measured, or why nothing was."""
        if not self.measured:
            return f"not measured for {self.embed_model} ({self.reason}): similarities are read raw"
        return (
            f"{self.embed_model} ({self.digest[:12]}): unrelated pairs' median {self.median:.3f}, "
            f"95th percentile {self.quantile(0.95):.3f} ({self.n_pairs:,} pairs: {self.n_probes} unrelated "
            f"questions x {self.n_chunks} chunks)"
        )

    def raw_note(self) -> str:
        """For a reason text: where the raw similarity sits (the unrelated median), or that it is read raw."""
        if not self.measured:
            return f"raw cosine; the scale is not measured: {self.reason}"
        return f"unrelated pairs' median {self.median:.2f}"


def unmeasured(embed_model: str, reason: str, digest: str = "", fingerprint: str = "") -> SimilarityScale:
    return SimilarityScale(embed_model, digest, fingerprint, reason=reason)


def kb_fingerprint(db: Database, embed_model: str) -> str:
    """The knowledge base's state for this embedding model as a short string (store/kb.py fingerprint); while
    another process holds the store, the state this process read last (a question's retrieval has just read it)."""
    return hashlib.sha256(repr(kb.fingerprint(db, embed_model, or_last_read=True)).encode()).hexdigest()[:16]


def measure(llm: LLM, db: Database, digest: str | None = None, fingerprint: str | None = None) -> SimilarityScale:
    """Measure the scale over the knowledge base in `db` (one embedding call of the probes); not stored."""
    model = llm.settings.embed_model
    digest = digest if digest is not None else llm.embed_digest()
    fingerprint = fingerprint if fingerprint is not None else kb_fingerprint(db, model)
    _ids, matrix = kb.load_embeddings(db, model, or_last_read=True)  # as retrieval last read it
    n_chunks = len(_ids)
    if n_chunks * len(PROBES) < MIN_PAIRS:
        need = -(-MIN_PAIRS // len(PROBES))
        return unmeasured(
            model,
            f"the knowledge base has {plural(n_chunks, 'chunk')} embedded with {model}; measuring needs "
            f"at least {need}",
            digest,
            fingerprint,
        )
    probes = np.asarray(llm.embed_queries(list(PROBES)), dtype=np.float32)
    if probes.shape[1] != matrix.shape[1]:
        return unmeasured(
            model,
            f"the model's vectors have {probes.shape[1]} dimensions, the stored chunks {matrix.shape[1]}: "
            "ingest the knowledge base again",
            digest,
            fingerprint,
        )
    norms = np.linalg.norm(probes, axis=1, keepdims=True)
    pairs = (matrix @ (probes / np.where(norms == 0, 1, norms)).T).ravel().astype(np.float64)
    sample = np.quantile(pairs, np.linspace(0, 1, SAMPLE_POINTS))
    return SimilarityScale(
        model,
        digest,
        fingerprint,
        tuple(float(x) for x in sample),
        len(pairs),
        len(PROBES),
        n_chunks,
        datetime.now(timezone.utc).replace(tzinfo=None),
    )


_scales: dict[tuple, SimilarityScale] = {}
_guard = threading.Lock()


def scale_for(db: Database | None, llm: LLM, measurer: Callable[[], LLM] | None = None) -> SimilarityScale:
    """The current scale of the embedding model over the knowledge base in `db`: from this process's cache, else
    from the store, else measured now (and stored when the store is writable) with `llm`, or the client
    `measurer()` makes. Unmeasured, with the reason, when there is no store or it cannot be measured."""
    model = llm.settings.embed_model
    if db is None:
        return unmeasured(model, "no store to measure the knowledge base in")
    try:
        digest = llm.embed_digest()
        fingerprint = kb_fingerprint(db, model)
    except WorkbenchError as exc:
        return unmeasured(model, f"the embedding model's digest or the knowledge base could not be read: {exc}")
    key = (db.path, llm.settings.ollama_host, model, digest, fingerprint)
    with _guard:
        if key in _scales:
            return _scales[key]
        scale = _stored(db, model, digest, fingerprint)
        if scale is None:
            try:
                scale = measure(measurer() if measurer else llm, db, digest, fingerprint)
            except WorkbenchError as exc:  # not cached: the next question tries again
                return unmeasured(model, f"measuring failed: {exc}", digest, fingerprint)
            _keep(db, scale)
        _scales[key] = scale
        return scale


def current(settings: Settings, db: Database, origin: str, llm: LLM | None = None) -> SimilarityScale:
    """scale_for, measuring (when it must) with a model client of its own whose embedding call is logged apart
    (`origin`: who asked: chat, evaluation, health), not as a call of the question that happened to need it
    first; `llm` (a question's client) reads the digest."""
    made: list[LLM] = []

    def measurer() -> LLM:
        if not made:
            made.append(LLM(settings, db, origin=origin))
        return made[0]

    try:
        return scale_for(db, llm or measurer(), measurer)
    finally:
        for client in made:
            calls = client.take_calls()
            if calls and not db.read_only:
                try:  # a held store: the measurement's call is not logged rather than the question kept waiting
                    save_calls(db, calls, client.take_cache_entries(), lock_timeout_s=OPTIONAL_READ_WAIT_S)
                except StoreError:
                    pass


def forget() -> None:
    """Drop this process's cached scales (tests; a store replaced under the same path)."""
    with _guard:
        _scales.clear()


def _stored(db: Database, model: str, digest: str, fingerprint: str) -> SimilarityScale | None:
    try:
        row = similarity.get(db, model, digest, fingerprint)
    except StoreError:
        return None
    if row is None:
        return None
    return SimilarityScale(
        row.embed_model,
        row.digest,
        row.kb_fingerprint,
        tuple(float(x) for x in row.sample),
        row.n_pairs,
        row.n_probes,
        row.n_chunks,
        row.measured_at,
    )


def _keep(db: Database, scale: SimilarityScale) -> None:
    """Store a measured scale; a read-only or locked store keeps it in this process only."""
    if not scale.measured or db.read_only:
        return
    try:
        similarity.put(
            db,
            similarity.StoredScale(
                scale.embed_model,
                scale.digest,
                scale.kb_fingerprint,
                scale.n_pairs,
                scale.n_probes,
                scale.n_chunks,
                float(scale.median),
                list(scale.sample),
            ),
            OPTIONAL_READ_WAIT_S,  # a held store: kept in this process, stored by a later measurement
        )
    except StoreError:
        pass


def floor(scale: SimilarityScale, quantile: float) -> float | None:
    """The retrieval floor: the `quantile` of the unrelated pairs (retrieval_floor); None when it is off
    (quantile 0) or the scale is unmeasured."""
    if quantile <= 0 or not scale.measured:
        return None
    return scale.quantile(quantile)


def floor_text(settings: Settings, scale: SimilarityScale) -> str:
    """The retrieval floor this scale implies under the settings, in words."""
    limit = floor(scale, settings.retrieval_floor)
    if settings.retrieval_floor <= 0:
        return "no retrieval floor (retrieval_floor = 0)"
    if limit is None:
        return "no retrieval floor (the scale is not measured)"
    return f"retrieval floor {limit:.3f} (quantile {settings.retrieval_floor:g} of the unrelated pairs)"


def scale_rows(settings: Settings, db: Database) -> list[dict]:
    """The newest stored scale of each embedding model and digest, as rows for Settings & health."""
    rows = []
    for scale in stored_scales(db):
        limit = floor(scale, settings.retrieval_floor)
        rows.append(
            {
                "embedding model": scale.embed_model,
                "digest": scale.digest[:12],
                "pairs": scale.n_pairs,
                "unrelated median": round(scale.median, 3),
                "unrelated p95": round(scale.quantile(0.95), 3),
                "retrieval floor": None if limit is None else round(limit, 3),
                "measured at": scale.measured_at,
                "in use": scale.embed_model == settings.embed_model,
            }
        )
    return rows


def stored_scales(db: Database) -> list[SimilarityScale]:
    """The newest stored scale of each embedding model and digest (for Settings & health)."""
    return [
        SimilarityScale(
            r.embed_model,
            r.digest,
            r.kb_fingerprint,
            tuple(float(x) for x in r.sample),
            r.n_pairs,
            r.n_probes,
            r.n_chunks,
            r.measured_at,
        )
        for r in similarity.latest(db)
    ]
