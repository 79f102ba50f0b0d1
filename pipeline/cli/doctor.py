"""`doctor`: check Ollama, the models and the store, with the fix for each problem."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def register(sub) -> None:
    parser = sub.add_parser("doctor", help="check Ollama, the models and the store, and print the fix for each problem")
    parser.set_defaults(handler=cmd_doctor)


def cmd_doctor(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.cli.hosts import print_hosts
    from pipeline.knowledge.health import health

    checks, hosts = health(settings, db)
    for check in checks:
        mark = Text("ok  ", style="green") if check.ok else Text("FAIL", style="red")
        out.print(mark, Text(f"{check.name}: {check.detail}"))
        if not check.ok and check.fix:
            out.print(Text(f"      fix: {check.fix}"))
    print_hosts(out, hosts)
    return 0 if all(c.ok for c in checks) else 1
