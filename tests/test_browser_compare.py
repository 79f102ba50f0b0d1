"""The Compare page in headless Chromium: its key content on a deep link, and the flow of comparing two runs
(choose A and B, see the tiles with their deltas and an item that got worse with both answers)."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from browser_server import assert_no_failure, chromium, open_item_by_item
from test_browser import running_app  # noqa: F401 - the fixture
from test_compare import two_real_runs
from test_evaluation import ITEMS, dataset

from pipeline.evaluation.runner import run_evaluation


@pytest.fixture
def compared_app(kb_db, settings, fake, request):
    """Three evaluations over the same two items: 'before', 'after' (the RAG item answered with a number no
    source holds, so below the faithfulness floor) and 'rerun' (as 'before', the newest); then the running app."""
    two_real_runs(fake, settings, kb_db)
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "rerun", concurrency=1)
    return request.getfixturevalue("running_app")


def new_page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 2000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def choose(page, label: str, option: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_the_compare_page_explains_an_unknown_name_and_shows_the_default_pair(compared_app):
    from playwright.sync_api import expect

    with chromium() as browser:
        page, errors = new_page(browser)
        page.goto(f"{compared_app}/compare?a={quote('[x](http://evil.example)')}")
        expect(page.get_by_role("heading", name="Compare evaluations")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("There is no evaluation named '[x](http://evil.example)'")).to_be_visible()
        assert page.locator("a[href*='evil.example']").count() == 0
        # the default: B the newest run, A its baseline ('after' is below its faithfulness floor, which is no
        # reason to skip it: it is the baseline)
        expect(page.get_by_text("A: after", exact=True).first).to_be_visible(timeout=30_000)
        expect(page.get_by_text("B: rerun", exact=True).first).to_be_visible()
        expect(page.get_by_test_id("stMetric").first).to_be_visible(timeout=30_000)
        expect(page.get_by_text("got better (1)")).to_be_visible()  # the RAG item, answered right again
        link = page.get_by_role("link", name="Open run B on Evaluate")
        assert "eval=rerun" in link.get_attribute("href")
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_role("link", name="Compare")).to_be_visible()
        assert_no_failure(page, page.url)
        assert not errors, errors


def test_comparing_two_runs_shows_the_deltas_and_the_item_that_got_worse(compared_app):
    from playwright.sync_api import expect

    with chromium() as browser:
        page, errors = new_page(browser)
        page.goto(f"{compared_app}/compare")
        expect(page.get_by_text("B: rerun", exact=True).first).to_be_visible(timeout=60_000)
        # the default A is 'after' (the baseline of 'rerun'): compare 'before' with 'after'
        choose(page, "Run A (before)", "before")
        expect(page.get_by_text("A: before", exact=True).first).to_be_visible(timeout=30_000)
        choose(page, "Run B (after)", "after")
        expect(page.get_by_text("B: after", exact=True).first).to_be_visible(timeout=30_000)
        assert "a=before" in page.url and "b=after" in page.url
        faithfulness = page.get_by_test_id("stMetric").filter(has_text="faithfulness").first
        expect(faithfulness.get_by_test_id("stMetricValue")).to_have_text("0.50")
        expect(faithfulness.get_by_test_id("stMetricDelta")).to_contain_text("-0.50")
        expect(page.get_by_text("A 1.00 (n=2) → B 0.50 (n=2)")).to_be_visible()
        expect(page.get_by_text("got worse (1)")).to_be_visible()
        open_item_by_item(page)
        # the worse item: both answers side by side, each with its claims and a link to its run
        expect(page.get_by_text("42 million passages", exact=False).first).to_be_visible()
        expect(page.get_by_text("21 million passages", exact=False).first).to_be_visible()
        runs = page.get_by_role("link", name=re.compile(r"^Open run \d+$"))
        expect(runs).to_have_count(2)
        assert all("run_id=" in (runs.nth(k).get_attribute("href") or "") for k in range(2))
        assert_no_failure(page, page.url)
        assert not errors, errors
        page.screenshot(path=str(_artifacts() / "compare.png"), full_page=True)


def _artifacts():
    from conftest import ROOT

    folder = ROOT / "test-artifacts"
    folder.mkdir(exist_ok=True)
    return folder


def test_compare_shows_costs_and_two_answers_side_by_side_with_their_verdicts_at_1280_px(compared_app):
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 2000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{compared_app}/compare?a=before&b=after")
        expect(page.get_by_text("B: after", exact=True).first).to_be_visible(timeout=60_000)
        # latency and tokens, with B − A
        for label in ("latency p50", "latency p95", "tokens"):
            expect(page.get_by_test_id("stMetric").filter(has_text=label).first).to_be_visible(timeout=30_000)
        open_item_by_item(page)
        # the item that got worse: A's answer (supported) on the left, B's (unsupported) on the right, each with
        # its claims' verdicts as the drilldown shows them
        # (an answer carries its claims' badges; the evidence in a closed expander holds the same words)
        answer = page.get_by_test_id("stMarkdownContainer")
        a_answer = answer.filter(has_text=re.compile(r"21 million passages.*claim \d")).first
        b_answer = answer.filter(has_text=re.compile(r"42 million passages.*claim \d")).first
        expect(a_answer).to_be_visible(timeout=30_000)
        expect(b_answer).to_be_visible()
        left, right = a_answer.bounding_box(), b_answer.bounding_box()
        assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 150, (left, right)
        supported = page.get_by_test_id("stExpander").filter(has_text="— supported").first
        unsupported = page.get_by_test_id("stExpander").filter(has_text="— unsupported").first
        expect(supported).to_be_visible()
        expect(unsupported).to_contain_text("42 million")
        assert supported.bounding_box()["x"] < unsupported.bounding_box()["x"]
        # model text stays text: no link or element of its own
        assert page.locator("a[href*='evil.example']").count() == 0
        assert_no_failure(page, page.url)
        assert not errors, errors
        page.screenshot(path=str(_artifacts() / "compare-items.png"), full_page=True)
