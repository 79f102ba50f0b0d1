"""Run history: filtered, paged queries over every run, and exports. User input only ever reaches SQL
as bound parameters; the filter builds the WHERE clause from fixed fragments."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
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

    def expression(self, prices: tuple[float, float] = (0.0, 0.0)) -> str:
        """Its SQL over `runs r`; a cost is priced per 1000 (prompt, completion) tokens, NULL without prices."""
        return priced(self.sql or f"r.{self.name}", prices)

    def select(self, neutralise: bool = False, prices: tuple[float, float] = (0.0, 0.0)) -> str:
        """The column in a SELECT. neutralise (CSV): a text cell that a spreadsheet would read as a formula gets a
        leading apostrophe; numbers are untouched."""
        value = self.expression(prices)
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

# A run's tokens: every call of its own, cached ones too (they carry the tokens of the reply they reuse); none
# for a run without calls (an imported answer).
TOKENS_SQL = (
    "(SELECT sum(coalesce(c.prompt_tokens, 0) + coalesce(c.completion_tokens, 0)) FROM llm_calls c "
    "WHERE c.run_id = r.id)"
)
# Its estimated cost: the tokens of every call at their original cost (a replayed call carries the tokens of the
# call that filled the cache), at the prices that priced() writes in; none without prices or without calls.
COST_SQL = (
    "(SELECT CASE WHEN count(*) = 0 THEN NULL ELSE coalesce(sum(coalesce(c.prompt_tokens, 0) * $PROMPT_PRICE "
    "+ coalesce(c.completion_tokens, 0) * $COMPLETION_PRICE), 0) / 1000 END "
    "FROM llm_calls c WHERE c.run_id = r.id)"
)
# The share of its model calls replayed from the response cache (none for a run stored before they were counted).
REPLAYED_SQL = "(CASE WHEN r.n_calls > 0 THEN r.n_replayed / r.n_calls END)"
# The evaluation a run answered an item of (none for a chat, imported or traced run), and its item's tags.
EVALUATION_SQL = "(SELECT min(e.name) FROM eval_items i JOIN eval_runs e ON e.id = i.eval_run_id WHERE i.run_id = r.id)"
TAGS_SQL = (
    "(SELECT array_to_string(list_sort(list_distinct(flatten(list(i.tags) FILTER (WHERE i.tags IS NOT NULL)))), "
    "', ') FROM eval_items i WHERE i.run_id = r.id)"
)
JUDGE_CRITERIA = ("correctness", "helpfulness", "faithfulness")  # the judges' scores in the export


def judge_sql(criterion: str) -> str:
    """The judge's newest valid score of the run on the criterion."""
    return (
        "(SELECT arg_max(s.value, s.created_at) FROM scores s WHERE s.run_id = r.id "
        f"AND s.metric = 'judge_{criterion}' AND s.status = 'ok')"
    )


