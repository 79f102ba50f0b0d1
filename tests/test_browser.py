"""Drive the running app in headless Chromium (Debian's /usr/bin/chromium, never a downloaded browser)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_server import CHROMIUM, chromium, serving, wait_idle
from conftest import ROOT

from pages.views.navigation import PAGES

QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture
def running_app(kb_db, settings):
    kb_db.close()
    with serving({**os.environ, "OLLAMA_HOST": settings.ollama_host, "WORKBENCH_DB": settings.store_path}) as url:
        yield url


def test_asking_on_the_running_app_shows_the_verified_answer(running_app, tmp_path):
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(running_app)
        box = page.get_by_test_id("stChatInputTextArea")
        box.wait_for(timeout=60_000)
        box.fill(QUESTION)
        box.press("Enter")
        expect(page.get_by_text("accepted: faithfulness", exact=False).first).to_be_visible(timeout=60_000)
        expect(page.get_by_text("· 1 attempt · run 1")).to_be_visible()
        expect(page.get_by_text("21 million passages.", exact=False).first).to_be_visible()
        # the verdict's icon is a Material Symbol (its ligature name is the text), never an emoji
        expect(page.get_by_text("check_circle claim 1", exact=False).first).to_be_visible()
        expect(page.get_by_text("Sources: [1] rag.md")).to_be_visible()
        page.get_by_text("Claims (2)").click()
        expect(page.get_by_test_id("stTable").first).to_be_visible()
        artifacts = ROOT / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        page.screenshot(path=str(artifacts / "chat.png"), full_page=True)


def test_runs_page_filters_opens_a_drilldown_and_highlights_the_evidence(running_app, settings):
    from playwright.sync_api import expect

    from pipeline.answering.engine import VerifiedQueryEngine, final_result
    from store.db import Database

    db = Database(settings.store_path, 10, 0)
    engine = VerifiedQueryEngine(settings=settings, db=db)
    wanted = final_result(engine.stream(QUESTION))
    final_result(engine.stream("What BLEU did the big Transformer score on WMT 2014 English-German?"))
    db.close()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 2000})
        page.goto(f"{running_app}/runs")
        expect(page.get_by_text("2 runs match;", exact=False)).to_be_visible(timeout=60_000)
        wait_idle(page)
        page.get_by_test_id("stExpander").filter(has_text="Filters").locator("summary").click()  # drawn when opened
        search = page.get_by_label("Text in question or answer")
        search.wait_for(timeout=60_000)
        sidebar = page.get_by_test_id("stSidebar")  # a deep link gets the shared sidebar, pages in order
        expect(sidebar.get_by_text("Ollama ready at", exact=False)).to_be_visible(timeout=30_000)
        links = [t.strip() for t in sidebar.get_by_test_id("stPageLink").all_inner_texts()]
        assert [t.split("\n")[-1].strip() for t in links] == [p.label for p in PAGES], links
        search.fill("wikipedia index")
        search.press("Enter")
        expect(page.get_by_text("1 run matches;", exact=False)).to_be_visible(timeout=30_000)
        page.get_by_role("button", name="Open drilldown").click()
        expect(page.get_by_role("heading", name=f"Run {wanted.run_id}")).to_be_visible(timeout=30_000)
        assert f"run_id={wanted.run_id}" in page.url
        claim = wanted.final_claims[0]
        page.locator("details summary", has_text=claim.text[:40]).first.click()
        highlighted = (
            page.locator("details[open] span:visible", has_text=claim.evidence[:40])
            .filter(has=page.locator("strong"))
            .first
        )
        expect(highlighted).to_be_visible(timeout=30_000)
        color = highlighted.evaluate("e => getComputedStyle(e).backgroundColor")
        assert color not in ("rgba(0, 0, 0, 0)", "transparent")
        page.screenshot(path=str(ROOT / "test-artifacts" / "drilldown.png"), full_page=True)
