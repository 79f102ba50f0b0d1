"""Run history: filtered, paged queries over every run, and exports. User input only ever reaches SQL
as bound parameters; the filter builds the WHERE clause from fixed fragments."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from store.db import Database, fetch_dicts


@dataclass(frozen=True)
class RunColumn:
    """A column of the list of runs (the Runs page, `runs`) and of the run export, declared once in RUN_COLUMNS."""

    name: str  # the key of a listed row and the export's column: a runs column, or the alias of `sql`
    label: str  # its heading on the Runs page and in the terminal
    fmt: str = ""  # a format spec for its values (".2f", "%Y-%m-%d %H:%M"); "": as they are
    sql: str | None = None  # its SELECT expression over `runs r`, when it is not the column r.<name>
    text: bool = False  # free text (users', models'): a CSV export neutralises a cell read as a formula
    listed: bool = True  # False: only in exports (too long for the list)
    wide: bool = False  # long text: the terminal shows it last, cut to 80 characters

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"a run column's name is an SQL identifier, not {self.name!r}")

    def select(self, neutralise: bool = False) -> str:
        """The column in a SELECT. neutralise (CSV): a text cell that a spreadsheet would read as a formula gets a
        leading apostrophe; numbers are untouched."""
        value = self.sql or f"r.{self.name}"
        if neutralise and self.text:
            quoted = "''''"  # SQL for a string holding one apostrophe
            value = f"CASE WHEN regexp_matches({value}, '{FORMULA_START}') THEN {quoted} || {value} ELSE {value} END"
        return f"{value} AS {self.name}"

    def show(self, value) -> str:
        """A value as text, in the column's format; n/a for none."""
        return "n/a" if value is None else format(value, self.fmt)


# OWASP's advice on CSV injection: a text cell that a spreadsheet would read as a formula (starting with =, +,
# - or @, also after blanks, or with a tab or carriage return) gets a leading apostrophe; numbers are untouched.
FORMULA_START = r"^(\s*[=+\-@]|[\t\r])"

# The run's columns in the list of runs and the export, in their order (the Runs page adds the judges' scores).
RUN_COLUMNS = (
    RunColumn("id", "id"),
    RunColumn("kind", "kind", text=True),
    RunColumn("pipeline", "pipeline", text=True),  # who wrote an imported answer; none: this workbench
    RunColumn("status", "status", text=True),
    RunColumn("question", "question", text=True, wide=True),
    RunColumn("answer", "answer", text=True, listed=False),
    RunColumn("faithfulness", "faithfulness", ".2f"),
    RunColumn("n_attempts", "attempts"),
    RunColumn("generator_model", "model", text=True),
    RunColumn("latency_ms", "latency ms", ".0f"),
    RunColumn("started_at", "started", "%Y-%m-%d %H:%M"),
)


def listed_columns() -> list[RunColumn]:
    """The columns of the list of runs, read when called (a test may declare one more)."""
    return [c for c in RUN_COLUMNS if c.listed]


def export_columns() -> list[RunColumn]:
    return list(RUN_COLUMNS)


@dataclass
class RunFilter:
    since: datetime | None = None
    until: datetime | None = None
    kinds: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    faithfulness_min: float | None = None
    faithfulness_max: float | None = None
    models: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    text: str = ""
    pipelines: list[str] = field(default_factory=list)  # the pipeline or service (a traced run's service name)

    def where(self) -> tuple[str, list]:
        clauses, params = [], []
        if self.since:
            clauses.append("r.started_at >= ?")
            params.append(self.since)
        if self.until:
            clauses.append("r.started_at < ?")
            params.append(self.until)
        for column, values in (
            ("r.kind", self.kinds),
            ("r.status", self.statuses),
            ("r.generator_model", self.models),
            ("r.pipeline", self.pipelines),
        ):
            if values:
                clauses.append(f"list_contains(?::VARCHAR[], {column})")
                params.append(list(values))
        if self.faithfulness_min is not None:
            clauses.append("r.faithfulness >= ?")
            params.append(self.faithfulness_min)
        if self.faithfulness_max is not None:
            clauses.append("r.faithfulness <= ?")
            params.append(self.faithfulness_max)
        if self.tags:
            clauses.append("r.id IN (SELECT run_id FROM eval_items WHERE list_has_any(tags, ?::VARCHAR[]))")
            params.append(list(self.tags))
        if self.text.strip():
            clauses.append("contains(r.search_text, ?)")
            params.append(self.text.strip().lower())
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


@dataclass
class RunPage:
    rows: list[dict]
    total: int


