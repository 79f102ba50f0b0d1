"""The scripts of every element kind the pages draw, loaded by the browser ahead of time. Streamlit's browser code
loads an element kind's scripts the first time a page shows one (the metric tiles, the select box, the date
input...): on a 2-core machine that was 0.2-0.3 s of the first page to show them, Evaluate and Runs. A session's
first page asks the browser to fetch them all into its HTTP cache (`<link rel=prefetch>`, fetched when the
browser is idle), once per browser: the files are named by their content and cached for a year, and the browser
remembers (localStorage) which set it fetched."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

import streamlit as st

# Streamlit's scripts of the element kinds the pages draw (st.metric is Metric, st.segmented_control ButtonGroup,
# st.toggle Checkbox, st.code StreamlitSyntaxHighlighter, st.dataframe DataFrame, st.altair_chart
# ArrowVegaLiteChart). Named without the content hash of the file name; a test checks each is in the installed
# Streamlit.
ELEMENT_SCRIPTS = (
    "ArrowVegaLiteChart",
    "Button",
    "ButtonGroup",
    "ChatInput",
    "Checkbox",
    "DataFrame",
    "DateInput",
    "DownloadButton",
    "FileUploader",
    "Metric",
    "Multiselect",
    "NumberInput",
    "PageLink",
    "PlotlyChart",
    "Progress",
    "Radio",
    "Selectbox",
    "Slider",
    "StreamlitSyntaxHighlighter",
    "Table",
    "TextArea",
    "TextInput",
)
STATIC_IMPORT = re.compile(r'(?:from|import)\s*"\./([^"/]+\.js)"')
SESSION_KEY = "scripts_prefetched"


def static_scripts() -> Path:
    """The folder Streamlit serves its browser scripts from (static/js, beside its index.html)."""
    return Path(st.__file__).parent / "static" / "static" / "js"


def script_files(folder: Path, names=ELEMENT_SCRIPTS) -> list[str]:
    """The files of the named scripts and of every script they import, to the last (sorted): what the browser
    would fetch the first time it shows those element kinds. A name with no file (another Streamlit) is left out."""
    by_name = {}
    for path in folder.glob("*.js"):
        by_name.setdefault(path.name.split(".")[0], []).append(path.name)
    wanted = [file for name in names for file in by_name.get(name, [])]
    found: set[str] = set()
    while wanted:
        file = wanted.pop()
        if file in found or not (folder / file).is_file():
            continue
        found.add(file)
        wanted += STATIC_IMPORT.findall((folder / file).read_text(encoding="utf-8", errors="replace"))
    return sorted(found)


@functools.cache
def prefetch_script() -> str:
    """The page script that asks the browser to prefetch them, unless this browser did for this very set."""
    files = script_files(static_scripts())
    version = hashlib.sha256("\n".join(files).encode()).hexdigest()[:16]
    return f"""<script>
(() => {{
  const key = "workbench-prefetched", version = {json.dumps(version)}, files = {json.dumps(files)};
  try {{ if (localStorage.getItem(key) === version) return; }} catch (e) {{}}
  const entry = document.querySelector('script[src*="static/js/index."]');
  if (!entry) return;
  let left = files.length;
  const done = () => {{ if (--left === 0) try {{ localStorage.setItem(key, version); }} catch (e) {{}} }};
  for (const file of files) {{
    const link = document.createElement("link");
    link.rel = "prefetch";
    link.href = new URL(file, entry.src).href;
    link.onload = done;
    link.onerror = () => {{}};
    document.head.appendChild(link);
  }}
}})();
</script>"""


def prefetch_element_scripts(state) -> None:
    """On a session's first page: the script above, in an element that shows nothing."""
    if state.get(SESSION_KEY):
        return
    state[SESSION_KEY] = True
    st.html(prefetch_script(), unsafe_allow_javascript=True)
