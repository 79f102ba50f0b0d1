"""The runs explorer in headless Chromium (issue 29): filter the runs by an evaluation, group them by model,
and the key columns fit a 1280 px screen."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from browser_server import app_env, assert_no_failure, chromium, prepared_store, screenshot, serving, wait_idle
from fake_ollama import FakeOllama
from test_browser import CHROMIUM
from test_runs_explorer import explored

from store.db import Database

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def app(ingested_store, tmp_path_factory):
    with FakeOllama() as fake:
        store, _ = prepared_store(ingested_store, tmp_path_factory.mktemp("runs"), fake.url)
        db = Database(str(store), 10, 0)
        try:
            explored(db)  # six runs: alpha's three (two by qwen, one by llama3.2), beta's two, a chat run
        finally:
            db.close()
        with serving(app_env(store, fake.url)) as url, chromium() as browser:
            yield SimpleNamespace(url=url, browser=browser)


def grid_text(grid) -> str:
    """The text of a dataframe's cells (the grid draws on a canvas and keeps its cells in an accessible table)."""
    return " ".join(grid.locator("td, th").all_inner_texts())


def test_runs_explorer_filters_by_evaluation_and_groups_by_model(app):
    from playwright.sync_api import expect

    page = app.browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{app.url}/runs", timeout=90_000)
    expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible(timeout=90_000)
    expect(page.get_by_text("6 runs match;")).to_be_visible()

    wait_idle(page)
    assert page.get_by_test_id("stMultiSelect").filter(has_text="Evaluation").count() == 0  # drawn when opened
    filters = page.get_by_test_id("stExpander").filter(has_text="Filters").locator("summary")
    filters.click()
    evaluation = page.get_by_test_id("stMultiSelect").filter(has_text="Evaluation")
    evaluation.locator("input").fill("alpha")
    page.keyboard.press("Enter")
    expect(page.get_by_text("3 runs match;")).to_be_visible()
    wait_idle(page)
    filters.click()  # closed, the filter still applies and a line names it
    expect(page.get_by_text("Filtered on evaluation: open Filters to change them.")).to_be_visible()
    expect(page.get_by_test_id("stMultiSelect").filter(has_text="Evaluation")).to_have_count(0)
    expect(page.get_by_text("3 runs match;")).to_be_visible()
    runs = page.get_by_test_id("stDataFrame").last
    expect(runs.locator("td").filter(has_text="beta")).to_have_count(0)
    expect(runs.locator("td").filter(has_text="alpha").first).to_be_attached()

    # the key columns fit 1280 px: the list scrolls no further sideways than it is wide
    scroller = runs.locator(".dvn-scroller").first
    widths = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert widths[0] <= widths[1] + 1, widths

    wait_idle(page)
    page.get_by_test_id("stButtonGroup").locator("button:has(p:text-is('model'))").click()  # group by model
    groups = page.get_by_test_id("stDataFrame").first
    expect(groups.locator("th, td").filter(has_text="p95 latency ms").first).to_be_attached()
    expect(groups.locator("td").filter(has_text="qwen")).to_have_count(1)
    expect(groups.locator("td").filter(has_text="llama3.2")).to_have_count(1)
    assert page.get_by_test_id("stDataFrame").count() == 2
    text = grid_text(groups)
    assert "qwen" in text and "beta" not in text, text
    page.wait_for_timeout(1000)
    assert_no_failure(page, "runs")
    screenshot(page, "runs-explorer.png")
    page.close()
