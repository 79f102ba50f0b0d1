"""`collect`: receive OpenTelemetry traces and verify their answers online, or drain the waiting ones."""

from __future__ import annotations

import os

from rich.console import Console
from rich.text import Text

from pipeline.cli.arguments import positive_int
from pipeline.text import plural


def register(sub) -> None:

    col = sub.add_parser(
        "collect",
        help="receive any application's OpenTelemetry traces (OTLP/HTTP) and verify its answers online",
    )
    col.add_argument("--host", default=None, help="address to listen on (default: setting collect_host, 127.0.0.1)")
    col.add_argument("--port", type=positive_int, default=None, help="port (default: setting collect_port, 4318)")
    col.add_argument(
        "--token",
        default=os.environ.get("WORKBENCH_COLLECT_TOKEN") or None,
        help="require Authorization: Bearer TOKEN on every request (default: WORKBENCH_COLLECT_TOKEN; unset: none)",
    )
    col.add_argument("--no-evaluate", action="store_true", help="receive and keep traces; verify none now")
    col.add_argument(
        "--drain", action="store_true", help="do not listen: verify every trace waiting in the store, then exit"
    )
    col.set_defaults(handler=cmd_collect)


def cmd_collect(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.collect import serve as collect

    if args.drain:
        worker = collect.drain(settings, db)
        state = worker.state
        out.print(Text(f"{plural(state.evaluated, 'trace')} verified, {state.kept} kept without verdicts"))
        if state.alerts_opened:
            opened = plural(state.alerts_opened, "alert")
            out.print(Text(f"{opened} opened on traced runs' daily faithfulness: see Trends"))
        if state.journaled:
            out.print(Text(f"{plural(len(state.journaled), 'run')} kept in the journal: the store was busy"))
        if state.last_error:
            err.print(Text(f"error: traces are still waiting: {state.last_error}", style="red"))
            return 1
        return 0
    host, port = args.host or settings.collect_host, args.port or settings.collect_port
    collect.serve(settings, db, host, port, args.token, not args.no_evaluate, lambda line: err.print(Text(line)))
    return 0
