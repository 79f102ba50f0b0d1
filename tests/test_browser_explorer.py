"""The trace explorer in headless Chromium at 1280 px (issue 51): spans searched across runs (our own and a received
trace's) link to their runs, and a retriever span opened from the waterfall shows its documents' text, score and
source; the tables fit the page."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from browser_server import (
    app_env,
    assert_no_failure,
    chromium,
    open_trace_tab,
    prepared_store,
    screenshot,
    serving,
    wait_idle,
)
from fake_ollama import FakeOllama
from otlp_traces import TOWER, protobuf_body, rag_trace
from starlette.testclient import TestClient
from test_browser import CHROMIUM, QUESTION
from test_browser_runs import grid_text

from pages.views.trace_viewer import TREE_STEP_PX, step_label
from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.collect.receiver import create_app
from pipeline.collect.worker import OnlineWorker
from pipeline.history.runs import load_run
from pipeline.history.trace_view import trace_rows
from store.db import Database
from store.history import RunFilter, find_runs

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)
SLOW_ANSWER = "The RAG index held twenty one million passages in its dense vector index [1]."
FAST_ANSWER = "The RAG index held 21 million passages [1]."
CELL_PADDING_PX = 8  # the grid's padding either side of a cell's text
SECONDS_PER_WORD = 0.06  # the slow answer's 13 words stream for about 0.8 s


@pytest.fixture(scope="module")
def app(ingested_store, tmp_path_factory):
    with FakeOllama() as fake:
        store, settings = prepared_store(ingested_store, tmp_path_factory.mktemp("explorer"), fake.url)
        db = Database(str(store), 10, 0)
        try:
            fake.set_latency(SECONDS_PER_WORD)
            fake.enqueue(SLOW_ANSWER, model="llama3.2", match=lambda body: not body.get("format"))
            slow = final_result(VerifiedQueryEngine(settings=settings, db=db).stream(QUESTION)).run_id
            fake.set_latency(0.0)
            fake.enqueue(FAST_ANSWER, model="llama3.2", match=lambda body: not body.get("format"))
            fast = final_result(VerifiedQueryEngine(settings=settings, db=db).stream(QUESTION + " ")).run_id
            client = TestClient(create_app(db, 1_000_000))
            body = protobuf_body(rag_trace("How tall is the Eiffel Tower?", "330 m.", [(TOWER, "tower.md", 0.8)]))
            client.post("/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
            OnlineWorker(settings, db, settle_s=0).run_once()
            (traced,) = [r["id"] for r in find_runs(db, RunFilter(kinds=["traced"])).rows]
            stored = load_run(db, slow)
            rows = trace_rows(stored.spans, stored.calls)
            labels = [step_label(r, []) for r in rows]
            retrieve = next(n for n, r in enumerate(rows) if r.name == "retrieve")  # round 1's
            chunks = [c for c in stored.retrievals if c["span_id"] == rows[retrieve].span_id]
            generate = [r.latency_ms for r in stored.spans if r.name == "generate"]
        finally:
            db.close()
        assert generate[0] > 500, generate  # the slow run's; the fast run's takes a few ms
        with serving(app_env(store, fake.url)) as url, chromium() as browser:
            yield SimpleNamespace(
                url=url,
                browser=browser,
                slow=slow,
                fast=fast,
                traced=traced,
                retrieve=retrieve,
                chunks=chunks,
                labels=labels,
            )


def wide_page(app):
    page = app.browser.new_page(viewport={"width": 1280, "height": 1100})
    page.set_default_timeout(60_000)
    page.set_default_navigation_timeout(90_000)
    return page


def fits(grid) -> None:
    """The table scrolls no further sideways than it is wide."""
    widths = grid.locator(".dvn-scroller").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert widths[0] <= widths[1] + 1, widths


def test_a_span_search_across_runs_finds_every_retriever_and_the_slow_generation_and_links_to_the_run(app):
    from playwright.sync_api import expect

    page = wide_page(app)
    page.goto(f"{app.url}/spans", timeout=90_000)
    expect(page.get_by_role("heading", name="Search spans", exact=True)).to_be_visible(timeout=90_000)
    wait_idle(page)
    kind = page.get_by_test_id("stSelectbox").filter(has_text="Kind")
    kind.click()
    page.get_by_role("option", name="retriever", exact=True).click()
    # our runs' retrieve steps (and LlamaIndex's retriever spans inside them) and the received trace's retriever
    hits = page.get_by_test_id("stDataFrame").first
    expect(hits.locator("td").filter(has_text="VectorIndexRetriever.retrieve")).to_have_count(1)
    expect(page.get_by_text("in 3 runs", exact=False)).to_be_visible()
    text = grid_text(hits)
    assert "DuckDBRetriever.retrieve" in text and " other " not in text and " llm " not in text, text
    fits(hits)

    wait_idle(page)
    kind.click()
    page.get_by_role("option", name="any kind", exact=True).click()
    wait_idle(page)
    name = page.get_by_label("Span name contains")
    name.fill("generate")
    name.press("Enter")
    expect(page.get_by_text(re.compile(r"\d+ spans in 2 runs"))).to_be_visible()  # both runs generated
    wait_idle(page)
    least = page.get_by_label("Took at least (ms)")
    least.fill("500")
    least.press("Enter")
    expect(page.get_by_text(re.compile(r"\d+ spans? in 1 run\b"))).to_be_visible()  # only the slow one took 0.5 s
    hits = page.get_by_test_id("stDataFrame").first
    fits(hits)
    link = page.get_by_role("link", name=re.compile(rf"^Run {app.slow}: "))
    expect(link).to_be_visible()
    expect(page.get_by_role("link", name=re.compile(rf"^Run {app.fast}: "))).to_have_count(0)
    assert_no_failure(page, "spans")
    screenshot(page, "span-search.png")
    link.click()  # the run's drilldown, on its Trace tab with the slow generation's span selected
    expect(page.get_by_role("heading", name=f"Run {app.slow}", exact=True)).to_be_visible(timeout=90_000)
    panel = page.get_by_role("tabpanel", name="Trace")
    expect(panel.get_by_role("combobox", name="Span")).to_have_value(re.compile(r"generate"), timeout=60_000)
    page.close()


def test_a_retriever_span_clicked_in_the_waterfall_shows_its_documents(app):
    from playwright.sync_api import expect

    page = wide_page(app)
    panel = open_trace_tab(page, app.url, app.slow)
    tree = panel.get_by_test_id("stDataFrame").first
    fits(tree)
    # no step name is cut: the widest, in the grid's font, fits its column (less the cell's padding)
    widest = page.evaluate(
        """labels => { const c = document.createElement('canvas').getContext('2d');
        c.font = '14px ' + getComputedStyle(document.body).fontFamily;
        return Math.max(...labels.map(l => c.measureText(l).width)); }""",
        app.labels,
    )
    assert widest <= TREE_STEP_PX - 2 * CELL_PADDING_PX, (widest, max(app.labels, key=len))
    bars = panel.locator(".js-plotly-plot .bars path")
    expect(bars.nth(app.retrieve)).to_be_attached()
    spans = panel.get_by_role("combobox", name="Span")
    for _ in range(3):  # on a loaded machine a click on a chart still settling can be lost: retried
        bars.nth(app.retrieve).click(force=True)
        try:
            expect(spans).to_have_value(f"{app.retrieve + 1}. \u00a0\u00a0retrieve  (retriever)", timeout=10_000)
            break
        except AssertionError:
            wait_idle(page)
    expect(spans).to_have_value(f"{app.retrieve + 1}. \u00a0\u00a0retrieve  (retriever)", timeout=30_000)
    expect(panel.get_by_text(f"Documents ({len(app.chunks)})", exact=True)).to_be_visible()
    first = min(app.chunks, key=lambda c: c["rank"])
    codes = panel.get_by_test_id("stCode")
    for chunk in app.chunks:  # each document's text, whole, as text
        line = max(chunk["text"].splitlines(), key=len)
        expect(codes.filter(has_text=line[:80]).first).to_be_attached(timeout=30_000)
    source = Path(first["source"]).name
    expect(panel.get_by_text(f"1 · score {first['score']:.2f} · {source}", exact=True)).to_be_visible()
    assert_no_failure(page, "trace")
    screenshot(page, "trace-documents.png")

    # a received trace's retriever span, in the same explorer
    panel = open_trace_tab(page, app.url, app.traced)
    spans = panel.get_by_role("combobox", name="Span")
    spans.click()
    page.keyboard.type("VectorIndexRetriever")
    page.keyboard.press("Enter")
    expect(panel.get_by_text("Documents (1)", exact=True)).to_be_visible()
    expect(panel.get_by_test_id("stCode").filter(has_text=TOWER[:40]).first).to_be_visible()
    expect(panel.get_by_text("1 · score 0.80 · tower.md", exact=True)).to_be_visible()
    assert_no_failure(page, "received trace")
    page.close()
