"""Append-only migrations: each is a named function, registered where it is defined (`@migration`), applied once
in its own transaction and recorded by its name.

Migrations run in the order they are defined in this file. Never edit, rename or reorder an applied migration;
add a new one, decorated, at the end of the file.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from store.errors import StoreTooNew

Migration = Callable[[duckdb.DuckDBPyConnection], None]
MIGRATIONS: list[Migration] = []  # in definition order, filled by @migration


def migration(function: Migration) -> Migration:
    """Register a migration (as simonw/llm does): it runs after every migration defined above it."""
    if any(m.__name__ == function.__name__ for m in MIGRATIONS):
        raise ValueError(f"two migrations are named {function.__name__!r}")
    MIGRATIONS.append(function)
    return function


@migration
def m001_knowledge_base(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE SEQUENCE documents_id_seq;
        CREATE TABLE documents (
            id BIGINT PRIMARY KEY DEFAULT nextval('documents_id_seq'),
            path VARCHAR NOT NULL UNIQUE,
            title VARCHAR,
            content_hash VARCHAR NOT NULL,
            embed_model VARCHAR NOT NULL,
            chunk_size INTEGER NOT NULL,
            chunk_overlap INTEGER NOT NULL,
            n_chunks INTEGER NOT NULL,
            n_chars INTEGER NOT NULL,
            ingested_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE SEQUENCE chunks_id_seq;
        CREATE TABLE chunks (
            id BIGINT PRIMARY KEY DEFAULT nextval('chunks_id_seq'),
            document_id BIGINT NOT NULL,
            ordinal INTEGER NOT NULL,
            text VARCHAR NOT NULL,
            start_char INTEGER,
            end_char INTEGER,
            embedding FLOAT[] NOT NULL
        );
        CREATE INDEX chunks_document ON chunks(document_id);
    """)


@migration
def m002_run_log(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE SEQUENCE runs_id_seq;
        CREATE TABLE runs (
            id BIGINT PRIMARY KEY DEFAULT nextval('runs_id_seq'),
            kind VARCHAR NOT NULL,
            question VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            answer VARCHAR,
            faithfulness DOUBLE,
            n_claims INTEGER,
            n_supported INTEGER,
            n_attempts INTEGER NOT NULL DEFAULT 0,
            final_attempt INTEGER,
            rewritten_query VARCHAR,
            abstain_reason VARCHAR,
            error VARCHAR,
            generator_model VARCHAR,
            config JSON,
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP,
            latency_ms DOUBLE
        );
        CREATE TABLE context_grades (
            run_id BIGINT NOT NULL, round INTEGER NOT NULL, query VARCHAR NOT NULL,
            relevant BOOLEAN, reason VARCHAR
        );
        CREATE TABLE retrievals (
            run_id BIGINT NOT NULL, round INTEGER NOT NULL, query VARCHAR NOT NULL,
            rank INTEGER NOT NULL, chunk_id BIGINT NOT NULL, score DOUBLE NOT NULL, cited BOOLEAN
        );
        CREATE TABLE attempts (
            run_id BIGINT NOT NULL, attempt_no INTEGER NOT NULL, strict BOOLEAN NOT NULL,
            answer VARCHAR, status VARCHAR NOT NULL, faithfulness DOUBLE,
            n_claims INTEGER, n_supported INTEGER, failed_claims JSON, error VARCHAR
        );
        CREATE TABLE claims (
            run_id BIGINT NOT NULL, attempt_no INTEGER NOT NULL, claim_no INTEGER NOT NULL,
            text VARCHAR NOT NULL, verdict VARCHAR NOT NULL, verifier VARCHAR,
            evidence_chunk_id BIGINT, span_start INTEGER, span_end INTEGER,
            evidence VARCHAR, reason VARCHAR
        );
        CREATE INDEX retrievals_run ON retrievals(run_id);
        CREATE INDEX attempts_run ON attempts(run_id);
        CREATE INDEX claims_run ON claims(run_id);
        CREATE INDEX grades_run ON context_grades(run_id);
    """)


@migration
def m003_llm_calls_and_cache(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE SEQUENCE llm_calls_id_seq;
        CREATE TABLE llm_calls (
            id BIGINT PRIMARY KEY DEFAULT nextval('llm_calls_id_seq'),
            run_id BIGINT,
            stage VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            digest VARCHAR,
            prompt_hash VARCHAR,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            latency_ms DOUBLE,
            cache_hit BOOLEAN NOT NULL,
            error VARCHAR,
            started_at TIMESTAMP NOT NULL
        );
        CREATE INDEX llm_calls_run ON llm_calls(run_id);
        CREATE TABLE llm_cache (
            key VARCHAR PRIMARY KEY,
            model VARCHAR NOT NULL,
            digest VARCHAR NOT NULL,
            response JSON NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
    """)


