"""The trace viewer in headless Chromium (issue 29): a chat answer's drilldown, its Trace tab, a span picked in
the tree (and one picked with the keyboard) shows its model calls' prompt and completion."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import browser_server
import pytest
from browser_server import (
    app_env,
    assert_no_failure,
    chromium,
    new_page,
    prepared_store,
    screenshot,
    serving,
    wait_idle,
)
from fake_ollama import FakeOllama
from test_browser import CHROMIUM, QUESTION

from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.history.runs import load_run
from pipeline.history.trace_view import picker_label, trace_rows
from store.db import Database

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)
ANSWER = "The RAG index held 21 million passages [1]."
ROW_PX = 35  # the height of a row (and of the header) in Streamlit's dataframe


@pytest.fixture(scope="module")
def app(ingested_store, tmp_path_factory):
    with FakeOllama() as fake:
        store, settings = prepared_store(ingested_store, tmp_path_factory.mktemp("trace"), fake.url)
        db = Database(str(store), 10, 0)
        try:
            fake.enqueue(ANSWER, model="llama3.2", match=lambda body: not body.get("format"))
            run_id = final_result(VerifiedQueryEngine(settings=settings, db=db).stream(QUESTION)).run_id
            stored = load_run(db, run_id)
        finally:
            db.close()
        answer_call = next(c for c in stored.calls if c["completion_text"] == ANSWER)
        rows = trace_rows(stored.spans, stored.calls)
        row = next(n for n, r in enumerate(rows) if r.span_id == answer_call["span_id"])
        with serving(app_env(store, fake.url)) as url, chromium() as browser:
            yield SimpleNamespace(
                url=url,
                browser=browser,
                run_id=run_id,
                row=row,
                span=rows[row].name,
                label=picker_label(rows[row], row + 1),  # "12. ␣␣␣␣Ollama.stream_chat  (llm)": indented by depth
            )


def open_trace_tab(app):
    page = new_page(app.browser)
    return page, browser_server.open_trace_tab(page, app.url, app.run_id)


def expect_the_answer_call(panel) -> None:
    from playwright.sync_api import expect

    expect(panel.get_by_text("Call 1 · generate · llama3.2", exact=False)).to_be_visible(timeout=60_000)
    codes = panel.get_by_test_id("stCode")
    expect(codes.filter(has_text=ANSWER)).to_be_visible(timeout=30_000)  # the completion
    expect(codes.filter(has_text=QUESTION).first).to_be_visible(timeout=30_000)  # the prompt


def click_tree_row(page, tree, row: int) -> None:
    """The grid draws on a canvas: scroll the row into view, then click its selection box at the row's start."""
    scrolled = tree.evaluate(
        "(el, top) => { const s = el.querySelector('.dvn-scroller'); s.scrollTop = top; return s.scrollTop; }",
        max(0, (row - 2) * ROW_PX),
    )
    page.wait_for_timeout(300)
    box = tree.bounding_box()
    page.mouse.click(box["x"] + 16, box["y"] + ROW_PX + row * ROW_PX - scrolled + ROW_PX / 2)


def test_the_trace_viewer_opens_a_span_picked_in_the_tree_and_shows_its_calls(app):
    from playwright.sync_api import expect

    page, panel = open_trace_tab(app)
    expect(panel.get_by_text("Call 1 · generate", exact=False)).to_have_count(0)  # the root is open: no calls
    tree = panel.get_by_test_id("stDataFrame").first
    expect(tree).to_be_visible(timeout=30_000)
    chosen = panel.get_by_role("combobox", name="Span")
    for _ in range(3):  # on a loaded machine the grid may still be settling when clicked: a lost click is retried
        click_tree_row(page, tree, app.row)
        try:
            expect(chosen).to_have_value(app.label, timeout=10_000)
            break
        except AssertionError:
            continue
    expect(chosen).to_have_value(app.label, timeout=60_000)
    expect_the_answer_call(panel)
    assert_no_failure(page, "trace")
    screenshot(page, "trace-viewer.png")
    page.close()


def test_the_trace_viewer_opens_a_span_chosen_with_the_keyboard(app):
    page, panel = open_trace_tab(app)
    spans = panel.get_by_role("combobox", name="Span")
    wait_idle(page)
    spans.click()
    page.keyboard.type(app.span)  # a part of the name finds the span
    page.keyboard.press("Enter")
    expect_the_answer_call(panel)
    assert_no_failure(page, "trace")
    page.close()
