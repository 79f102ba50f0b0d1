"""A mapping for an in-house instrumentation (the setting `collect_mapping`): a TOML file with a table per
service (its OpenTelemetry `service.name`) naming the span attribute, or a JSON path inside an attribute's JSON
value, that holds the question, the answer and the retrieved documents:

    [support-bot]
    question = "app.question"               # an attribute, on whichever span of the trace carries it
    answer = "app.reply#choices[0].text"    # attribute#path: a field inside the attribute's JSON value
    documents = "app.search.hits"           # a list of documents (JSON text or an array)

    [support-bot.document]                  # optional: the keys inside each document
    text = "passage"                        # default: content, text, page_content, ...
    score = "relevance"
    source = "doc_id"

It is read and checked once, when `collect` starts; a mistake stops it with what to fix."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.collect.conventions.base import OTHER, RETRIEVER, Convention, context_of, number, parsed
from pipeline.errors import ConfigError
from pipeline.evaluation.dataset import GivenContext
from store.records import ReceivedSpan

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

FIELDS = ("question", "answer", "documents")
DOCUMENT_KEYS = ("text", "score", "source")
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_PATH = re.compile(r"^(?:[^.\[\]]+|\[\d+\])(?:\.[^.\[\]]+|\[\d+\])*$")


@dataclass(frozen=True)
class Location:
    """An attribute and, optionally, a path inside its JSON value."""

    attribute: str
    path: tuple = ()

    def read(self, attributes: dict):
        value = attributes.get(self.attribute)
        for step in self.path:
            value = parsed(value)
            if isinstance(step, int):
                value = value[step] if isinstance(value, list) and -len(value) <= step < len(value) else None
            else:
                value = value.get(step) if isinstance(value, dict) else None
        return value


@dataclass
class Mapping(Convention):
    service: str
    locations: dict[str, Location]
    document_keys: dict[str, str] = field(default_factory=dict)
    name: str = "mapping"

    def speaks(self, span: ReceivedSpan) -> bool:
        return span.service == self.service and any(loc.attribute in span.attributes for loc in self.locations.values())

    def kind(self, span: ReceivedSpan) -> str | None:
        return "mapped"

    def role(self, span: ReceivedSpan) -> str:
        documents = self.locations.get("documents")
        return RETRIEVER if documents is not None and documents.attribute in span.attributes else OTHER

    def question(self, span: ReceivedSpan) -> str | None:
        return self._text(span, "question")

    def answer(self, span: ReceivedSpan) -> str | None:
        return self._text(span, "answer")

    def documents(self, span: ReceivedSpan) -> list[GivenContext]:
        location = self.locations.get("documents")
        items = parsed(location.read(span.attributes)) if location else None
        if not isinstance(items, list):
            return []
        return [c for c in (self._context(item) for item in items) if c is not None]

    def _text(self, span: ReceivedSpan, what: str) -> str | None:
        location = self.locations.get(what)
        value = location.read(span.attributes) if location else None
        return str(value).strip() or None if isinstance(value, (str, int, float)) else None

    def _context(self, item) -> GivenContext | None:
        item = parsed(item)
        keys = self.document_keys
        if not keys or not isinstance(item, dict):
            return context_of(item)
        text = item.get(keys.get("text", "")) if "text" in keys else None
        context = context_of(item) if text is None else GivenContext(text=str(text))
        if context is None:
            return None
        if "score" in keys:
            context.score = number(item.get(keys["score"]))
        if "source" in keys and item.get(keys["source"]) is not None:
            context.source = str(item[keys["source"]])
        return context


def load_mappings(path: str) -> dict[str, Mapping]:
    """The mappings of the file `collect_mapping` names, by service; {} when the setting is empty."""
    if not path.strip():
        return {}
    fix = f"correct {path} (docs/traces-in.md: 'A mapping for an in-house instrumentation'), or empty collect_mapping"
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(
            f"collect_mapping names {path}, which is not a file",
            fix="write the mapping there (docs/traces-in.md: 'A mapping for an in-house instrumentation'), or empty "
            "collect_mapping",
        )
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"collect_mapping {path} is not valid TOML: {exc}", fix=fix) from None
    if not data:
        raise ConfigError(f"collect_mapping {path} maps no service", fix=fix)
    return {service: _mapping(service, table, path, fix) for service, table in data.items()}


def _mapping(service: str, table, path: str, fix: str) -> Mapping:
    where = f"collect_mapping {path}, [{service}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} is not a table: write [{service}] and its keys under it", fix=fix)
    unknown = set(table) - {*FIELDS, "document"}
    if unknown:
        raise ConfigError(
            f"{where} has unknown keys: {', '.join(sorted(unknown))} (known: {', '.join(FIELDS)}, document)", fix=fix
        )
    if not any(name in table for name in FIELDS):
        raise ConfigError(f"{where} names none of {', '.join(FIELDS)}", fix=fix)
    locations = {name: _location(f"{where} {name}", table[name], fix) for name in FIELDS if name in table}
    keys = table.get("document", {})
    if not isinstance(keys, dict) or set(keys) - set(DOCUMENT_KEYS):
        raise ConfigError(f"{where}.document may name only {', '.join(DOCUMENT_KEYS)}, each a key", fix=fix)
    if any(not isinstance(v, str) or not v.strip() for v in keys.values()):
        raise ConfigError(f"{where}.document: every key must be a non-empty text", fix=fix)
    return Mapping(service, locations, dict(keys))


def _location(where: str, value, fix: str) -> Location:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} = {value!r}: give an attribute name, or attribute#path", fix=fix)
    attribute, _, path = value.strip().partition("#")
    if not attribute.strip():
        raise ConfigError(f"{where} = {value!r} names no attribute before '#'", fix=fix)
    if path and not _PATH.match(path):
        raise ConfigError(f"{where} = {value!r}: the path after '#' is not like field.sub[0].name", fix=fix)
    steps = tuple(int(index) if index else key for key, index in _STEP.findall(path)) if path else ()
    return Location(attribute.strip(), steps)
