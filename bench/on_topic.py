"""The on-topic check: how well its cheap signal separates answers that address their question from
answers that do not, the thresholds that follow, and what the check adds per question in the engine.

Separation: each golden question (data/eval/golden.jsonl) against its own reference answer (on target)
and against every other question's reference (swapped: off target). The score is the check's own
(pipeline/answering/on_topic.similarity: the question's similarity to the answer's closest sentence),
with the embeddings the environment gives: here the fake Ollama's bag-of-words vectors, not
nomic-embed-text's, so the thresholds are uncalibrated for real embeddings. `on_topic_reject` is the
2nd percentile of golden scores (at most 2% of golden answers called off target without a model call),
`on_topic_accept` the 98th percentile of swapped scores (at most 2% of swapped answers waved through);
between them the check asks the model.

`python -m bench.on_topic --live` measures the separation with your own Ollama and embed_model instead.

Cost: the first 30 golden questions through the engine with the check on and off (cache off, as in
answer_cost): LLM calls that reached the model, prompt tokens and time per question.
"""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.common import ROOT, Figure, bench_environment
from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.answering.on_topic import answer_sentences, cosines
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import get_database
from store.llm_log import calls_for_run
from store.spans import spans_for_run

GOLDEN = ROOT / "data" / "eval" / "golden.jsonl"
ERROR_RATE = 0.02  # a sure decision of the cheap signal is wrong for at most 2% of either class


def pair_scores(llm: LLM, questions: list[str], answers: list[str]) -> np.ndarray:
    """scores[i, j]: question i against answer j, as the check scores it."""
    question_vectors = [llm.embed_query(q) for q in questions]
    sentence_vectors = [llm.embed_documents(answer_sentences(a)) for a in answers]
    return np.array([[cosines(q, s).max() for s in sentence_vectors] for q in question_vectors])


def separation(scores: np.ndarray) -> dict:
    n = len(scores)
    golden = np.diag(scores)
    swapped = scores[~np.eye(n, dtype=bool)]
    reject = float(np.quantile(golden, ERROR_RATE))
    accept = float(np.quantile(swapped, 1 - ERROR_RATE))
    if reject > accept:  # no overlap to ask the model about: one cut between the two
        reject = accept = (reject + accept) / 2
    labels = np.r_[np.ones(len(golden)), np.zeros(len(swapped))]
    return {
        "n": n,
        "auc": float(roc_auc_score(labels, np.r_[golden, swapped])),
        "golden": golden,
        "swapped": swapped,
        "reject": reject,
        "accept": accept,
    }


def _quartiles(values: np.ndarray) -> str:
    q = np.quantile(values, [0.05, 0.25, 0.5, 0.75, 0.95])
    return "p5/p25/median/p75/p95 " + "/".join(f"{v:.2f}" for v in q)


def separation_figures(found: dict, accept: float, reject: float) -> list[Figure]:
    golden, swapped = found["golden"], found["swapped"]

    def share(values, low, high):
        return float(np.mean((values >= low) & (values < high)))

    return [
        Figure(
            "on-topic: ROC AUC, golden vs swapped answers",
            found["auc"],
            "",
            note=f"{found['auc']:.4f}; {found['n']} questions with a reference",
        ),
        Figure("on-topic: golden answers' similarity", float(np.median(golden)), "median", note=_quartiles(golden)),
        Figure("on-topic: swapped answers' similarity", float(np.median(swapped)), "median", note=_quartiles(swapped)),
        Figure("on-topic: measured on_topic_reject (golden p2)", found["reject"], "", note=f"in use: {reject:.2f}"),
        Figure("on-topic: measured on_topic_accept (swapped p98)", found["accept"], "", note=f"in use: {accept:.2f}"),
        Figure(
            "on-topic: golden answers decided off target, no model call",
            100 * share(golden, -2, reject),
            "%",
            note=f"unsure (model call): {100 * share(golden, reject, accept):.1f}%",
        ),
        Figure(
            "on-topic: swapped answers decided on target, no model call",
            100 * share(swapped, accept, 2),
            "%",
            note=f"unsure (model call): {100 * share(swapped, reject, accept):.1f}%",
        ),
    ]


