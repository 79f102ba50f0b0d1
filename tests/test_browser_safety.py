"""Markdown payloads in documents, answers, evaluation names and URLs render as text in the running app: the
browser fetches nothing from any host but the app's own."""

from __future__ import annotations

from urllib.parse import quote, urlparse

import numpy as np
import pytest
from browser_server import chromium
from test_browser import running_app  # noqa: F401 - the fixture
from test_regression import store_run

from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.config import load_settings
from pipeline.evaluation.dataset import GoldenItem
from pipeline.evaluation.datasets import save as save_dataset
from pipeline.evaluation.regression import check
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM

IMAGE = "![tracker](http://evil.example/{}.png)"
LINK = "[log in again](http://phish.example/{})"
HTML = '<img src="http://evil.example/{}-html.png">'
DRILLDOWN_TABS = ("Retrieval", "Trace", "Calls", "Scores")


def payload(where: str) -> str:
    return f"{IMAGE.format(where)} {LINK.format(where)} {HTML.format(where)}"


@pytest.fixture
def poisoned_store(kb_db, settings, fake, tmp_path):
    """A document, an answer, an evaluation name (with a regression alert) carrying image and link payloads."""
    doc = tmp_path / "poisoned.md"
    doc.write_text(f"# Poisoned notes\n\nThe vault code of the archive is 7421. {payload('doc')}\n")
    ingest([str(doc)], settings, kb_db, LLM(settings, kb_db))
    fake.enqueue(f"The vault code is 7421 [1]. {payload('answer')}", match=lambda body: not body.get("format"))
    result = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream("What is the vault code?"))
    base = np.linspace(0.8, 1.0, 20)
    store_run(kb_db, "monday", {"faithfulness": base})
    store_run(kb_db, payload("evaluation"), {"faithfulness": base - 0.4})
    check(kb_db, load_settings(), payload("evaluation"))
    pending = {"review": "pending"}  # shown for review on the Datasets page: question and reference as text
    item = GoldenItem(id="p1", question=payload("question"), reference=payload("reference"), provenance=pending)
    save_dataset(kb_db, "poisoned", [item], "synthesised")
    return result.run_id


@pytest.fixture
def app_after_poison(poisoned_store, request):
    return poisoned_store, request.getfixturevalue("running_app")


def test_no_page_fetches_from_another_host(app_after_poison):
    from playwright.sync_api import expect

    run_id, url = app_after_poison
    app_host = urlparse(url).netloc
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 2000})
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        drilldown = f"{url}/runs?run_id={run_id}"
        visits = [
            (drilldown, "Claims"),
            *((f"{drilldown}#{tab}", tab) for tab in DRILLDOWN_TABS),  # only the chosen tab is drawn
            (f"{url}/runs?run_id={quote(payload('url'))}", "There is no run"),
            (f"{url}/trends", "Alerts"),
            (f"{url}/evaluate", "Evaluation"),
            (f"{url}/knowledge_base", "Knowledge base"),
            (f"{url}/annotate", "Annotate"),
            (f"{url}/evaluate?eval={quote(payload('url'))}", "Evaluate"),
            (f"{url}/compare?a={quote(payload('url'))}", "Compare"),
            (f"{url}/calibration", "Calibration"),
            (f"{url}/datasets", "Datasets"),
        ]
        for target, marker in visits:
            page.goto(target)
            expect(page.get_by_text(marker, exact=False).first).to_be_visible(timeout=60_000)
            if marker in DRILLDOWN_TABS:
                page.wait_for_timeout(1500)  # a tab clicked while the first run still draws is drawn again unclicked
                page.get_by_role("tab", name=marker, exact=True).click()
                expect(page.get_by_role("tabpanel", name=marker).locator("[data-testid]").first).to_be_visible(
                    timeout=60_000
                )
            page.wait_for_timeout(1500)
            # open expanders: claims, alerts (those shown: a drilldown's other tabs hide theirs)
            for summary in [s for s in page.locator("details summary").all() if s.is_visible()][:6]:
                summary.click()
            page.wait_for_timeout(500)
            # the payload is on the page as text, not as a link or an image
            assert page.locator("img[src*='evil.example']").count() == 0, target
            # links to the payload's host (the app's own links may carry a run name in their query string)
            links = page.locator(
                "a[href^='http://phish.example'], a[href^='https://phish.example'], a[href^='//phish.example']"
            )
            where = [
                links.nth(i).evaluate(
                    "e => { let n = e; const path = []; while (n) { if (n.dataset && n.dataset.testid) "
                    "path.push(n.dataset.testid); n = n.parentElement; } return path.join('<') + ' :: ' "
                    "+ (e.closest('[data-testid]') || e).innerText.slice(0, 200); }"
                )
                for i in range(links.count())
            ]
            assert where == [], (target, where)
            if target == drilldown or target.endswith("/datasets"):  # shown, as text
                assert page.get_by_text("phish.example", exact=False).count() > 0, target
        page.screenshot(path="test-artifacts/payloads.png", full_page=True)
    foreign = [u for u in requested if urlparse(u).scheme in ("http", "https", "ws", "wss")]
    foreign = [u for u in foreign if urlparse(u).netloc != app_host]
    assert foreign == []
    assert any(urlparse(u).netloc == app_host for u in requested)
