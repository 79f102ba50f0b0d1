"""A GitHub Actions job summary: when GITHUB_STEP_SUMMARY names a file, `gate` and `eval` append their report to
it in Markdown (appended, never overwritten: every step of a job writes to the same file)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.text import Text

from pipeline.cli.tables import Report, markdown, md_escape
from pipeline.cli.terminal import visible_controls

SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"


def append_summary(heading: str, verdict: str, exit_reason: str, report: Report, err: Console) -> None:
    """Append `heading`, the verdict, the report and the exit reason to the summary file, if one is named; a file
    that cannot be written is said on stderr and changes no exit code."""
    path = os.environ.get(SUMMARY_VARIABLE)
    if not path:
        return
    text = (
        f"### {md_escape(heading)}\n\n**{md_escape(verdict)}**\n\n{markdown(report)}\n"
        f"Exit reason: {md_escape(exit_reason)}\n\n"
    )
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(visible_controls(text))
    except OSError as exc:
        err.print(Text(f"warning: cannot append the step summary to {path} ({exc.strerror}); the exit code stands"))