def cost_figures(settings, db, questions: list[str]) -> list[Figure]:
    per = {}
    for on in (False, True):
        engine = VerifiedQueryEngine(settings=dataclasses.replace(settings, on_topic_check=on), db=db)
        rows = []
        for question in questions:
            result = final_result(engine.stream(question))
            made = [c for c in calls_for_run(db, result.run_id) if not c["cache_hit"]]
            rows.append(
                {
                    "calls": len(made),
                    "tokens": sum(c["prompt_tokens"] or 0 for c in made),
                    "ms": result.latency_ms,
                    "check_ms": sum(
                        s.latency_ms or 0 for s in spans_for_run(db, result.run_id) if s.name == "on-topic check"
                    ),
                    "check_calls": sum(c["stage"] in ("on_topic", "embed_documents") for c in made),
                    "model_calls": sum(c["stage"] == "on_topic" for c in made),
                    "attempts": len(result.attempts),
                    "off_target": sum(a.record.on_topic is False for a in result.attempts),
                }
            )
        per[on] = {key: statistics.mean(r[key] for r in rows) for key in rows[0]}
    on, off = per[True], per[False]
    n = f"{len(questions)} golden questions, check on vs off"
    return [
        Figure(
            "on-topic check: extra LLM calls per question",
            on["calls"] - off["calls"],
            "calls",
            note=f"{on['calls']:.2f} vs {off['calls']:.2f}; the answer's embeddings and model calls "
            f"{on['check_calls']:.2f} (model calls {on['model_calls']:.2f}); the rest: the question embedded again "
            f"(with the cache on, the default, a hit left by retrieval) and retries; attempts {on['attempts']:.2f} "
            f"vs {off['attempts']:.2f}",
        ),
        Figure(
            "on-topic check: extra prompt tokens per question",
            on["tokens"] - off["tokens"],
            "tokens",
            note=f"{on['tokens']:.0f} vs {off['tokens']:.0f}; {n} (the fake's word counts, embedded texts included)",
        ),
        Figure(
            "on-topic check: extra time per question",
            on["ms"] - off["ms"],
            "ms",
            note=f"{on['ms']:.0f} vs {off['ms']:.0f} ms mean (fake Ollama, zero model latency, shared CPU); "
            f"off-target attempts per question {on['off_target']:.2f}",
        ),
        Figure(
            "on-topic check: its own time per question",
            on["check_ms"],
            "ms",
            note="the 'on-topic check' spans: embedding the answer's sentences, and a model call when unsure",
        ),
    ]


def run(n_questions: int = 30) -> list[Figure]:
    items = [i for i in load_dataset(GOLDEN).items if i.reference]
    with bench_environment(WORKBENCH_CACHE_ENABLED="false"):
        settings = load_settings()
        db = get_database(settings)
        llm = LLM(settings, db)
        found = separation(pair_scores(llm, [i.question for i in items], [i.reference for i in items]))
        figures = separation_figures(found, settings.on_topic_accept, settings.on_topic_reject)
        ingest([str(ROOT / "data" / "kb")], settings, db, llm)
        figures += cost_figures(settings, db, [i.question for i in load_dataset(GOLDEN).items[:n_questions]])
        db.close()
    return figures


def run_live() -> list[Figure]:
    """The separation alone, with the embedding model of your own settings (OLLAMA_HOST, embed_model): the
    measurement to set on_topic_accept and on_topic_reject from for real embeddings."""
    settings = load_settings()
    items = [i for i in load_dataset(GOLDEN).items if i.reference]
    found = separation(pair_scores(LLM(settings, None), [i.question for i in items], [i.reference for i in items]))
    return separation_figures(found, settings.on_topic_accept, settings.on_topic_reject)


if __name__ == "__main__":
    import sys

    from bench.common import print_table

    print_table(run_live() if "--live" in sys.argv else run())