def priced(sql: str, prices: tuple[float, float]) -> str:
    """sql with the prices per 1000 prompt and completion tokens written in (numbers, never user text); a cost
    is NULL when neither is set."""
    if "$PROMPT_PRICE" not in sql:
        return sql
    prompt, completion = (float(p) for p in prices)
    if not (prompt or completion):
        return "CAST(NULL AS DOUBLE)"
    return sql.replace("$PROMPT_PRICE", repr(prompt)).replace("$COMPLETION_PRICE", repr(completion))


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
    RunColumn("latency_ms", "latency ms", ".0f"),  # from original costs: a replay's is the first computation's
    RunColumn("replayed", "replayed", ".0%", sql=REPLAYED_SQL),  # the share of its calls the cache answered
    RunColumn("tokens", "tokens", ".0f", sql=TOKENS_SQL),
    RunColumn("cost", "cost", ".4f", sql=COST_SQL),
    RunColumn("evaluation", "evaluation", sql=EVALUATION_SQL, text=True),
    RunColumn("conversation_id", "conversation", text=True),  # a turn's conversation; none: a single question
    RunColumn("turn_no", "turn"),
    RunColumn("standalone_question", "standalone question", text=True, listed=False),  # what a turn retrieved for
    RunColumn("tags", "tags", sql=TAGS_SQL, text=True, listed=False),
    *(RunColumn(f"judge_{c}", f"judge {c}", ".2f", sql=judge_sql(c), listed=False) for c in JUDGE_CRITERIA),
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
    evaluations: list[str] = field(default_factory=list)  # names of evaluations whose items the runs answered
    conversations: list[str] = field(default_factory=list)  # the runs that are turns of these conversations
    latency_min_ms: float | None = None
    latency_max_ms: float | None = None
    tokens_min: int | None = None
    tokens_max: int | None = None
    cost_min: float | None = None
    cost_max: float | None = None
    # per 1000 (prompt, completion) tokens: how a cost is estimated (the settings' prices), not a filter of its own
    prices: tuple[float, float] = (0.0, 0.0)

    def to_dict(self) -> dict:
        """The filter as JSON-ready values (a saved view), without the prices: those are the settings' now."""
        values = asdict(self)
        del values["prices"]
        for key in ("since", "until"):
            if values[key] is not None:
                values[key] = values[key].isoformat()
        return values

    @classmethod
    def from_dict(cls, values: dict, prices: tuple[float, float] = (0.0, 0.0)) -> RunFilter:
        """A filter from to_dict's values; keys this version does not know are ignored."""
        known = {f.name for f in fields(cls)} - {"prices"}
        kept = {k: v for k, v in values.items() if k in known}
        for key in ("since", "until"):
            if kept.get(key):
                kept[key] = datetime.fromisoformat(kept[key])
        return cls(**kept, prices=tuple(prices))

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
            ("r.conversation_id", self.conversations),
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
        for sql, low, high in (
            ("r.latency_ms", self.latency_min_ms, self.latency_max_ms),
            (TOKENS_SQL, self.tokens_min, self.tokens_max),
            (priced(COST_SQL, self.prices), self.cost_min, self.cost_max),
        ):
            if low is not None:
                clauses.append(f"{sql} >= ?")
                params.append(low)
            if high is not None:
                clauses.append(f"{sql} <= ?")
                params.append(high)
        if self.evaluations:
            clauses.append(
                "r.id IN (SELECT i.run_id FROM eval_items i JOIN eval_runs e ON e.id = i.eval_run_id "
                "WHERE list_contains(?::VARCHAR[], e.name))"
            )
            params.append(list(self.evaluations))
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


def order_by(run_filter: RunFilter, sort: str = "id", descending: bool = True) -> str:
    """ORDER BY a listed column (its declared SQL; runs without a value last), then the newest first."""
    columns = {c.name: c for c in listed_columns()}
    if sort not in columns:
        raise ValueError(f"cannot sort runs by {sort!r}: by one of {', '.join(columns)}")
    direction = "DESC" if descending else "ASC"
    return f" ORDER BY {columns[sort].expression(run_filter.prices)} {direction} NULLS LAST, r.id DESC"


def find_runs(
    db: Database, run_filter: RunFilter, page: int = 1, page_size: int = 50, sort: str = "id", descending: bool = True
) -> RunPage:
    """One page of runs, newest first, with their judge scores, and how many runs match in all.

    With a text search the filter is evaluated once, for the matching ids (a scan of the text either way);
    without one, the page and the count are two cheap queries.
    """
    offset = (max(page, 1) - 1) * page_size
    if not run_filter.text.strip():
        return RunPage(
            query_runs(db, run_filter, page, page_size, sort=sort, descending=descending), count_runs(db, run_filter)
        )
    where, params = run_filter.where()
    order = order_by(run_filter, sort, descending)
    with db.cursor() as cur:
        ids = cur.execute(f"SELECT id FROM runs r{where}{order}", params).fetchnumpy()["id"]
    page_ids = [int(i) for i in ids[offset : offset + page_size]]
    shown = RunFilter(prices=run_filter.prices)
    rows = query_runs(db, shown, 1, page_size, ids=page_ids, sort=sort, descending=descending) if page_ids else []
    return RunPage(rows, len(ids))


