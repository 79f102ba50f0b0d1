"""Which chunks each candidate is written from: stratified over documents, so that every document contributes.

Documents are visited round-robin in an order shuffled by the seed, one document per candidate whatever its kind,
so 50 candidates over a 1,000-document knowledge base come from 50 documents and 40 over 10 documents take four
from each. Within a document the chunk used least so far is taken (ties broken by the seed). A numeric candidate
needs a chunk with a figure in it; a paired kind (multi-hop, comparison) needs two chunks of different documents
that share an entity: a capitalised term (a name, an acronym) or a number with two or more digits that both
mention. Of the partners of a chunk, one sharing a name is taken before one sharing only a number (two documents may
give the same figure by chance), and then the one sharing the rarest entity (named in the fewest documents): a term
every document names (the knowledge base's subject) links nothing in particular.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass

from pipeline.evaluation.synth.kinds import KINDS, PAIRED, allocate
from pipeline.text import STOPWORDS, plural, sentences
from store.synth import ChunkRow

WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'][A-Za-z0-9]+)*|\d[\d,]*(?:\.\d+)?")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Slot:
    """One candidate to write: its kind, its chunks and, for a paired kind, the entity its chunks share."""

    position: int
    kind: str
    chunk_ids: tuple[int, ...]
    shared: str | None = None

    def as_dict(self) -> dict:
        return {"kind": self.kind, "chunk_ids": list(self.chunk_ids), "shared": self.shared}

    @classmethod
    def from_dict(cls, position: int, data: dict) -> Slot:
        return cls(position, data["kind"], tuple(data["chunk_ids"]), data.get("shared"))


def _strong(word: str) -> bool:
    """An acronym or a mixed-case or hyphenated name (BERT, RAG-Sequence, FAISS), a name wherever it stands."""
    return sum(ch.isupper() for ch in word) > 1 or any(ch.isdigit() for ch in word)


def entities(text: str) -> set[str]:
    """Capitalised terms and numbers of two or more digits in the chunk's sentences (headings left out). A
    sentence's first word counts only when it is a name wherever it stands (an acronym, mixed case)."""
    found = set()
    for sentence in sentences(text):
        if sentence.kind == "heading":
            continue
        for n, word in enumerate(WORD.findall(sentence.text)):
            if word[0].isdigit():
                number = word.replace(",", "")
                if sum(ch.isdigit() for ch in number) >= 2:
                    found.add(number)
            else:
                word = word.removesuffix("'s")
                if word[0].isupper() and len(word) > 1 and word.lower() not in STOPWORDS and (n > 0 or _strong(word)):
                    found.add(word)
    return found


def has_figure(text: str) -> bool:
    return any(NUMBER.search(s.text) for s in sentences(text) if s.kind != "heading")


def kind_order(counts: dict[str, int]) -> list[str]:
    """The kinds interleaved in proportion, so that a job stopped early, or a small one, holds every kind."""
    spread = [((j + 0.5) / count, KINDS.index(kind), kind) for kind, count in counts.items() for j in range(count)]
    return [kind for _, _, kind in sorted(spread)]


class Sampler:
    def __init__(self, chunks: list[ChunkRow], seed: int):
        self.rng = random.Random(seed)
        self.chunks = {c.id: c for c in chunks}
        by_document: dict[int, list[int]] = {}
        for chunk in chunks:
            by_document.setdefault(chunk.document_id, []).append(chunk.id)
        self.documents = sorted(by_document)
        self.rng.shuffle(self.documents)
        self.by_document = by_document
        self.used: Counter = Counter()
        self.entities = {c.id: entities(c.text) for c in chunks}
        document_entities: dict[str, set[int]] = {}
        for chunk in chunks:
            for entity in self.entities[chunk.id]:
                document_entities.setdefault(entity, set()).add(chunk.document_id)
        self.spread = {entity: len(docs) for entity, docs in document_entities.items()}
        self.figures = {c.id for c in chunks if has_figure(c.text)}
        self.cursor = 0

    def _partners(self, chunk_id: int) -> dict[int, str]:
        """Chunks of other documents sharing an entity with this one -> the rarest entity they share."""
        chunk = self.chunks[chunk_id]
        mine = self.entities[chunk_id]
        out = {}
        for other in self.chunks.values():
            if other.document_id == chunk.document_id:
                continue
            shared = mine & self.entities[other.id]
            if shared:
                out[other.id] = min(shared, key=self._rarity)
        return out

    def _rarity(self, entity: str) -> tuple:
        """How good a link an entity is, best first: a name before a number (two documents may give the same figure
        by chance), then the fewer documents that name it the better, then the longer."""
        return (entity[0].isdigit(), self.spread[entity], -len(entity), entity)

    def _eligible(self, kind: str, chunk_id: int) -> bool:
        if kind == "numeric":
            return chunk_id in self.figures
        if kind in PAIRED:
            return bool(self._partners(chunk_id))
        return True

    def _least_used(self, ids: list[int]) -> int:
        fewest = min(self.used[i] for i in ids)
        return self.rng.choice(sorted(i for i in ids if self.used[i] == fewest))

    def slot(self, position: int, kind: str) -> Slot | None:
        """The next document (round-robin) that has a chunk for this kind, and its least used such chunk."""
        for step in range(len(self.documents)):
            document = self.documents[(self.cursor + step) % len(self.documents)]
            ids = [i for i in self.by_document[document] if self._eligible(kind, i)]
            if not ids:
                continue
            self.cursor += step + 1
            first = self._least_used(ids)
            self.used[first] += 1
            if kind not in PAIRED:
                return Slot(position, kind, (first,))
            partners = self._partners(first)
            rarest = min(self._rarity(e)[:2] for e in partners.values())
            close = [i for i, e in partners.items() if self._rarity(e)[:2] == rarest]
            second = self._least_used(close)
            self.used[second] += 1
            return Slot(position, kind, (first, second), partners[second])
        return None


def plan(chunks: list[ChunkRow], n: int, shares: dict[str, float], seed: int) -> tuple[list[Slot], list[str]]:
    """(the slots, notes): n candidates shared out by kind, each with its chunks. A kind no chunk can serve (no
    figure anywhere for numeric, no two documents sharing an entity for a paired kind) is left out, with a note."""
    sampler = Sampler(chunks, seed)
    slots, notes, missing = [], [], Counter()
    for kind in kind_order(allocate(n, shares)):
        slot = sampler.slot(len(slots), kind)
        if slot is None:
            missing[kind] += 1
        else:
            slots.append(slot)
    for kind, count in missing.items():
        why = "no chunk holds a figure" if kind == "numeric" else "no two documents share an entity"
        notes.append(f"{plural(count, kind + ' candidate')} left out: {why}")
    return slots, notes
