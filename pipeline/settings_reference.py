"""The settings reference, docs/reference/settings.md, generated from the settings' declarations in
pipeline/config.py: one section per group, its essential settings first and marked.

    python -m pipeline.settings_reference          # writes docs/reference/settings.md
    python -m pipeline.settings_reference --check  # exit 1 when the page differs from the declarations
"""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.config import GROUPS, PROJECT_ROOT, Declaration, declarations

REFERENCE_PATH = PROJECT_ROOT / "docs" / "reference" / "settings.md"
COMMAND = "python -m pipeline.settings_reference"


def shown_default(d: Declaration) -> str:
    """The default as a reader's machine would have it: paths under the project as <project>/..."""
    value = d.default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        root = str(PROJECT_ROOT)
        if value == root or value.startswith(root + "/") or value.startswith(root + "\\"):
            value = "<project>" + value[len(root) :].replace("\\", "/")
        return "(empty)" if value == "" else value
    return str(value)


def _cell(text: str) -> str:
    """Plain text in a table cell: no character of it read as Markdown or HTML."""
    for char in "\\`*_[]|":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace("\n", " ")


def _row(d: Declaration) -> str:
    name = f"`{d.name}`" + (" **(essential)**" if d.essential else "")
    default = shown_default(d)
    default = _cell(default) if default == "(empty)" else f"`{default}`"
    return f"| {name} | `{d.env}` | {default} | {_cell(d.valid_values())} | {d.applies} | {_cell(d.doc)} |"


def render() -> str:
    """The reference page, Markdown."""
    essentials = [d for d in declarations() if d.essential]
    lines = [
        "# Settings reference",
        "",
        f"<!-- Generated from pipeline/config.py by `{COMMAND}`; edit the declarations there, not this page. -->",
        "",
        "Settings come from their defaults, then an optional `workbench.toml` in the working directory (or the file "
        "named by `WORKBENCH_CONFIG`), then environment variables, which win. A setting's TOML key is its name; its "
        "environment variable is `WORKBENCH_<NAME>`, except the Ollama host (`OLLAMA_HOST`, as Ollama's own tools "
        "read it) and the store path (`WORKBENCH_DB`). A value out of its valid range stops the app and the CLI "
        "with the variable to fix. The Settings & health page shows each value and where it came from; keys are "
        "never shown.",
        "",
        "The Settings & health page also changes a setting: it writes the settings file (keeping its comments and "
        "other settings) after the checks a start makes, and a refused value writes nothing. A setting that its "
        "environment variable sets is not changed there (the variable wins over the file). The column *applies* says "
        "when a change takes effect: "
        "*at once* (read again for each run and page: floors, prices, thresholds, models) or *after a restart* "
        "(read once when the app, or `collect`, starts: the store and the trace settings).",
        "",
        "## Essential settings",
        "",
        "Most people need only these; each is also listed, marked, in its group below.",
        "",
    ]
    lines += [f"- `{d.name}` ({GROUPS[d.group]}, `{d.env}`): {_cell(d.doc)}" for d in essentials]
    for key, title in GROUPS.items():
        members = declarations(key)
        lines += ["", f"## {title}", ""]
        lines += ["| setting | environment variable | default | valid values | applies | meaning |"]
        lines += ["|---|---|---|---|---|---|"] + [_row(d) for d in members]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        current = REFERENCE_PATH.read_text(encoding="utf-8") if REFERENCE_PATH.exists() else ""
        if current != text:
            print(f"{REFERENCE_PATH} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    REFERENCE_PATH.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {Path(REFERENCE_PATH).relative_to(PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
