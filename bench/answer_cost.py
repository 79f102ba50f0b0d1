"""LLM calls and prompt tokens per answered question, with the grounding pre-check on and off.

30 golden questions through the verified engine against the fake Ollama (tokens are the fake's
whitespace-word counts of the prompts the workbench sends, not a model tokenizer's).
"""

from __future__ import annotations

import dataclasses
import statistics

from bench.common import ROOT, Figure, bench_environment
from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import get_database
from store.llm_log import calls_for_run


def run(n_questions: int = 30) -> list[Figure]:
    figures = []
    with bench_environment(WORKBENCH_CACHE_ENABLED="false"):
        base = load_settings()
        db = get_database(base)
        ingest([str(ROOT / "data" / "kb")], base, db, LLM(base, db))
        questions = [i.question for i in load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items[:n_questions]]
        for precheck in (True, False):
            settings = dataclasses.replace(base, precheck_enabled=precheck)
            engine = VerifiedQueryEngine(settings=settings, db=db)
            calls, tokens, verify = [], [], []
            for question in questions:
                result = final_result(engine.stream(question))
                made = [c for c in calls_for_run(db, result.run_id) if not c["cache_hit"]]
                calls.append(len(made))
                tokens.append(sum(c["prompt_tokens"] or 0 for c in made))
                verify.append(sum(c["stage"] == "verify" for c in made))
            label = "on" if precheck else "off"
            figures += [
                Figure(
                    f"LLM calls per answer, pre-check {label}",
                    statistics.mean(calls),
                    "calls",
                    note=f"of which verifier calls: {statistics.mean(verify):.2f}",
                ),
                Figure(
                    f"prompt tokens per answer, pre-check {label}",
                    statistics.mean(tokens),
                    "tokens",
                    note=f"{n_questions} golden questions",
                ),
            ]
        db.close()
    return figures


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
