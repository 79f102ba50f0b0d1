"""Knowledge base, Settings & health and the Evaluate report's tiles in headless Chromium at 1280 px."""

from __future__ import annotations

from browser_server import chromium
from conftest import ROOT
from test_browser import running_app  # noqa: F401 - running_app is a fixture


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    return page


def no_exception(page) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_settings_knowledge_base_and_metric_tiles_in_chromium(running_app, settings):  # noqa: F811
    from playwright.sync_api import expect
    from test_evaluation import ITEMS, dataset

    from pipeline.config import essential_settings
    from pipeline.evaluation.runner import run_evaluation
    from store.db import Database

    db = Database(settings.store_path, 10, 0)
    run_evaluation(settings, db, dataset(ITEMS[:2]), "tiles")
    db.close()
    with chromium() as browser:
        page = open_page(browser, f"{running_app}/settings")
        table = page.get_by_test_id("stDataFrame").first
        table.wait_for(timeout=60_000)
        box = table.bounding_box()
        rows = len(essential_settings())  # the first table: the essential settings (the others are in expanders)
        assert box["height"] >= 35 * (rows + 1), box  # the table is as tall as its rows: no inner scroller
        no_exception(page)
        page.screenshot(path=str(ROOT / "test-artifacts" / "settings.png"), full_page=True)

        page = open_page(browser, f"{running_app}/knowledge_base")
        expect(page.get_by_role("tab", name="Preview")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Uploaded files are saved in", exact=False)).to_be_visible()
        page.get_by_role("button", name="Delete this document…").click()
        page.get_by_role("button", name="Yes, delete it").click()
        expect(page.get_by_text("Deleted chunking.md", exact=False)).to_be_visible(timeout=30_000)
        no_exception(page)
        page.screenshot(path=str(ROOT / "test-artifacts" / "knowledge_base.png"), full_page=True)

        page = open_page(browser, f"{running_app}/evaluate")
        labels = page.get_by_test_id("stMetricLabel")
        expect(labels.first).to_be_visible(timeout=60_000)
        assert labels.count() >= 5
        cut = labels.evaluate_all(
            "els => els.flatMap(e => [e, ...e.querySelectorAll('*')])"
            ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"
        )
        assert cut == [], cut  # no label wider than its tile
        no_exception(page)
        page.screenshot(path=str(ROOT / "test-artifacts" / "evaluate_tiles.png"), full_page=True)
