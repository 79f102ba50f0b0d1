"""Which item of one evaluation run is which of another's: by id, else by normalised question.

Two runs of one dataset share ids. Two pipelines' answer files over the same questions may not (one numbers its
rows, another has no id column and gets ids made from the questions): their items are then matched by the
question, lower-cased with punctuation and spacing ignored. A question asked twice in a run is matched by id
only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TypeVar

from pipeline.evaluation.dataset import normalised_question
from store import evals
from store.db import Database

V = TypeVar("V")


def match_items(a: Mapping[str, str], b: Mapping[str, str]) -> dict[str, str]:
    """B's item id -> the id of the same item in A, from each run's {item id: question}."""
    matched = {item: item for item in b if item in a}
    left_a = {i: normalised_question(q) for i, q in a.items() if i not in matched}
    left_b = {i: normalised_question(q) for i, q in b.items() if i not in matched}
    once_a, once_b = Counter(left_a.values()), Counter(left_b.values())
    by_question = {q: i for i, q in left_a.items() if once_a[q] == 1}
    for item, question in left_b.items():
        if once_b[question] == 1 and question in by_question:
            matched[item] = by_question[question]
    return matched


def matched_items(db: Database, a_run_id: int, b_run_id: int) -> dict[str, str]:
    """B's item id -> A's, for two stored evaluation runs."""
    return match_items(evals.item_questions(db, a_run_id), evals.item_questions(db, b_run_id))


def in_terms_of_a(values: Mapping[str, V], matched: Mapping[str, str]) -> dict[str, V]:
    """B's values keyed by the ids of A's items they match; B's items without a match are left out."""
    return {matched[item]: value for item, value in values.items() if item in matched}
