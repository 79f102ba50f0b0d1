"""`make run`'s entry point: the pages' modules are imported before Streamlit's server starts (issue 29)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

from conftest import ROOT

import pages.views

PROBE = """
import json, sys
import serve_app
from streamlit.web import cli
cli.main = lambda: print(json.dumps({"argv": sys.argv,
    "imported": sorted(m for m in sys.modules if m.startswith("pages.views."))}))
serve_app.main(["--server.port", "8600"])
"""


def test_the_app_starts_with_every_view_module_imported_and_streamlit_run_on_the_chat_page():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["argv"] == ["streamlit", "run", "streamlit_app.py", "--server.port", "8600"]
    views = sorted(f"pages.views.{m.name}" for m in pkgutil.iter_modules(pages.views.__path__))
    assert len(views) > 10 and set(views) <= set(seen["imported"])
    assert "No runtime found" not in done.stderr  # the cache decorators' warning is kept out of `make run`
