"""`ingest`: add files or folders to the knowledge base, one line per file."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from pipeline.text import plural


def register(sub) -> None:
    ingest_cmd = sub.add_parser("ingest", help="add Markdown, text or PDF files (or folders) to the knowledge base")
    ingest_cmd.add_argument("paths", nargs="+")
    ingest_cmd.add_argument(
        "--if-empty",
        action="store_true",
        help="do nothing when the knowledge base already has chunks for the embedding model",
    )
    ingest_cmd.set_defaults(handler=cmd_ingest)


def cmd_ingest(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.knowledge.documents import count_chunks
    from pipeline.knowledge.ingest import ingest_and_record

    if args.if_empty and count_chunks(db, settings.embed_model):
        out.print(Text(f"The knowledge base already has chunks embedded with {settings.embed_model}; nothing to do."))
        return 0

    def report(result):
        line = f"{result.status:9} {result.path}"
        line += f" ({result.chunks} chunks)" if result.chunks else ""
        line += f": {result.reason}" if result.reason else ""
        line += f"; {plural(result.flagged, 'chunk')} flagged as possible prompt injection" if result.flagged else ""
        out.print(Text(line, style="yellow" if result.status == "skipped" else ""))

    results = ingest_and_record(args.paths, settings, db, on_result=report)
    if not results:
        err.print(Text("error: no Markdown, text or PDF files found under the given paths", style="red"))
        return 2
    skipped = sum(r.status == "skipped" for r in results)
    out.print(Text(f"{plural(len(results) - skipped, 'file')} ingested or unchanged, {skipped} skipped"))
    return 0 if skipped < len(results) else 1
