"""The element scripts a browser fetches ahead of time (pages/views/prefetch.py): which files, and once."""

from __future__ import annotations

import json
import re

from pages.views import prefetch
from pages.views.prefetch import ELEMENT_SCRIPTS, STATIC_IMPORT, prefetch_script, script_files, static_scripts


def test_every_named_element_script_is_in_the_installed_streamlit_with_every_script_it_imports():
    files = script_files(static_scripts())
    named = {file.split(".")[0] for file in files}
    assert set(ELEMENT_SCRIPTS) <= named  # a renamed element kind in another Streamlit fails here, not silently
    for file in files:  # closed under the scripts' static imports: the browser finds each in its cache
        imported = STATIC_IMPORT.findall((static_scripts() / file).read_text(encoding="utf-8"))
        assert set(imported) <= set(files), file
    metric = next(f for f in files if f.startswith("Metric."))
    assert len(STATIC_IMPORT.findall((static_scripts() / metric).read_text(encoding="utf-8"))) > 5
    assert not any(f.startswith(("MermaidChart.", "DeckGlJsonChart.", "CameraInput.")) for f in files)  # not drawn


def test_the_files_follow_imports_to_the_last_and_leave_out_what_nothing_named_imports(tmp_path):
    (tmp_path / "Metric.aa11.js").write_text('import{t as e}from"./utils.bb22.js";import"./style.cc33.js";')
    (tmp_path / "utils.bb22.js").write_text('import{x}from "./deep.dd44.js";')
    (tmp_path / "style.cc33.js").write_text("")
    (tmp_path / "deep.dd44.js").write_text('import{y}from"./utils.bb22.js";')  # a cycle ends
    (tmp_path / "Unused.ee55.js").write_text("")
    files = script_files(tmp_path, ("Metric", "Missing"))
    assert files == ["Metric.aa11.js", "deep.dd44.js", "style.cc33.js", "utils.bb22.js"]


def test_the_page_script_asks_for_each_file_once_per_browser_under_a_version_of_the_set():
    script = prefetch_script()
    files = json.loads(re.search(r"files = (\[.*?\]);", script).group(1))
    assert files == script_files(static_scripts())
    assert re.search(r'version = "[0-9a-f]{16}"', script)
    assert 'link.rel = "prefetch"' in script and "localStorage.getItem(key) === version" in script


def test_a_session_draws_it_on_its_first_page_only(monkeypatch):
    drawn = []
    monkeypatch.setattr(prefetch.st, "html", lambda body, **kwargs: drawn.append(kwargs))
    state = {}
    prefetch.prefetch_element_scripts(state)
    prefetch.prefetch_element_scripts(state)
    assert drawn == [{"unsafe_allow_javascript": True}]
