"""`bench-detector`: measure the hallucination detector on labelled answers."""

from __future__ import annotations

import dataclasses
import json

from rich.console import Console
from rich.text import Text

from pipeline.errors import InputError


def register(sub) -> None:
    det = sub.add_parser("bench-detector", help="measure the hallucination detector on labelled answers")
    det.add_argument("file", help="JSONL of {id, question?, context, answer, label}; label 1 = hallucinated")
    det.add_argument(
        "--verifier",
        default="minicheck",
        help="a registered verifier, minicheck (by --scope), or all registered verifiers (an unknown name is refused "
        "with the list of registered ones)",
    )
    det.add_argument(
        "--claims",
        choices=["llm", "answer"],
        default="llm",
        help="claims from the claim extractor (llm) or the answer's own sentences (answer)",
    )
    det.add_argument(
        "--scope",
        choices=["chunk", "context"],
        default=None,
        help="verify each claim per chunk or against the whole context (default: setting)",
    )
    det.add_argument("--no-precheck", action="store_true", help="turn the deterministic pre-check off")
    det.add_argument("--cache", action="store_true", help="use the LLM cache (off by default: honest latency)")
    det.add_argument("--limit", type=int, default=None)
    det.add_argument("--json", action="store_true")
    det.set_defaults(handler=cmd_bench_detector)


def cmd_bench_detector(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.cli.output import print_detector
    from pipeline.detector.bench import detector_verifiers, run_detector_bench
    from pipeline.verification.registry import verifier_names

    if args.verifier != "all" and args.verifier not in detector_verifiers():
        raise InputError(
            f"unknown verifier {args.verifier!r}", fix=f"use one of {', '.join(detector_verifiers())} or all"
        )
    settings = dataclasses.replace(
        settings,
        cache_enabled=args.cache,
        precheck_enabled=settings.precheck_enabled and not args.no_precheck,
        verify_scope=args.scope or settings.verify_scope,
    )
    verifiers = verifier_names() if args.verifier == "all" else [args.verifier]
    summaries = {}
    for verifier in verifiers:

        def progress(done, total, verifier=verifier):
            if done % 25 == 0 or done == total:
                err.print(Text(f"{verifier}: {done}/{total} answers", style="dim"))

        run_id, metrics = run_detector_bench(settings, db, args.file, verifier, args.claims, args.limit, progress)
        summaries[verifier] = {"run_id": run_id, **metrics}
    if args.json:
        out.print_json(json.dumps(summaries, default=str))
    else:
        print_detector(summaries, out)
    return 0
