"""Rebuild a stored run as the same AnswerResult the engine produced, for showing it again."""
from __future__ import annotations

import json

from pipeline.answering.events import AnswerResult, Attempt
from pipeline.verification.faithfulness import CheckedClaim, Passage
from store.db import Database
from store.records import AttemptRecord
from store.runs import get_run


def load_result(db: Database, run_id: int) -> AnswerResult | None:
    run = get_run(db, run_id)
    if run is None:
        return None
    rounds = [r["round"] for r in run["retrievals"]]
    final_round = max(rounds) if rounds else None
    passages = [Passage(r["rank"], r["chunk_id"], r["source"] or "(deleted document)", r["text"] or "", r["score"])
                for r in run["retrievals"] if r["round"] == final_round]
    by_chunk = {p.chunk_id: p for p in passages}
    attempts = []
    for a in run["attempts"]:
        record = AttemptRecord(a["attempt_no"], a["strict"], a["answer"], a["status"], a["faithfulness"],
                               a["n_claims"], a["n_supported"], list(_json(a["failed_claims"]) or []), a["error"])
        claims = [CheckedClaim(c["claim_no"], c["text"], c["verdict"], c["verifier"],
                               by_chunk.get(c["evidence_chunk_id"]),
                               (c["span_start"], c["span_end"]) if c["span_start"] is not None else None,
                               c["reason"] or "")
                  for c in run["claims"] if c["attempt_no"] == a["attempt_no"]]
        attempts.append(Attempt(record, claims))
    return AnswerResult(run["id"], run["status"], run["question"], run["answer"], run["faithfulness"], attempts,
                        run["final_attempt"], passages, run["rewritten_query"], run["abstain_reason"],
                        run["error"], None, run["latency_ms"])


def _json(value):
    return json.loads(value) if isinstance(value, str) else value
