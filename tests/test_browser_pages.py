"""Every page in headless Chromium against the fake Ollama and a store with a chat answer, a rated evaluation
and a regression alert: it shows its key content, and no exception or crashed component."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from browser_server import app_env, assert_no_failure, chromium, new_page, prepared_store, serving
from fake_ollama import FakeOllama
from test_app_datasets import pending_item
from test_browser import CHROMIUM, QUESTION
from test_evaluation import dataset
from test_regression import store_run

from pages.views.navigation import PAGES as NAV_PAGES
from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.calibration.annotations import save_rating
from pipeline.evaluation.datasets import save as save_dataset
from pipeline.evaluation.judge import CRITERIA
from pipeline.evaluation.regression import check
from pipeline.evaluation.runner import run_evaluation
from pipeline.history.evaluations import list_eval_runs, run_ids_of
from store.db import Database

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def app(ingested_store, tmp_path_factory):
    with FakeOllama() as fake:
        store, settings = prepared_store(ingested_store, tmp_path_factory.mktemp("pages"), fake.url)
        db = Database(str(store), 10, 0)
        try:
            chat = final_result(VerifiedQueryEngine(settings=settings, db=db).stream(QUESTION))
            run_evaluation(settings, db, dataset(), "first")
            for run_id in run_ids_of(db, list_eval_runs(db)[0]["id"]):
                save_rating(db, run_id, "ana", dict.fromkeys(CRITERIA, 1))
            base = np.linspace(0.8, 1.0, 20)
            store_run(db, "monday", {"faithfulness": base})
            store_run(db, "tuesday", {"faithfulness": base - 0.4})
            check(db, settings, "tuesday")
            save_dataset(db, "golden", [pending_item()], "synthesised")
        finally:
            db.close()
        with serving(app_env(store, fake.url)) as url, chromium() as browser:
            yield SimpleNamespace(url=url, browser=browser, chat_run=chat.run_id)


def visit(app, path: str, heading: str, texts: list[str]):
    """Open the page, wait for its heading and texts, and check nothing failed; the page, for more checks."""
    from playwright.sync_api import expect

    page = new_page(app.browser)
    page.goto(f"{app.url}/{path}", timeout=90_000)
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(timeout=90_000)
    for text in texts:
        expect(page.get_by_text(text, exact=False).first).to_be_visible(timeout=60_000)
    sidebar = page.get_by_test_id("stSidebar")
    alerts = sidebar.get_by_text(re.compile(r"^[1-9]\d* open regression alerts?$")).first
    expect(alerts).to_be_visible(timeout=30_000)
    page.wait_for_timeout(1000)  # anything still rendering has had its chance to fail
    assert_no_failure(page, path)
    return page


# what each page must show beyond its heading, and a query string where the page needs one; a page not named here
# is still visited (its heading, no exception)
KEY_CONTENT = {
    "evaluate": ("?eval=first", ["Diagnosis:", "Results"]),
    "datasets": ("", ["golden, version 1", "Keys: A accepts"]),
    "runs": ("", ["runs match;", "Export the filtered runs"]),
    "annotate": ("", ["Your name (ratings are saved under it)"]),
    "calibration": ("", ["Correctness", "Corrections for the judge"]),
    "trends": ("", ["Alerts", "faithfulness"]),
    "detector": ("", ["Run a benchmark"]),
    "knowledge_base": ("", ["Uploaded files are saved in", "A document"]),
    "settings": ("", ["Health", "reachable at"]),
    "compare": ("", ["B is the newest run"]),
    "experiments": ("", ["No sweeps yet", "Run a sweep"]),
}
PAGES = [
    (p.url_path + KEY_CONTENT.get(p.url_path, ("", []))[0], p.title, KEY_CONTENT.get(p.url_path, ("", []))[1])
    for p in NAV_PAGES
]


@pytest.mark.parametrize(("path", "heading", "texts"), PAGES, ids=[p[1] for p in PAGES])
def test_page_shows_its_key_content_without_an_exception(app, path, heading, texts):
    visit(app, path, heading, texts).close()


def test_chat_has_its_input(app):
    from playwright.sync_api import expect

    page = visit(app, "", "Chat", [])
    expect(page.get_by_test_id("stChatInputTextArea")).to_be_visible(timeout=30_000)
    page.close()


def test_evaluate_shows_the_linked_evaluation_with_its_metric_tiles(app):
    from playwright.sync_api import expect

    page = visit(app, "evaluate?eval=first", "Evaluate", ["Diagnosis:"])
    expect(page.get_by_role("combobox", name="Evaluation", exact=True)).to_have_value("first", timeout=30_000)
    expect(page.get_by_test_id("stMetric").nth(3)).to_be_visible(timeout=30_000)  # a tile per metric
    page.close()


def test_a_chat_answer_opens_in_its_drilldown(app):
    page = visit(app, f"runs?run_id={app.chat_run}", f"Run {app.chat_run}", ["Claims", "Rate this run"])
    assert page.get_by_role("link", name="Evaluation first").count() == 0  # a chat answer belongs to none
    page.close()


def test_calibration_heatmap_labels_every_score(app):
    from playwright.sync_api import expect

    page = visit(app, "calibration", "Calibration", ["Correctness"])
    chart = page.get_by_test_id("stPlotlyChart").first  # correctness: judge x human
    x_labels = chart.locator("g.xaxislayer-above g.xtick text")  # plotly's SVG: a group per tick label
    y_labels = chart.locator("g.yaxislayer-above g.ytick text")
    y_labels.nth(4).wait_for(state="attached", timeout=60_000)
    # retried until it holds: plotly redraws the SVG when the chart's width settles as the page fills
    expect(x_labels).to_have_text(["1", "2", "3", "4", "5"], timeout=30_000)
    # plotly writes an axis's ticks from its start, the bottom: 5 at the foot, so judge score 1 heads the grid
    expect(y_labels).to_have_text(["5", "4", "3", "2", "1"], timeout=30_000)
    page.close()


FETCHED_SCRIPTS = """() => performance.getEntriesByType('resource')
  .filter(r => r.name.includes('/static/js/') && r.transferSize > 0).map(r => r.name.split('/').pop())"""


def test_a_later_page_finds_its_element_scripts_in_the_browser_cache_once_the_first_page_prefetched_them(app):
    """A browser's first page asks for the scripts of every element kind the pages draw (pages/views/prefetch.py);
    Evaluate's first render in a new tab then fetches none from the server. A browser that already holds the set's
    version (so its first page asks for nothing) fetches the metric tile's and the select box's there."""
    from playwright.sync_api import expect

    from pages.views.prefetch import prefetch_script

    version = re.search(r'version = "([0-9a-f]+)"', prefetch_script()).group(1)
    fetched = {}
    for prefetched in (True, False):
        context = app.browser.new_context(viewport={"width": 1400, "height": 1800})
        try:
            if not prefetched:
                context.add_init_script(f"localStorage.setItem('workbench-prefetched', '{version}')")
            first = context.new_page()
            first.goto(app.url, timeout=90_000)
            expect(first.get_by_role("heading", name="Chat", exact=True)).to_be_visible(timeout=90_000)
            if prefetched:  # the set's version is kept once every file has come
                first.wait_for_function(f"localStorage.getItem('workbench-prefetched') === '{version}'", timeout=90_000)
            page = context.new_page()
            page.goto(f"{app.url}/evaluate?eval=first", timeout=90_000)
            expect(page.get_by_test_id("stMetric").nth(3)).to_be_visible(timeout=60_000)
            fetched[prefetched] = page.evaluate(FETCHED_SCRIPTS)
        finally:
            context.close()
    assert fetched[True] == []
    assert any(f.startswith("Metric.") for f in fetched[False]), fetched
    assert any(f.startswith("Selectbox.") for f in fetched[False]), fetched
