"""The column names users bring, mapped onto ours with no flags: our own (`id, question, answer, contexts,
reference, tags`), Ragas's (`user_input, response, retrieved_contexts, reference`) and DeepEval's (`input,
actual_output, retrieval_context, expected_output`). A file's columns are mapped once, from its header (CSV,
Parquet) or the keys of its rows (JSONL); the mapping is shown before an evaluation starts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.errors import InputError

# Each of our fields with the names it is recognised by, in order of preference: ours, Ragas's, DeepEval's
# (`question`/`answer`/`contexts`/`ground_truth` are also older Ragas datasets' names).
ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "question": ("question", "user_input", "input"),
    "answer": ("answer", "response", "actual_output"),
    "contexts": ("contexts", "retrieved_contexts", "retrieval_context"),
    "reference": ("reference", "expected_output", "ground_truth"),
    "tags": ("tags",),
    # a turn of a conversation (a file of another pipeline's answers, one row per turn)
    "conversation": ("conversation_id", "conversation", "session_id", "thread_id"),
    "turn": ("turn", "turn_no", "turn_number"),
    # where an exported dataset's items came from (a dataset file read back keeps them)
    "origin": ("origin",),
    "provenance": ("provenance",),
}
# shown in the mapping only when the file has them
OPTIONAL = ("conversation", "turn", "origin", "provenance")
CONVENTIONS = {
    "the workbench": {"question", "answer", "contexts", "reference"},
    "Ragas": {"user_input", "response", "retrieved_contexts", "reference", "ground_truth"},
    "DeepEval": {"input", "actual_output", "retrieval_context", "expected_output"},
}


@dataclass(frozen=True)
class ColumnMap:
    """field -> the file's column that holds it, for the fields the file has; `unused`: its other columns."""

    columns: dict[str, str]
    unused: tuple[str, ...] = ()
    convention: str = "the workbench"
    notes: list[str] = field(default_factory=list)

    @property
    def given_answers(self) -> bool:
        return "answer" in self.columns

    def describe(self) -> list[tuple[str, str]]:
        """(our field, the file's column or what stands in for it), in our fields' order."""
        shown = []
        for name in ALIASES:
            if name in self.columns:
                shown.append((name, self.columns[name]))
            elif name == "id":
                shown.append((name, "(none: each row's id is made from its question)"))
            elif name in ("answer", "contexts") and not self.given_answers:
                continue
            elif name in OPTIONAL:
                continue
            else:
                shown.append((name, "(none)"))
        return shown

    def row(self, raw: dict) -> dict:
        """A row of the file with our field names (its other keys dropped)."""
        return {name: raw[column] for name, column in self.columns.items() if column in raw}


def map_columns(names: Iterable[str]) -> ColumnMap:
    """The mapping of a file's column names; InputError naming what is missing when a question column or, beside
    contexts, an answer column cannot be found."""
    present = [n for n in dict.fromkeys(str(n).strip() for n in names) if n]
    columns = {}
    for name, aliases in ALIASES.items():
        found = next((a for a in aliases if a in present), None)
        if found:
            columns[name] = found
    if "question" not in columns:
        raise InputError(
            "the file has no question column (looked for " + ", ".join(ALIASES["question"]) + "); "
            f"its columns are {', '.join(present) or 'none'}",
            fix="name the question column `question` (or Ragas's user_input, or DeepEval's input); a golden set "
            "in CSV starts with a header such as: id,question,reference,tags",
        )
    if "contexts" in columns and "answer" not in columns:
        raise InputError(
            f"the file has contexts ({columns['contexts']}) but no answer column (looked for "
            + ", ".join(ALIASES["answer"])
            + ")",
            fix="add the answers the contexts were retrieved for (column `answer`), or drop the contexts column",
        )
    used = set(columns.values())
    unused = tuple(n for n in present if n not in used)
    return ColumnMap(columns, unused, _convention(used), _notes(columns, present))


def _convention(used: set[str]) -> str:
    named = [name for name, own in CONVENTIONS.items() if used & own - {"reference"}]
    return named[0] if len(named) == 1 else ("mixed" if named else "the workbench")


def _notes(columns: dict[str, str], present: list[str]) -> list[str]:
    """What the mapping left aside that a user may have meant."""
    notes = []
    for name, aliases in ALIASES.items():
        others = [a for a in aliases if a in present and a != columns.get(name)]
        if others:
            notes.append(f"{', '.join(others)} not used: {name} is read from {columns[name]}")
    if "answer" in columns and "contexts" not in columns:
        notes.append("no contexts column: faithfulness and the context metrics are not applicable")
    return notes
