"""`snapshot`: a checkpointed, read-only copy of the store for browsing."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def register(sub) -> None:

    snap = sub.add_parser(
        "snapshot", help="copy the store, checkpointed, to a read-only file that many app processes can browse"
    )
    snap.add_argument("path", help="the snapshot file; an earlier snapshot there is replaced")
    snap.set_defaults(handler=cmd_snapshot)


def cmd_snapshot(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.history.export import snapshot

    result = snapshot(db, args.path)
    verb = "replaced the snapshot" if result.replaced else "wrote a snapshot"
    out.print(
        Text(
            f"{verb} {result.path}: {sum(result.rows.values()):,} rows in {len(result.rows)} tables "
            f"({result.rows.get('runs', 0):,} runs), {result.bytes / 1e6:,.1f} MB in {result.seconds:.1f} s"
        )
    )
    out.print(Text(f"browse it read-only: WORKBENCH_DB={result.path} (the file is left read-only)"))
    return 0