@migration
def m004_evaluations(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE SEQUENCE eval_runs_id_seq;
        CREATE TABLE eval_runs (
            id BIGINT PRIMARY KEY DEFAULT nextval('eval_runs_id_seq'),
            name VARCHAR NOT NULL UNIQUE,
            dataset VARCHAR NOT NULL,
            dataset_hash VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            config JSON NOT NULL,
            judge_model VARCHAR NOT NULL,
            judge_digest VARCHAR NOT NULL,
            judge_prompt_version VARCHAR NOT NULL,
            n_items INTEGER NOT NULL,
            concurrency INTEGER,
            wall_s DOUBLE NOT NULL DEFAULT 0,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            finished_at TIMESTAMP
        );
        CREATE TABLE eval_items (
            eval_run_id BIGINT NOT NULL,
            item_id VARCHAR NOT NULL,
            run_id BIGINT,
            status VARCHAR NOT NULL,
            question VARCHAR NOT NULL,
            reference VARCHAR,
            tags VARCHAR[],
            error VARCHAR,
            wall_ms DOUBLE,
            finished_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (eval_run_id, item_id)
        );
        CREATE TABLE scores (
            eval_run_id BIGINT,
            item_id VARCHAR,
            run_id BIGINT NOT NULL,
            metric VARCHAR NOT NULL,
            value DOUBLE,
            status VARCHAR NOT NULL,
            explanation VARCHAR,
            details JSON,
            scorer_model VARCHAR,
            scorer_digest VARCHAR,
            prompt_version VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE INDEX scores_eval ON scores(eval_run_id);
        CREATE INDEX scores_run ON scores(run_id);
    """)


@migration
def m005_detector_benchmarks(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE SEQUENCE detector_runs_id_seq;
        CREATE TABLE detector_runs (
            id BIGINT PRIMARY KEY DEFAULT nextval('detector_runs_id_seq'),
            dataset VARCHAR NOT NULL,
            verifier VARCHAR NOT NULL,
            claims_from VARCHAR NOT NULL,
            scope VARCHAR NOT NULL,
            precheck BOOLEAN NOT NULL,
            settings JSON NOT NULL,
            n INTEGER NOT NULL,
            metrics JSON NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE detector_results (
            detector_run_id BIGINT NOT NULL,
            record_id VARCHAR NOT NULL,
            label INTEGER NOT NULL,
            predicted INTEGER NOT NULL,
            faithfulness DOUBLE,
            n_claims INTEGER NOT NULL,
            decided_by_precheck INTEGER NOT NULL,
            llm_calls INTEGER NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            latency_ms DOUBLE NOT NULL,
            error VARCHAR,
            verdicts JSON
        );
    """)


@migration
def m006_regression_alerts(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE SEQUENCE alerts_id_seq;
        CREATE TABLE alerts (
            id BIGINT PRIMARY KEY DEFAULT nextval('alerts_id_seq'),
            eval_run_id BIGINT NOT NULL,
            baseline_run_id BIGINT,
            kind VARCHAR NOT NULL,
            metric VARCHAR NOT NULL,
            slice VARCHAR NOT NULL,
            baseline_value DOUBLE,
            new_value DOUBLE,
            delta DOUBLE,
            ci_low DOUBLE,
            ci_high DOUBLE,
            n INTEGER,
            component VARCHAR,
            message VARCHAR NOT NULL,
            config_diff JSON,
            worst_items JSON,
            status VARCHAR NOT NULL DEFAULT 'open',
            comment VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            acknowledged_at TIMESTAMP
        );
        CREATE TABLE baseline_pins (
            dataset VARCHAR PRIMARY KEY,
            eval_run_id BIGINT NOT NULL,
            pinned_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
    """)


@migration
def m007_search_text_and_zonemaps(con: duckdb.DuckDBPyConnection) -> None:
    """Runs get a lower-cased search column (case-insensitive text search without lower() per query); the
    run_id indexes go: rows are appended in run order, so DuckDB's zone maps find a run's rows faster
    than the ART index did (9 ms vs 19 ms per drilldown at 1,000,000 runs)."""
    con.execute("""
        ALTER TABLE runs ADD COLUMN search_text VARCHAR;
        UPDATE runs SET search_text = lower(question || ' ' || coalesce(answer, ''));
        DROP INDEX IF EXISTS retrievals_run;
        DROP INDEX IF EXISTS attempts_run;
        DROP INDEX IF EXISTS claims_run;
        DROP INDEX IF EXISTS grades_run;
        DROP INDEX IF EXISTS llm_calls_run;
        DROP INDEX IF EXISTS scores_run;
        DROP INDEX IF EXISTS scores_eval;
    """)


@migration
def m008_annotations_and_corrections(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE TABLE ratings (
            run_id BIGINT NOT NULL,
            annotator VARCHAR NOT NULL,
            correctness INTEGER NOT NULL CHECK (correctness BETWEEN 1 AND 5),
            helpfulness INTEGER NOT NULL CHECK (helpfulness BETWEEN 1 AND 5),
            faithfulness INTEGER NOT NULL CHECK (faithfulness BETWEEN 1 AND 5),
            comment VARCHAR,
            rated_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (run_id, annotator)
        );
        CREATE TABLE claim_ratings (
            run_id BIGINT NOT NULL,
            attempt_no INTEGER NOT NULL,
            claim_no INTEGER NOT NULL,
            annotator VARCHAR NOT NULL,
            verdict VARCHAR NOT NULL,
            rated_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (run_id, attempt_no, claim_no, annotator)
        );
        CREATE SEQUENCE corrections_id_seq;
        CREATE TABLE corrections (
            id BIGINT PRIMARY KEY DEFAULT nextval('corrections_id_seq'),
            criterion VARCHAR NOT NULL,
            run_id BIGINT NOT NULL,
            question VARCHAR NOT NULL,
            answer_excerpt VARCHAR NOT NULL,
            human_score INTEGER NOT NULL,
            judge_score INTEGER,
            why VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE correction_sets (
            version INTEGER PRIMARY KEY,
            correction_ids BIGINT[] NOT NULL,
            note VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE rejudged (
            correction_version INTEGER NOT NULL,
            run_id BIGINT NOT NULL,
            metric VARCHAR NOT NULL,
            value DOUBLE,
            status VARCHAR NOT NULL,
            explanation VARCHAR,
            corrections_used BIGINT[],
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
    """)


@migration
def m009_call_texts_and_spans(con: duckdb.DuckDBPyConnection) -> None:
    """Every model call keeps its prompt and completion text, stored once per distinct text (llm_texts, keyed by
    the text's sha256) so a million runs that repeat the same prompts stay small; calls say where they came
    from (origin: chat, evaluation, rejudge, detector, ingest) and under which span; spans form each run's
    trace tree."""
    con.execute("""
        CREATE TABLE llm_texts (
            hash VARCHAR PRIMARY KEY,
            text VARCHAR NOT NULL
        );
        ALTER TABLE llm_calls ADD COLUMN eval_run_id BIGINT;
        ALTER TABLE llm_calls ADD COLUMN origin VARCHAR;
        ALTER TABLE llm_calls ADD COLUMN backend VARCHAR;
        ALTER TABLE llm_calls ADD COLUMN prompt_text_hash VARCHAR;
        ALTER TABLE llm_calls ADD COLUMN completion_text_hash VARCHAR;
        ALTER TABLE llm_calls ADD COLUMN span_id VARCHAR;
        CREATE TABLE spans (
            run_id BIGINT,
            eval_run_id BIGINT,
            span_id VARCHAR NOT NULL,
            parent_id VARCHAR,
            name VARCHAR NOT NULL,
            started_at TIMESTAMP NOT NULL,
            latency_ms DOUBLE,
            error VARCHAR,
            attributes JSON
        );
    """)


@migration
def m010_journal_entries(con: duckdb.DuckDBPyConnection) -> None:
    """Entries of the local journal already written to the store, so a replay is idempotent."""
    con.execute("""
        CREATE TABLE journal_entries (
            id VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL,
            created_at TIMESTAMP,
            replayed_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
    """)


@migration
def m011_chunk_flags(con: duckdb.DuckDBPyConnection) -> None:
    """Prompt-injection flags of chunks (the names of the patterns a chunk matched), set at ingest."""
    con.execute("""
        CREATE TABLE chunk_flags (
            chunk_id BIGINT PRIMARY KEY,
            document_id BIGINT NOT NULL,
            flags VARCHAR[] NOT NULL,
            excerpt VARCHAR
        );
    """)


@migration
def m013_attempts_on_topic(con: duckdb.DuckDBPyConnection) -> None:
    """Each attempt's on-topic check: does the answer address the question (NULL: not checked or undecided),
    the question-answer similarity, which step decided (embedding or model), why, and the question's terms
    the answer does not mention."""
    con.execute("""
        ALTER TABLE attempts ADD COLUMN on_topic BOOLEAN;
        ALTER TABLE attempts ADD COLUMN on_topic_score DOUBLE;
        ALTER TABLE attempts ADD COLUMN on_topic_method VARCHAR;
        ALTER TABLE attempts ADD COLUMN on_topic_reason VARCHAR;
        ALTER TABLE attempts ADD COLUMN missing_terms JSON;
    """)


@migration
def m014_retired_documents(con: duckdb.DuckDBPyConnection) -> None:
    """A document deleted from (or replaced in) the knowledge base whose chunks stored runs still cite: its id
    (the kept chunks' document_id), path and title, so old drilldowns still show their evidence and source."""
    con.execute("""
        CREATE TABLE retired_documents (
            id BIGINT PRIMARY KEY,
            path VARCHAR NOT NULL,
            title VARCHAR,
            ingested_at TIMESTAMP NOT NULL,
            retired_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            reason VARCHAR NOT NULL
        );
    """)


@migration
def m015_ratings_grounding_topicality(con: duckdb.DuckDBPyConnection) -> None:
    """People rate the judge's grounding and topicality too. DuckDB cannot add a column with a CHECK constraint,
    so the ratings table is rebuilt with two more; ratings saved before have none (NULL)."""
    con.execute("""
        CREATE TABLE ratings_new (
            run_id BIGINT NOT NULL,
            annotator VARCHAR NOT NULL,
            correctness INTEGER NOT NULL CHECK (correctness BETWEEN 1 AND 5),
            helpfulness INTEGER NOT NULL CHECK (helpfulness BETWEEN 1 AND 5),
            faithfulness INTEGER NOT NULL CHECK (faithfulness BETWEEN 1 AND 5),
            comment VARCHAR,
            rated_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            grounding INTEGER CHECK (grounding BETWEEN 1 AND 5),
            topicality INTEGER CHECK (topicality BETWEEN 1 AND 5),
            PRIMARY KEY (run_id, annotator)
        );
        INSERT INTO ratings_new (run_id, annotator, correctness, helpfulness, faithfulness, comment, rated_at)
            SELECT run_id, annotator, correctness, helpfulness, faithfulness, comment, rated_at FROM ratings;
        DROP TABLE ratings;
        ALTER TABLE ratings_new RENAME TO ratings;
    """)


@migration
def m016_call_texts_by_id(con: duckdb.DuckDBPyConnection) -> None:
    """Call texts get sequential ids, numbered in the order of their first use, and lose the index on their hash:
    at a million runs every probe of that index cost about a millisecond when a run was saved (see
    store/key_index.py, which keeps `key`, the hash's first 64 bits, in memory). Calls point at their texts by
    id; the hash columns stay for exports and checks."""
    con.execute("""
        CREATE TABLE llm_texts_by_id AS
            WITH used AS (
                SELECT h, min(id) AS first_call FROM (
                    SELECT prompt_text_hash AS h, id FROM llm_calls
                    UNION ALL SELECT completion_text_hash, id FROM llm_calls
                ) WHERE h IS NOT NULL GROUP BY h
            )
            SELECT row_number() OVER (ORDER BY used.first_call NULLS LAST, t.hash) AS id,
                   ('0x' || substr(t.hash, 1, 16))::UBIGINT AS key, t.hash, t.text
            FROM llm_texts t LEFT JOIN used ON used.h = t.hash;
        DROP TABLE llm_texts;
        ALTER TABLE llm_texts_by_id RENAME TO llm_texts;
        ALTER TABLE llm_calls ADD COLUMN prompt_text_id BIGINT;
        ALTER TABLE llm_calls ADD COLUMN completion_text_id BIGINT;
    """)
    link_call_texts(con)
    first = con.execute("SELECT coalesce(max(id), 0) + 1 FROM llm_texts").fetchone()[0]
    con.execute(f"CREATE SEQUENCE llm_texts_id_seq START WITH {int(first)}")


def link_call_texts(con: duckdb.DuckDBPyConnection) -> None:
    """Point every call at its texts' ids by their hashes (calls stored before texts had ids)."""
    for column in ("prompt", "completion"):
        con.execute(f"""
            UPDATE llm_calls SET {column}_text_id = t.id
            FROM (SELECT hash, min(id) AS id FROM llm_texts GROUP BY hash) t
            WHERE t.hash = llm_calls.{column}_text_hash AND llm_calls.{column}_text_id IS NULL""")


@migration
def m017_cache_by_id(con: duckdb.DuckDBPyConnection) -> None:
    """The response cache loses the primary key on its random key, as the call texts did (m016): entries get
    sequential ids and `key64`, the first 64 bits of the key's sha256, which store/key_index.py keeps in memory."""
    con.execute("""
        CREATE TABLE llm_cache_by_id AS
            SELECT row_number() OVER (ORDER BY created_at, key) AS id,
                   ('0x' || substr(sha256(key), 1, 16))::UBIGINT AS key64, key, model, digest, response, created_at
            FROM llm_cache;
        DROP TABLE llm_cache;
        ALTER TABLE llm_cache_by_id RENAME TO llm_cache;
        ALTER TABLE llm_cache ALTER COLUMN created_at SET DEFAULT current_timestamp;
    """)
    first = con.execute("SELECT coalesce(max(id), 0) + 1 FROM llm_cache").fetchone()[0]
    con.execute(f"CREATE SEQUENCE llm_cache_id_seq START WITH {int(first)}")


@migration
def m018_cache_in_texts(con: duckdb.DuckDBPyConnection) -> None:
    """Response-cache entries become rows of llm_texts (`hash` holds the full key, `cache_key64` what
    store/key_index.py keeps in memory, `text` the model, digest and response as JSON), written in the same
    statement as a run's call texts: each table a save touches costs about 0.7 ms. The view llm_cache shows them
    as before."""
    con.execute("""
        ALTER TABLE llm_texts ADD COLUMN cache_key64 UBIGINT;
        INSERT INTO llm_texts (id, key, hash, text, cache_key64)
            SELECT nextval('llm_texts_id_seq'), NULL, key,
                   json_object('model', model, 'digest', digest, 'response', json(response))::VARCHAR, key64
            FROM (SELECT * FROM llm_cache ORDER BY id);
        DROP TABLE llm_cache;
        DROP SEQUENCE llm_cache_id_seq;
        CREATE VIEW llm_cache AS
            SELECT id, hash AS key, text ->> 'model' AS model, text ->> 'digest' AS digest,
                   text -> 'response' AS response
            FROM llm_texts WHERE cache_key64 IS NOT NULL;
    """)


@migration
def m019_grades_on_runs(con: duckdb.DuckDBPyConnection) -> None:
    """A run's context grades (one per retrieval round, read only with their run) become a JSON list on the run's
    row, so a save touches one table fewer (each costs about 0.8 ms of statement and commit)."""
    con.execute("""
        ALTER TABLE runs ADD COLUMN grades JSON;
        UPDATE runs SET grades = g.grades
            FROM (SELECT run_id, to_json(list(json_object('round', round, 'query', query, 'relevant', relevant,
                                                          'reason', reason) ORDER BY round)) AS grades
                  FROM context_grades GROUP BY run_id) g
            WHERE g.run_id = runs.id;
        DROP TABLE context_grades;
    """)


@migration
def m020_given_answers(con: duckdb.DuckDBPyConnection) -> None:
    """Runs of answers written elsewhere: the pipeline that wrote a run's answer (runs, and an evaluation of such
    answers), and the text and source of each context given with it (retrievals; its chunk_id is -rank, as no
    chunk of the knowledge base holds it)."""
    con.execute("""
        ALTER TABLE runs ADD COLUMN pipeline VARCHAR;
        ALTER TABLE eval_runs ADD COLUMN pipeline VARCHAR;
        ALTER TABLE retrievals ADD COLUMN context_text VARCHAR;
        ALTER TABLE retrievals ADD COLUMN context_source VARCHAR;
    """)


def applied(con: duckdb.DuckDBPyConnection) -> list[str]:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )
    return [row[0] for row in con.execute("SELECT name FROM schema_migrations ORDER BY applied_at, name").fetchall()]


def unknown_migrations(done) -> list[str]:
    known = {m.__name__ for m in MIGRATIONS}
    return sorted(set(done) - known)


def database_path(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return (row[0] if row else None) or ":memory:"


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now. A store that records a migration
    this version does not know was written by a newer version: StoreTooNew, before anything is changed."""
    done = set(applied(con))
    unknown = unknown_migrations(done)
    if unknown:
        raise StoreTooNew(database_path(con), unknown)
    new = []
    for step in MIGRATIONS:
        if step.__name__ in done:
            continue
        con.begin()
        try:
            step(con)
            con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [step.__name__])
        except BaseException:
            con.rollback()
            raise
        con.commit()
        new.append(step.__name__)
    return new


@migration
def m021_similarity_scales(con: duckdb.DuckDBPyConnection) -> None:
    """The embedding model's own similarity scale: cosine similarities of questions about unrelated things with
    the knowledge base's chunks, measured once per embedding model (name and digest) and knowledge base
    (fingerprint). `sample` keeps evenly spaced order statistics of all `n_pairs` similarities, sorted."""
    con.execute("""
        CREATE TABLE similarity_scales (
            embed_model VARCHAR NOT NULL,
            digest VARCHAR NOT NULL,
            kb_fingerprint VARCHAR NOT NULL,
            n_pairs INTEGER NOT NULL,
            n_probes INTEGER NOT NULL,
            n_chunks INTEGER NOT NULL,
            median DOUBLE NOT NULL,
            sample DOUBLE[] NOT NULL,
            measured_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (embed_model, digest, kb_fingerprint)
        );
    """)


@migration
def m022_received_traces(con: duckdb.DuckDBPyConnection) -> None:
    """Traces received from other applications over OpenTelemetry (`collect`): every span as it arrived, keyed by
    trace and span id so a batch sent twice is stored once; and, on runs, the trace a traced run was made from
    (one run per trace: the online worker skips a trace that has one)."""
    con.execute("""
        CREATE TABLE received_spans (
            trace_id VARCHAR NOT NULL,
            span_id VARCHAR NOT NULL,
            parent_id VARCHAR,
            name VARCHAR NOT NULL,
            span_kind VARCHAR,
            service VARCHAR NOT NULL,
            started_at TIMESTAMPTZ NOT NULL,
            ended_at TIMESTAMPTZ,
            status_code VARCHAR,
            status_message VARCHAR,
            attributes JSON,
            received_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (trace_id, span_id)
        );
        ALTER TABLE runs ADD COLUMN trace_id VARCHAR;
    """)


@migration
def m023_traced_alerts(con: duckdb.DuckDBPyConnection) -> None:
    """Alerts on traced runs' daily faithfulness (pipeline/collect/traced.py): an alert belongs to an evaluation
    run, or to a service's day (service, service_day; eval_run_id NULL; not `day`, the Parquet export's partition
    column). One alert of a kind per service and day: the check inserts only what is not there
    (store.alerts.open_traced_alerts)."""
    con.execute("""
        ALTER TABLE alerts ALTER COLUMN eval_run_id DROP NOT NULL;
        ALTER TABLE alerts ADD COLUMN service VARCHAR;
        ALTER TABLE alerts ADD COLUMN service_day DATE;
    """)


@migration
def m024_run_views(con: duckdb.DuckDBPyConnection) -> None:
    """Saved views of the Runs page: a name, the filter as JSON (store.history.RunFilter.to_dict) and what the
    runs are grouped by (none: not grouped); saving a name again replaces its view."""
    con.execute("""
        CREATE TABLE run_views (
            name VARCHAR PRIMARY KEY,
            filter JSON NOT NULL,
            group_by VARCHAR,
            saved_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
    """)


@migration
def m025_datasets(con: duckdb.DuckDBPyConnection) -> None:
    """Datasets kept in the store (store/datasets.py): every save of a name is a new immutable version with its
    items (GoldenItem as JSON, in order) and a content hash; an evaluation pins the version it ran over
    (eval_runs.dataset_version; NULL for one over a file, as before)."""
    con.execute("""
        CREATE TABLE dataset_versions (
            name VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            content_hash VARCHAR NOT NULL,
            n_items INTEGER NOT NULL,
            origin VARCHAR NOT NULL,
            note VARCHAR,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (name, version)
        );
        CREATE TABLE dataset_items (
            name VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            position INTEGER NOT NULL,
            item_id VARCHAR NOT NULL,
            item JSON NOT NULL,
            PRIMARY KEY (name, version, position)
        );
        ALTER TABLE eval_runs ADD COLUMN dataset_version INTEGER;
    """)


@migration
def m026_synth_jobs(con: duckdb.DuckDBPyConnection) -> None:
    """Golden sets synthesised from the knowledge base (`synth`, store/synth.py): a job per run of a name (its size,
    the kinds' shares, the seed, its plan of which chunks each candidate is written from, and the dataset version it
    was saved as once finished), and every candidate it wrote, kept or dropped by a gate with the reason, with the
    model calls and tokens it cost. One row per (job, position): a resumed job writes each candidate once."""
    con.execute("""
        CREATE SEQUENCE synth_jobs_id_seq;
        CREATE TABLE synth_jobs (
            id BIGINT PRIMARY KEY DEFAULT nextval('synth_jobs_id_seq'),
            name VARCHAR NOT NULL,
            n INTEGER NOT NULL,
            shares JSON NOT NULL,
            seed BIGINT NOT NULL,
            plan JSON NOT NULL,
            config JSON NOT NULL,
            status VARCHAR NOT NULL,
            dataset_version INTEGER,
            started_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            finished_at TIMESTAMP
        );
        CREATE TABLE synth_candidates (
            job_id BIGINT NOT NULL,
            position INTEGER NOT NULL,
            kind VARCHAR NOT NULL,
            chunk_ids BIGINT[] NOT NULL,
            question VARCHAR,
            reference VARCHAR,
            status VARCHAR NOT NULL,
            gate VARCHAR,
            reason VARCHAR,
            note VARCHAR,
            details JSON,
            model VARCHAR NOT NULL,
            model_digest VARCHAR,
            prompt_name VARCHAR NOT NULL,
            prompt_version VARCHAR NOT NULL,
            calls INTEGER NOT NULL,
            cache_hits INTEGER NOT NULL,
            prompt_tokens BIGINT NOT NULL,
            completion_tokens BIGINT NOT NULL,
            written_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (job_id, position)
        );
    """)


@migration
def m027_sweeps(con: duckdb.DuckDBPyConnection) -> None:
    """Experiments (`sweep`, store/sweeps.py): a sweep per name (the dataset identity and the items it runs over, its
    grid of settings and values in order, the reference combination its leaderboard tests against, its status) and
    one row per combination (its settings, the evaluation it runs as, that evaluation's run once started, the
    separate index it retrieves from when it changes the chunking or the embedding model, its status)."""
    con.execute("""
        CREATE SEQUENCE sweeps_id_seq;
        CREATE TABLE sweeps (
            id BIGINT PRIMARY KEY DEFAULT nextval('sweeps_id_seq'),
            name VARCHAR NOT NULL UNIQUE,
            dataset VARCHAR NOT NULL,
            dataset_version INTEGER,
            dataset_hash VARCHAR NOT NULL,
            items_hash VARCHAR NOT NULL,
            n_items INTEGER NOT NULL,
            grid JSON NOT NULL,
            metrics JSON,
            reference VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            finished_at TIMESTAMP
        );
        CREATE TABLE sweep_combinations (
            sweep_id BIGINT NOT NULL,
            position INTEGER NOT NULL,
            label VARCHAR NOT NULL,
            settings JSON NOT NULL,
            eval_name VARCHAR NOT NULL,
            eval_run_id BIGINT,
            index_fingerprint VARCHAR,
            status VARCHAR NOT NULL,
            wall_s DOUBLE,
            started_at TIMESTAMP,
            finished_at TIMESTAMP,
            PRIMARY KEY (sweep_id, position)
        );
    """)


@migration
def m028_judge_repeats(con: duckdb.DuckDBPyConnection) -> None:
    """Every repeat of a judge criterion scored more than once (setting judge_repeats, K > 1): its value, or its
    status and reason when the reply was invalid, and the sampling seed it was asked with. The item's row in
    `scores` holds the mean of its valid repeats; an evaluation judged once has no rows here."""
    con.execute("""
        CREATE TABLE judge_repeats (
            eval_run_id BIGINT NOT NULL,
            item_id VARCHAR NOT NULL,
            metric VARCHAR NOT NULL,
            repeat INTEGER NOT NULL,
            seed BIGINT,
            value DOUBLE,
            status VARCHAR NOT NULL,
            explanation VARCHAR,
            PRIMARY KEY (eval_run_id, item_id, metric, repeat)
        );
    """)


@migration
def m029_conversations(con: duckdb.DuckDBPyConnection) -> None:
    """Conversations (follow-up questions): a run that is a turn of one carries the conversation's name (shared by
    its turns; the chat page makes one per conversation, `ask --conversation NAME` takes the name given), its
    position in it, and the standalone question retrieval used (the follow-up rewritten from the earlier turns, or
    the question as asked). Other runs leave the three NULL."""
    con.execute("""
        ALTER TABLE runs ADD COLUMN conversation_id VARCHAR;
        ALTER TABLE runs ADD COLUMN turn_no INTEGER;
        ALTER TABLE runs ADD COLUMN standalone_question VARCHAR;
    """)


@migration
def m030_trimmed_attempts(con: duckdb.DuckDBPyConnection) -> None:
    """An attempt made by dropping the unsupported sentences of an earlier one (setting repair = drop, or auto on
    the sequential schedule) names that attempt and keeps the sentences it dropped; other attempts leave them
    NULL."""
    con.execute("""
        ALTER TABLE attempts ADD COLUMN trimmed_from INTEGER;
        ALTER TABLE attempts ADD COLUMN dropped JSON;
    """)


@migration
def m031_trace_conventions(con: duckdb.DuckDBPyConnection) -> None:
    """A received span's events (OpenTelemetry span events: a model's messages, a vector store's results), as a
    JSON list of {name, attributes}; and, on runs, the tracing conventions a traced run's trace was read in
    (pipeline/collect/conventions: openinference, otel_genai, openllmetry, mapping; several joined by '+')."""
    con.execute("""
        ALTER TABLE received_spans ADD COLUMN events JSON;
        ALTER TABLE runs ADD COLUMN trace_convention VARCHAR;
    """)


@migration
def m032_replayed_costs(con: duckdb.DuckDBPyConnection) -> None:
    """A replayed call (a response-cache hit) carries the latency and tokens of the call that filled the entry, and
    when that call was made (first_computed_at). Hits stored before kept the time of the store read as their
    latency: that was no cost of computing the reply, so it is cleared (unknown). A run counts its model calls and
    those replayed, and keeps when its replayed replies were first computed; an attempt keeps the sampling seed it
    was generated with."""
    con.execute("""
        ALTER TABLE llm_calls ADD COLUMN first_computed_at TIMESTAMP;
        UPDATE llm_calls SET latency_ms = NULL WHERE cache_hit;
        ALTER TABLE runs ADD COLUMN n_calls INTEGER;
        ALTER TABLE runs ADD COLUMN n_replayed INTEGER;
        ALTER TABLE runs ADD COLUMN replayed_from TIMESTAMP;
        ALTER TABLE attempts ADD COLUMN seed INTEGER;
    """)


@migration
def m033_retrieval_spans(con: duckdb.DuckDBPyConnection) -> None:
    """The span of the run's trace that retrieved each chunk (the `retrieve` step of its round), so the trace
    explorer shows a retriever span's documents with their text, score and source; NULL for runs stored before."""
    con.execute("ALTER TABLE retrievals ADD COLUMN span_id VARCHAR")


@migration
def m034_judge_alignment(con: duckdb.DuckDBPyConnection) -> None:
    """Judge prompt versions fitted on people's ratings (`align`): per criterion, each accepted version's rubric
    clarification and few-shot examples, its held-out agreement and gain with their intervals, and the rated runs it
    was fitted on; `judge_prompt_active` names the version each criterion's judge uses (none: the built-in rubric).
    `alignment_steps` keeps every finished step of an alignment (a fold's clarification or scores) under its job,
    so a killed alignment started again redoes none."""
    con.execute("""
        CREATE TABLE judge_prompt_versions (
            criterion VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            recipe VARCHAR NOT NULL,
            clarification VARCHAR,
            examples JSON,
            held_out_kappa DOUBLE,
            kappa_low DOUBLE,
            kappa_high DOUBLE,
            gain DOUBLE,
            gain_low DOUBLE,
            gain_high DOUBLE,
            fitted_on JSON,
            created_at TIMESTAMP DEFAULT current_timestamp,
            PRIMARY KEY (criterion, version)
        );
        CREATE TABLE judge_prompt_active (
            criterion VARCHAR PRIMARY KEY,
            version INTEGER NOT NULL
        );
        CREATE TABLE alignment_steps (
            job VARCHAR NOT NULL,
            step VARCHAR NOT NULL,
            value JSON NOT NULL,
            saved_at TIMESTAMP DEFAULT current_timestamp,
            PRIMARY KEY (job, step)
        );
    """)
