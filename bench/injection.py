"""Prompt-injection flags (pipeline.knowledge.injection): recall and false flags, measured.

- the corpus tests/data/injection_intent.jsonl, written before the intent rules: recall on its injection
  phrasings (share flagged) and false flags on its benign sentences that use the same words innocently;
- every distinct `context` of ../shared/datasets/*.jsonl (read-only), each as a whole and cut into chunks
  the way ingest cuts a document (the sentence splitter at the default chunk size and overlap);
- every chunk of the documents in data/kb, cut the same way.

`python -m bench.injection` prints the figures and the flagged texts; `--module PATH` measures another
version of the module (for example the rules before issue 27: `git show <commit>:pipeline/knowledge/injection.py
> /tmp/old_injection.py`). Not part of `make bench`; it takes a few seconds without Ollama.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections.abc import Callable

from bench.common import ROOT, Figure, print_table

CORPUS = ROOT / "tests" / "data" / "injection_intent.jsonl"
DATASETS = ROOT.parent / "shared" / "datasets"
KB = ROOT / "data" / "kb"


def corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def chunks_of(text: str) -> list[str]:
    from pipeline.config import Settings
    from pipeline.knowledge.ingest import split

    return [piece for piece, _, _ in split(text, Settings())]


def dataset_contexts() -> dict[str, list[str]]:
    out = {}
    for path in sorted(DATASETS.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        out[path.name] = sorted({r["context"] for r in rows if r.get("context")})
    return out


def kb_chunks() -> list[str]:
    from pipeline.knowledge.ingest import read_text

    return [piece for path in sorted(KB.iterdir()) if path.is_file() for piece in chunks_of(read_text(path))]


def load_flagger(module: str | None) -> Callable[[str], list[str]]:
    if not module:
        from pipeline.knowledge.injection import injection_flags

        return injection_flags
    spec = importlib.util.spec_from_file_location("injection_under_test", module)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded.injection_flags


def measure(flags: Callable[[str], list[str]], show: bool = True) -> list[Figure]:
    rows = corpus()
    injections = [r for r in rows if r["injection"]]
    benign = [r for r in rows if not r["injection"]]
    missed = [r["text"] for r in injections if not flags(r["text"])]
    false = [(r["text"], flags(r["text"])) for r in benign if flags(r["text"])]
    figures = [
        Figure(
            "corpus: injections flagged",
            100 * (1 - len(missed) / len(injections)),
            "%",
            95,
            False,
            f"{len(injections) - len(missed)} of {len(injections)}",
        ),
        Figure(
            "corpus: benign sentences flagged",
            100 * len(false) / len(benign),
            "%",
            5,
            True,
            f"{len(false)} of {len(benign)}",
        ),
    ]
    flagged_contexts: list[tuple[str, str, list[str]]] = []
    for name, contexts in dataset_contexts().items():
        whole = [(c, f) for c in contexts if (f := flags(c))]
        pieces = [p for c in contexts for p in chunks_of(c)]
        cut = [p for p in pieces if flags(p)]
        flagged_contexts += [(name, c, f) for c, f in whole]
        figures += [
            Figure(
                f"{name}: contexts flagged",
                100 * len(whole) / len(contexts),
                "%",
                1,
                True,
                f"{len(whole)} of {len(contexts)} distinct contexts",
            ),
            Figure(
                f"{name}: chunks flagged",
                100 * len(cut) / len(pieces),
                "%",
                1,
                True,
                f"{len(cut)} of {len(pieces)} chunks",
            ),
        ]
    kb = kb_chunks()
    kb_flagged = [(p, f) for p in kb if (f := flags(p))]
    figures.append(
        Figure(
            "data/kb: chunks flagged",
            100 * len(kb_flagged) / len(kb),
            "%",
            0,
            True,
            f"{len(kb_flagged)} of {len(kb)} chunks",
        )
    )
    if show:
        for text in missed:
            print("missed:      ", json.dumps(text))
        for text, f in false:
            print("false flag:  ", json.dumps(text), f)
        for name, text, f in flagged_contexts:
            print(f"flagged in {name}:", f, json.dumps(text[:160]))
        for text, f in kb_flagged:
            print("flagged in data/kb:", f, json.dumps(text[:160]))
    return figures


def run(module: str | None = None) -> list[Figure]:
    return measure(load_flagger(module))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.injection", description=__doc__.split("\n")[0])
    parser.add_argument("--module", help="path of another injection.py to measure instead of the current one")
    args = parser.parse_args(argv)
    print_table(run(args.module))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
