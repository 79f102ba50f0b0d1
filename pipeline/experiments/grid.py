"""A sweep's grid: `--grid top_k=3,5,8 --grid chunk_size=256,512` read into settings and typed values, and the
combinations they make.

A grid names settings whose value an evaluation records (pipeline/evaluation/registry.evaluation_config: what a
result depends on), each value read with the setting's own type and checked against its declared range
(pipeline/config.py), every combination also against the checks across settings (chunk_overlap below chunk_size).
Combinations are the product of the values, the first setting varying slowest; each has a label such as
`top_k=3,chunk_size=256` and runs as the evaluation `NAME/label`, so a rerun finds it by name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass

from pipeline.config import CROSS_CHECKS, DECLARATIONS, Settings
from pipeline.errors import InputError

# settings an evaluation records that a grid cannot vary: why
NOT_SWEPT = {
    "cache_enabled": "the response cache changes no score",
    "cache_read": "the response cache changes no score (run the sweep with --fresh to bypass it)",
    "judge_model": "scores are comparable only under one judge pin, so a grid cannot compare judges",
    "judge_corrections_k": "it changes the judge's prompt: scores are comparable only under one judge pin",
}
# the settings that change the index a question retrieves from: a value other than the knowledge base's builds an
# index of its own (pipeline/experiments/indexes.py)
INDEX_SETTINGS = ("chunk_size", "chunk_overlap", "embed_model")
SEPARATOR = ","  # between values; a grid whose values hold commas separates them with "|" instead
ALTERNATIVE_SEPARATOR = "|"


@dataclass(frozen=True)
class Axis:
    """One setting of a grid and its values, typed, in the order given."""

    setting: str
    values: tuple


@dataclass(frozen=True)
class Combination:
    position: int  # 0-based, in grid order
    values: tuple[tuple[str, object], ...]  # (setting, value) in grid order

    @property
    def label(self) -> str:
        return ",".join(f"{name}={value_text(value)}" for name, value in self.values)

    @property
    def settings(self) -> dict:
        return dict(self.values)

    def eval_name(self, sweep: str) -> str:
        return f"{sweep}/{self.label}"

    def apply(self, settings: Settings) -> Settings:
        return dataclasses.replace(settings, **self.settings)


def value_text(value) -> str:
    """A value as labels and the stored grid spell it: booleans lower case, numbers as Python writes them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def sweepable_settings() -> list[str]:
    """The settings a grid may vary: those an evaluation over every metric records (its result depends on them),
    but for NOT_SWEPT."""
    from pipeline.evaluation import registry

    recorded = registry.evaluation_config(Settings(), registry.metric_names())
    return [name for name in recorded if name in DECLARATIONS and name not in NOT_SWEPT]


def parse_axis(text: str) -> Axis:
    """`setting=v1,v2,...` as an Axis; InputError that says the fix for an unknown setting, a setting a grid cannot
    vary, a value that does not parse or is out of range, or a value given twice."""
    name, sign, raw = str(text).partition("=")
    name = name.strip()
    if not sign or not name:
        raise InputError(
            f"--grid {text!r} names no setting and values", fix="write --grid SETTING=VALUE,VALUE, e.g. top_k=3,5,8"
        )
    valid = sweepable_settings()
    if name in NOT_SWEPT:
        raise InputError(f"a grid cannot vary {name}: {NOT_SWEPT[name]}", fix=f"vary one of {', '.join(valid)}")
    if name not in valid:
        why = "is not a setting" if name not in DECLARATIONS else "changes no evaluation result"
        raise InputError(f"--grid {name!r} {why}", fix=f"vary one of {', '.join(valid)}")
    separator = ALTERNATIVE_SEPARATOR if ALTERNATIVE_SEPARATOR in raw else SEPARATOR
    parts = [part.strip() for part in raw.split(separator)]
    if not any(parts):
        raise InputError(f"--grid {name} has no values", fix=f"write --grid {name}=VALUE,VALUE")
    values = tuple(parse_value(name, part) for part in parts if part)
    seen = set()
    for value in values:
        if value in seen:
            raise InputError(f"--grid {name} lists {value_text(value)} twice", fix="give each value once")
        seen.add(value)
    return Axis(name, values)


def parse_value(name: str, text: str):
    """One grid value read with the setting's type and checked against its declared valid values."""
    declaration = DECLARATIONS[name]
    kind = declaration.kind
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError(text)
            value = lowered in ("true", "1", "yes", "on")
        else:
            value = kind(text)
    except ValueError:
        words = {bool: "true or false", int: "a whole number", float: "a number"}.get(kind, "text")
        raise InputError(
            f"--grid {name}: {text!r} is not {words}", fix=f"give {name} values that are {words}"
        ) from None
    if kind is float and not (value == value and abs(value) != float("inf")):
        raise InputError(f"--grid {name}: {text!r} is not a finite number", fix=f"give {name} finite numbers")
    if not declaration.allows(value):
        raise InputError(
            f"--grid {name}={text} is out of range", fix=f"give {name} values {declaration.valid_values()}"
        )
    return value


def parse_grid(texts: list[str]) -> list[Axis]:
    """Every --grid, in order; a setting named twice is refused."""
    if not texts:
        raise InputError("a sweep needs a grid", fix="add --grid SETTING=VALUE,VALUE, e.g. --grid top_k=3,5,8")
    axes = [parse_axis(text) for text in texts]
    names = [a.setting for a in axes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"--grid names {', '.join(twice)} more than once", fix="give each setting's values in one --grid"
        )
    return axes


def combinations(axes: list[Axis], settings: Settings) -> list[Combination]:
    """The product of the axes' values, the first axis varying slowest; each checked against the checks across
    settings (on `settings` with its values)."""
    combos = []
    for position, values in enumerate(itertools.product(*(a.values for a in axes))):
        combo = Combination(position, tuple(zip((a.setting for a in axes), values, strict=True)))
        applied = combo.apply(settings)
        for name, ok, rule in CROSS_CHECKS:
            if not ok(applied):
                raise InputError(
                    f"the combination {combo.label} is invalid: {name} = {getattr(applied, name)!r} is not {rule}",
                    fix=f"choose {name} values {rule} for every combination, or set the other setting",
                )
        combos.append(combo)
    return combos


def grid_json(axes: list[Axis]) -> list[list]:
    """The grid as stored: [[setting, [values...]], ...] in order."""
    return [[a.setting, list(a.values)] for a in axes]


def grid_text(grid: list[list]) -> str:
    """A stored grid as --grid options."""
    return " ".join(f"--grid {name}={','.join(value_text(v) for v in values)}" for name, values in grid)


def items_hash(item_ids: list[str]) -> str:
    """Of the chosen items' ids, in order: a rerun over other items (another --limit or --tags) is refused."""
    return hashlib.sha256(json.dumps(list(item_ids)).encode()).hexdigest()
