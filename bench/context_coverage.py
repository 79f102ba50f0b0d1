"""How much of each golden answer the generator can read: its reference's content words found in the context.

    python -m bench.context_coverage                     # budgets 600, 450, 300 and the seed's context
    python -m bench.context_coverage --budgets 600 400   # other budgets

Every golden question (data/eval/golden.jsonl) is retrieved as the engine does (its store over data/kb, top_k),
the passages cut to `context_budget_tokens` (budget.within_budget, no grade: every passage kept, as on the
overlapped schedule); beside it, the seed's context (500-character chunks, top 3: bench/seed_pipeline.py). The
figure per context: the mean over questions of the share of the reference answer's content words
(pipeline.text.content_words) that the context holds, and the questions whose context holds at least 80% of
them; with the context's words per question (what each generation and whole-context check reads). Retrieval
runs on the fake Ollama's embeddings (a feature-hashed bag of content words), so this measures what the budget
cuts from a lexical retrieval, not a real embedding model's ranking.
"""

from __future__ import annotations

import argparse
import statistics

import ollama

from bench import seed_pipeline
from bench.common import ROOT, Figure, bench_environment, print_table
from pipeline.answering.budget import within_budget
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from pipeline.text import content_words
from pipeline.verification.claims import Passage, context_block
from store.db import get_database

BUDGETS = (600, 450, 300)
HELD = 0.8  # a question "covered": its context holds at least this share of the reference's content words


def coverage(reference: str, context: str) -> float:
    wanted = content_words(reference)
    return len(wanted & content_words(context)) / len(wanted) if wanted else 1.0


def measure(budgets=BUDGETS) -> dict[str, list[tuple[float, int]]]:
    """context name -> (coverage, words of the context block) per golden question."""
    out: dict[str, list[tuple[float, int]]] = {}
    with bench_environment(WORKBENCH_CACHE_ENABLED="false") as (fake, _):
        settings = load_settings()
        db = get_database(settings)
        kb = ROOT / "data" / "kb"
        llm = LLM(settings, db)
        ingest([str(kb)], settings, db, llm)
        retriever = DuckDBRetriever(llm, db, settings.top_k)
        with ollama.Client(host=fake.url) as client:
            seed_index = seed_pipeline.SeedIndex(client, settings.embed_model, [kb])
            items = load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items
            for item in (i for i in items if i.reference):
                nodes = retriever.retrieve(item.question)
                passages = [
                    Passage(n, int(x.node.metadata["chunk_id"]), x.node.metadata["source"], x.node.get_content(), 0.0)
                    for n, x in enumerate(nodes, start=1)
                ]
                for budget in budgets:
                    block = context_block(within_budget(item.question, passages, budget, None).passages)
                    name = f"engine, top {settings.top_k}, budget {budget}" if budget else "engine, whole chunks"
                    out.setdefault(name, []).append((coverage(item.reference, block), len(block.split())))
                block = seed_index.context(item.question)
                out.setdefault("seed, top 3 × 500 characters", []).append(
                    (coverage(item.reference, block), len(block.split()))
                )
        db.close()
    return out


def to_figures(measured: dict[str, list[tuple[float, int]]]) -> list[Figure]:
    figures = []
    for name, rows in measured.items():
        held = sum(c >= HELD for c, _ in rows)
        figures.append(
            Figure(
                f"context coverage of the reference answer, mean ({name})",
                statistics.mean(c for c, _ in rows),
                "",
                note=f"{held}/{len(rows)} questions at ≥ {HELD:.0%}; "
                f"{statistics.mean(w for _, w in rows):,.0f} words of context per question (mean)",
            )
        )
    return figures


def run() -> list[Figure]:
    return to_figures(measure())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.context_coverage", description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS), help="context budgets in tokens")
    args = parser.parse_args(argv)
    print_table(to_figures(measure(tuple(args.budgets))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
