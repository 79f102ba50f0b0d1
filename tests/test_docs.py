"""The documentation: a short README, and a MkDocs site whose every page is in the navigation and that builds
with --strict (a broken link or anchor, or a page left out of the nav, fails the build)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 6 * 1024  # bytes: the README says what the product is and points into docs/ for the rest
# a measured figure: a number with a unit of time, a ratio or a share (every one lives in docs/benchmarks.md)
FIGURE = re.compile(r"\d+(?:[.,]\d+)?\s*(?:×|%|ms\b|s\b)")


def nav_pages(entry) -> list[str]:
    """Every page a mkdocs.yml nav entry names, however deep its sections go."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, list):
        return [page for item in entry for page in nav_pages(item)]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in nav_pages(value)]
    return []


def test_the_readme_stays_short():
    size = README.stat().st_size
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; move detail into docs/ (limit {README_LIMIT:,})"


def test_the_readme_leaves_every_figure_to_the_benchmarks_page():
    text = README.read_text(encoding="utf-8")
    assert not FIGURE.findall(text), "a measured figure belongs in docs/benchmarks.md, which the README links to"
    assert "](docs/benchmarks.md)" in text
    for section in ("## Prerequisites", "## The two commands", "## A short tour", "## Where to go next"):
        assert section in text, section
    assert "make test-fast" in text and "docs/images/chat.png" in text


def test_the_readmes_links_into_the_repository_exist():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert local, "the README links into docs/"
    missing = sorted({t for t in local if not (ROOT / t).exists()})
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_every_page_in_docs_is_in_the_nav():
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with mkdocs (requirements-dev.txt)")
    # mkdocs.yml may hold !!python/name tags one day; a loader that ignores unknown tags reads the nav anyway
    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("", lambda _loader, _suffix, _node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)
    in_nav = set(nav_pages(config["nav"]))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk - in_nav == set(), "pages in docs/ missing from mkdocs.yml's nav"
    assert in_nav - on_disk == set(), "mkdocs.yml's nav names pages that docs/ does not have"


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material are not installed (pip install -r requirements-dev.txt)",
)
def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert result.returncode == 0, "\n".join(warnings) or result.stderr[-4000:]
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "images" / "chat.png").exists()