def find_runs(db: Database, run_filter: RunFilter, page: int = 1, page_size: int = 50) -> RunPage:
    """One page of runs, newest first, with their judge scores, and how many runs match in all.

    With a text search the filter is evaluated once, for the matching ids (a scan of the text either way);
    without one, the page and the count are two cheap queries.
    """
    offset = (max(page, 1) - 1) * page_size
    if not run_filter.text.strip():
        return RunPage(query_runs(db, run_filter, page, page_size), count_runs(db, run_filter))
    where, params = run_filter.where()
    with db.cursor() as cur:
        ids = cur.execute(f"SELECT id FROM runs r{where} ORDER BY id DESC", params).fetchnumpy()["id"]
    page_ids = [int(i) for i in ids[offset : offset + page_size]]
    return RunPage(query_runs(db, RunFilter(), 1, page_size, ids=page_ids) if page_ids else [], len(ids))


def query_runs(
    db: Database, run_filter: RunFilter, page: int = 1, page_size: int = 50, ids: list[int] | None = None
) -> list[dict]:
    """One page of runs (or the runs with these ids), newest first, with their judge scores."""
    where, params = run_filter.where()
    if ids is not None:
        where, params = " WHERE list_contains(?::BIGINT[], r.id)", [ids]
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            f"SELECT {', '.join(c.select() for c in listed_columns())} FROM runs r{where} "
            "ORDER BY r.id DESC LIMIT ? OFFSET ?",
            params + [page_size, 0 if ids is not None else (max(page, 1) - 1) * page_size],
        )
        if rows:
            low, high = min(r["id"] for r in rows), max(r["id"] for r in rows)
            scores = cur.execute(
                "SELECT run_id, metric, value FROM scores WHERE run_id BETWEEN ? AND ? AND "
                "list_contains(?::BIGINT[], run_id) AND metric LIKE 'judge_%' AND status = 'ok'",
                [low, high, [r["id"] for r in rows]],
            ).fetchall()
            by_run: dict[int, dict] = {}
            for run_id, metric, value in scores:
                by_run.setdefault(run_id, {})[metric.removeprefix("judge_")] = value
            for row in rows:
                row["judge"] = by_run.get(row["id"], {})
    return rows


def count_runs(db: Database, run_filter: RunFilter) -> int:
    where, params = run_filter.where()
    with db.cursor() as cur:
        return cur.execute(f"SELECT count(*) FROM runs r{where}", params).fetchone()[0]


def filter_choices(db: Database) -> dict[str, list[str]]:
    with db.cursor() as cur:

        def distinct(sql):
            return [r[0] for r in cur.execute(sql).fetchall() if r[0] is not None]

        return {
            "kinds": distinct("SELECT DISTINCT kind FROM runs ORDER BY 1"),
            "statuses": distinct("SELECT DISTINCT status FROM runs ORDER BY 1"),
            "models": distinct("SELECT DISTINCT generator_model FROM runs ORDER BY 1"),
            "pipelines": distinct("SELECT DISTINCT pipeline FROM runs ORDER BY 1"),
            "tags": distinct("SELECT DISTINCT unnest(tags) FROM eval_items ORDER BY 1"),
        }


CLAIMS_SQL = """,
           (SELECT list(struct_pack(claim_no := c.claim_no, text := c.text, verdict := c.verdict,
                                    verifier := c.verifier, evidence := c.evidence, reason := c.reason)
                        ORDER BY c.claim_no)
            FROM claims c WHERE c.run_id = r.id AND c.attempt_no = r.final_attempt) AS claims"""


def export_runs(db: Database, run_filter: RunFilter, fmt: str, path: str) -> int:
    """Write the filtered runs to path as csv, parquet or jsonl (with nested claims); return the row count."""
    formats = {"csv": "(FORMAT csv, HEADER true)", "parquet": "(FORMAT parquet)", "jsonl": "(FORMAT json)"}
    if fmt not in formats:
        raise ValueError(f"unknown export format {fmt!r}")
    where, params = run_filter.where()
    columns = ", ".join(c.select(neutralise=fmt == "csv") for c in export_columns())
    sql = f"SELECT {columns}{CLAIMS_SQL if fmt == 'jsonl' else ''} FROM runs r{where} ORDER BY r.id DESC"
    with db.cursor() as cur:
        return cur.execute(f"COPY ({sql}) TO '{_quote_path(path)}' {formats[fmt]}", params).fetchone()[0]


def _quote_path(path: str) -> str:
    return str(path).replace("'", "''")