def query_runs(
    db: Database,
    run_filter: RunFilter,
    page: int = 1,
    page_size: int = 50,
    ids: list[int] | None = None,
    sort: str = "id",
    descending: bool = True,
) -> list[dict]:
    """One page of runs (or the runs with these ids), newest first or by a listed column, with their judge
    scores."""
    where, params = run_filter.where()
    if ids is not None:
        where, params = " WHERE list_contains(?::BIGINT[], r.id)", [ids]
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            f"SELECT {', '.join(c.select(prices=run_filter.prices) for c in listed_columns())} FROM runs r{where}"
            f"{order_by(run_filter, sort, descending)} LIMIT ? OFFSET ?",
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
            "evaluations": distinct("SELECT name FROM eval_runs ORDER BY created_at DESC, id DESC"),
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
    columns = ", ".join(c.select(neutralise=fmt == "csv", prices=run_filter.prices) for c in export_columns())
    sql = f"SELECT {columns}{CLAIMS_SQL if fmt == 'jsonl' else ''} FROM runs r{where} ORDER BY r.id DESC"
    with db.cursor() as cur:
        return cur.execute(f"COPY ({sql}) TO '{_quote_path(path)}' {formats[fmt]}", params).fetchone()[0]


def _quote_path(path: str) -> str:
    return str(path).replace("'", "''")


# What the runs can be grouped by: the key of a group, over `runs r` (a tag: one group per tag of the run's item)
GROUPS = {
    "evaluation": EVALUATION_SQL,
    "model": "r.generator_model",
    "tag": "unnest(CASE WHEN len(t.tags) > 0 THEN t.tags ELSE [NULL] END)",
}


def group_runs(db: Database, run_filter: RunFilter, by: str) -> list[dict]:
    """The filtered runs in groups by evaluation, model or tag, the largest first, each with its runs, mean
    faithfulness, p50 and p95 latency (original costs) with the share of calls replayed, tokens in all and per run,
    and cost; a run without one (no evaluation, model or tag) is in the group `None`. A run with several tags counts
    in each of their groups."""
    if by not in GROUPS:
        raise ValueError(f"cannot group runs by {by!r}: by one of {', '.join(GROUPS)}")
    where, params = run_filter.where()
    tags = (
        " LEFT JOIN (SELECT i.run_id, list_distinct(flatten(list(i.tags) FILTER (WHERE i.tags IS NOT NULL))) AS tags "
        "FROM eval_items i GROUP BY i.run_id) t ON t.run_id = r.id"
        if by == "tag"
        else ""
    )
    sql = f"""
        WITH base AS (
            SELECT r.id, r.faithfulness, r.latency_ms, r.n_calls, r.n_replayed, {TOKENS_SQL} AS tokens,
                   {priced(COST_SQL, run_filter.prices)} AS cost, {GROUPS[by]} AS grp
            FROM runs r{tags}{where})
        SELECT grp AS "group", count(*) AS runs, avg(faithfulness) AS faithfulness,
               quantile_cont(latency_ms, 0.5) AS p50_latency_ms, quantile_cont(latency_ms, 0.95) AS p95_latency_ms,
               sum(n_replayed) / nullif(sum(n_calls), 0) AS replayed,
               sum(tokens) AS tokens, avg(tokens) AS tokens_per_run, sum(cost) AS cost
        FROM base GROUP BY grp ORDER BY runs DESC, grp NULLS LAST"""
    with db.cursor() as cur:
        return fetch_dicts(cur, sql, params)
