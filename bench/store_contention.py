"""No answer lost while the store is held: 3 loops × 20 asks during a 20-item evaluation, each in its own process,
while a fourth process takes the store for 1 s of every 4 s (BENCH_HOLD / BENCH_FREE change that).

Every participant is a separate process against one DuckDB file, as a user's app, CLI asks and a CLI batch
would be: each ask is `python -m pipeline ask --json` in a process of its own (its exit code is checked), as is
the evaluation. The fake Ollama answers with its latency model (2 ms per generated token, 4 slots). Each ask
records how long it waited for the store's lock (reads and the final save together; Database.lock_wait_s)
and whether its run was written at once or kept in the journal. At the end the holder stops, the store is
opened once (which replays the journal), and every ask's question is looked up: an ask whose question is not
in the store is lost. Defaults: store_save_wait_s = 3 s, store_lock_timeout_s = 15 s.

    python -m bench contention
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time

from bench.common import ROOT, Figure, bench_environment
from pipeline.config import load_settings
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import close_all, get_database

LOOPS, ASKS, ITEMS = 3, 20, 20
NOT_ANSWERED = ("failed", "cancelled", "no output")  # an ask that printed no answer
HOLD_S, FREE_S = float(os.environ.get("BENCH_HOLD", "1")), float(os.environ.get("BENCH_FREE", "3"))

ASK_ONE = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from pipeline.cli.main import main
    from store import db as store_db
    start = time.perf_counter()
    code = main(["ask", sys.argv[1], "--json", "--quiet"])
    waited = sum(db.lock_wait_s for db in list(store_db._every_database))
    print(json.dumps({{"wait_s": waited, "wall_s": time.perf_counter() - start}}), file=sys.stderr, flush=True)
    sys.exit(code)  # an ordinary exit: atexit, then finalization, as for `python -m pipeline ask`
""")


def ask_loop(loop: int, env: dict, rows: list) -> None:
    """One user asking its questions one after another, each with `python -m pipeline ask --json` in a process
    of its own: its exit code, the run it printed, and how long it waited for the store."""
    for question in questions(loop):
        done = subprocess.run(
            [sys.executable, "-c", ASK_ONE.format(root=str(ROOT)), question],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        row = {"question": question, "code": done.returncode, "wait_s": float("nan"), "status": "no output"}
        try:
            shown = json.loads(done.stdout)
            row.update(status=shown["status"], run_id=shown["run_id"], journal=shown["journal"], error=shown["error"])
        except ValueError:
            row["error"] = (done.stdout + done.stderr)[-500:]
        for line in done.stderr.splitlines():
            if line.startswith('{"wait_s"'):
                row.update(json.loads(line))
        rows.append(row)


HOLDER = textwrap.dedent("""
    import duckdb, sys, time
    while True:
        try:
            con = duckdb.connect({path!r})
        except duckdb.Error:
            time.sleep(0.05)
            continue
        time.sleep({hold})
        con.close()
        time.sleep({free})
""")


def questions(loop: int) -> list[str]:
    from pipeline.evaluation.dataset import load_dataset

    golden = load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items
    return [f"{golden[(loop * ASKS + i) % len(golden)].question} (loop {loop}, ask {i})" for i in range(ASKS)]


def run() -> list[Figure]:
    with bench_environment() as (fake, folder):
        fake.set_latency(0.002, 4)
        settings = load_settings()
        db = get_database(settings)
        ingest([str(ROOT / "data" / "kb")], settings, db, LLM(settings, db))
        close_all()
        env = dict(os.environ)
        started = time.monotonic()
        holder = None
        if HOLD_S:
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER.format(path=settings.store_path, hold=HOLD_S, free=FREE_S)], env=env
            )
        evaluation = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "eval", str(ROOT / "data" / "eval" / "golden.jsonl")]
            + ["--name", "contention", "--limit", str(ITEMS), "--json"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        rows: list[dict] = []
        loops = [threading.Thread(target=ask_loop, args=(loop, env, rows)) for loop in range(LOOPS)]
        for thread in loops:
            thread.start()
        for thread in loops:
            thread.join()
        eval_output, _ = evaluation.communicate(timeout=1800)
        elapsed = time.monotonic() - started
        if holder:
            holder.kill()
            holder.wait()

        db = get_database(settings)  # the first open replays the journal
        with db.cursor() as cur:
            stored = {r[0] for r in cur.execute("SELECT question FROM runs WHERE kind = 'chat'").fetchall()}
            items_done = cur.execute(
                "SELECT count(*) FROM eval_items i JOIN eval_runs e ON e.id = i.eval_run_id "
                "WHERE e.name = 'contention' AND i.status = 'done'"
            ).fetchone()[0]
        replayed = db.replayed
        close_all()
    if items_done < ITEMS:
        print(f"the evaluation did not finish every item:\n{eval_output[-2000:]}", file=sys.stderr)
    asked = [q for loop in range(LOOPS) for q in questions(loop)]
    lost = sum(1 for q in asked if q not in stored)
    waits = sorted(r["wait_s"] for r in rows)
    p95 = waits[max(0, round(0.95 * len(waits)) - 1)] if waits else float("nan")
    journaled = sum(1 for r in rows if r.get("journal"))
    failed = sum(1 for r in rows if r["status"] in NOT_ANSWERED)
    codes = [r["code"] for r in rows] + [evaluation.returncode]
    bad_codes = sorted(c for c in codes if c != 0)
    for r in rows:
        if r["code"] != 0 or r["status"] in NOT_ANSWERED:
            print(f"ask exit {r['code']}, {r['status']}: {r.get('error')}", file=sys.stderr)
    if evaluation.returncode != 0:
        print(f"eval exit {evaluation.returncode}:\n{eval_output[-2000:]}", file=sys.stderr)
    note = (
        f"{len(rows)} asks, {journaled} kept in the journal (all replayed; {replayed} at the final open), "
        f"median wait {statistics.median(waits):.2f} s, max {waits[-1]:.2f} s; {items_done}/{ITEMS} evaluation "
        f"items done; exit codes other than 0: {bad_codes or 'none'}; {elapsed:.0f} s in all, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return [
        Figure(f"answers lost, {LOOPS} loops × {ASKS} asks during a {ITEMS}-item evaluation, store held", lost, "", 0),
        Figure("asks that failed (not answered)", failed, "", 0),
        Figure(f"processes that exited non-zero, of {len(codes)}", len(bad_codes), "", 0),
        Figure("p95 wait for the store per ask", p95, "s", 2, note=note),
    ]


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
