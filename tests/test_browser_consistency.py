"""One vocabulary and one format (issues 29 and 51), in headless Chromium at 1280x1000: every page declared in
pages/views/navigation.py, on a store that gives each of them content (a chat answer, two evaluations of which one
abstains on an item, people's ratings, a regression alert, a detector benchmark, a sweep), shows no missing value as
"None" or "nan" (in a table's drawn cells too) and no raw float in a table; no glyph the fonts cannot draw (each
character beyond ASCII drawn on a canvas and compared with the missing-glyph box; the old emoji status labels
rendered as such boxes) and no U+FFFD, private-use or unassigned character; no label, caption, alert or link whose
text is cut; no snake_case name (`item_id`, `extraction_error`) in visible text or in a table's drawn cells; and no
table clipped at 1280 px (a data grid whose scroller is wider than its box). The drilldown is checked tab by tab, the
side-by-side view of Compare on an abstained answer, Annotate with an answer to rate. A screenshot of each goes to
test-artifacts/consistency-*.png."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from browser_server import app_env, assert_no_failure, chromium, open_item_by_item, prepared_store, screenshot, serving
from fake_ollama import FakeOllama
from test_app_datasets import pending_item
from test_browser import CHROMIUM, QUESTION
from test_compare import RAG_QUESTION, WRONG
from test_evaluation import ITEMS, dataset
from test_regression import store_run

from pages.views.navigation import DRILLDOWN_TABS
from pages.views.navigation import PAGES as NAV_PAGES
from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.calibration.annotations import save_rating
from pipeline.detector.bench import run_detector_bench
from pipeline.detector.results import SAMPLE
from pipeline.evaluation.datasets import save as save_dataset
from pipeline.evaluation.judge import CRITERIA
from pipeline.evaluation.regression import check
from pipeline.evaluation.runner import run_evaluation
from pipeline.experiments import run_sweep
from pipeline.history.evaluations import list_eval_runs, run_ids_of
from store.db import Database

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (apt-get install -y chromium)"
)

# The emoji the status labels carried before the pages showed Material icons (pipeline/answering/status.py keeps
# them for the terminal): without an emoji font, Chromium draws each as an empty box.
OLD_STATUS_EMOJI = "✅⚠🤐🎯ℹ❔🚫⏹⏳"

# Every text on the page that the fonts cannot draw: each distinct character beyond ASCII is drawn on a canvas in
# the page's font and compared with an unassigned code point's drawing (the missing-glyph box). Material icons are
# ligatures of ASCII names, so they are never looked at.
TOFU_JS = """
(old) => {
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    if (!el || !el.checkVisibility() || el.closest('script, style')) continue;
    texts.push(node.textContent);
  }
  const chars = new Set([...texts.join('')].filter(c => c.codePointAt(0) > 0x7f && c.trim()));
  const font = getComputedStyle(document.body).fontFamily;
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 48;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = (c) => {
    ctx.clearRect(0, 0, 48, 48);
    ctx.font = `32px ${font}`;
    ctx.fillStyle = '#000';
    ctx.fillText(c, 4, 36);
    return ctx.getImageData(0, 0, 48, 48).data.join(',');
  };
  window.__measuring = true;
  const missing = draw('\\u0378');  // an unassigned code point: the box drawn for a missing glyph
  const found = [...chars].filter(c => old.includes(c) || draw(c) === missing);
  window.__measuring = false;
  return found;
}
"""

# A table's cells are drawn on a canvas (its accessible table holds the raw values, not what is shown): every text
# drawn is recorded, from before the page's own scripts run, so the cells can be read as shown.
RECORD_DRAWN_JS = """
window.__drawn = new Map();  // each text drawn -> the canvas it was last drawn on
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
  if (!window.__measuring) window.__drawn.set(String(text), this.canvas);
  return fillText.call(this, text, ...rest);
};
"""
# The texts drawn on a canvas that is shown now (a grid in a tab not open keeps its canvas, hidden); a canvas not in
# the page (a buffer copied onto the shown one) counts as shown.
DRAWN_SHOWN_JS = "() => [...window.__drawn].filter(([, c]) => !c?.isConnected || c.checkVisibility()).map(([t]) => t)"

# A table cell that shows a missing value as None or nan, or a number in Python's repr (a raw float: 14.0885...).
BAD_CELL = r"^(None|nan|NaN|-?\d+\.\d{4,})$"

# A value shown as Python or pandas spells a missing one: a cell, a label, a caption or a paragraph whose whole text
# (or a "name value" pair in it) is None or nan.
MISSING_JS = """
() => {
  const bad = [];
  const cells = document.querySelectorAll('td, th, [data-testid="stMetricValue"], [data-testid="stCaptionContainer"],'
    + ' [data-testid="stMarkdownContainer"] p, label, [data-testid="stExpander"] summary');
  for (const el of cells) {
    if (!el.checkVisibility() && !el.closest('[data-testid="stDataFrame"]')) continue;
    const text = el.textContent.trim();
    if (/(^|[\\s:=(·])(None|nan|NaN)($|[\\s,;)·])/.test(text)) bad.push(text.slice(0, 120));
  }
  return bad;
}
"""

# Text cut by its box: a label, caption, alert, link, tab, metric or markdown element (or a child) wider than the box
# that hides or ellipsises what does not fit.
CUT_JS = """
() => {
  const selector = ['label', '[data-testid="stCaptionContainer"]', '[data-testid="stAlertContainer"]',
    '[data-testid="stPageLink"]', '[data-testid="stMetricLabel"]', '[data-testid="stMetricValue"]',
    '[data-testid="stMetricDelta"]', '[data-testid="stMarkdownContainer"]', 'button[role="tab"]',
    '[data-testid="stExpander"] summary', '[data-testid="stWidgetLabel"]'].join(', ');
  const cut = [];
  for (const root of document.querySelectorAll(selector)) {
    for (const el of [root, ...root.querySelectorAll('*')]) {
      if (!el.checkVisibility() || !el.textContent.trim()) continue;
      const style = getComputedStyle(el);
      const hides = style.textOverflow === 'ellipsis' || ['hidden', 'clip'].includes(style.overflowX);
      if (hides && el.scrollWidth > el.clientWidth + 1) cut.push(el.textContent.trim().slice(0, 120));
    }
  }
  return [...new Set(cut)];
}
"""


# The tofu check also fails on a replacement character (U+FFFD, text decoded wrongly) and on a private-use or
# unassigned code point anywhere in visible text, whatever the fonts draw for it.
NO_GLYPH_JS = """
() => {
  const found = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!el || !el.checkVisibility() || el.closest('script, style')) continue;
    for (const c of walker.currentNode.textContent) {
      if (/[\\uFFFD\\p{Co}\\p{Cn}]/u.test(c)) found.add('U+' + c.codePointAt(0).toString(16).toUpperCase());
    }
  }
  return [...found];
}
"""

# An internal name shown as a label: a lower-case word joined to another by "_" (item_id, not_applicable,
# metric_context_precision). Code spans, inputs (what a user typed), Material icons (ligatures of snake_case
# names, drawn as icons), file names and a setting as the user writes it (top_k=3, in a sweep's combination) are not
# labels.
SNAKE_CASE = r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/=]|\.\w)"
SNAKE_JS = """
(pattern) => {
  const snake = new RegExp(pattern, 'g');
  const found = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!el || !el.checkVisibility() || el.closest('script, style, code, pre, textarea, input')) continue;
    if (getComputedStyle(el).fontFamily.includes('Material Symbols')) continue;
    for (const m of walker.currentNode.textContent.matchAll(snake)) found.add(m[0]);
  }
  return [...found];
}
"""

# A data grid wider than its box at 1280 px: its scroller's content is wider than what it shows.
CLIPPED_TABLE_JS = """
() => [...document.querySelectorAll('[data-testid="stDataFrame"]')]
  .filter((grid) => grid.checkVisibility())
  .map((grid) => [grid, grid.querySelector('.dvn-scroller')])
  .filter(([, s]) => s && s.scrollWidth > s.clientWidth + 1)
  .map(([grid, s]) => (grid.closest('[data-testid="stVerticalBlock"]')?.querySelector('[data-testid="stHeading"],'
    + ' [data-testid="stMarkdownContainer"]')?.textContent || 'a table').slice(0, 60) + ': ' + s.scrollWidth + ' > '
    + s.clientWidth)
"""


@pytest.fixture(scope="module")
def app(ingested_store, tmp_path_factory):
    with FakeOllama() as fake:
        store, settings = prepared_store(ingested_store, tmp_path_factory.mktemp("consistency"), fake.url)
        db = Database(str(store), 10, 0)
        try:
            chat = final_result(VerifiedQueryEngine(settings=settings, db=db).stream(QUESTION))
            # a sweep for Experiments, first (other top_k than the evaluations', so it answers none of their calls);
            # 3 items: too few for its tests, whose missing values must show as such
            run_sweep(settings, db, dataset(ITEMS[:3]), "depth", ["top_k=3,4"], concurrency=1)
            run_evaluation(settings, db, dataset(ITEMS[:3]), "before", concurrency=1)
            # 'after': the RAG question answered with a number no source holds, not retried, so the run abstains
            fake.enqueue(
                WRONG,
                model="llama3.2",
                match=lambda body: not body.get("format") and RAG_QUESTION in json.dumps(body.get("messages")),
            )
            changed = dataclasses.replace(settings, cache_enabled=False, max_retries=0, when_unverified="abstain")
            run_evaluation(changed, db, dataset(ITEMS[:3]), "after", concurrency=1)
            evaluations = {r["name"]: r["id"] for r in list_eval_runs(db)}
            item_runs = run_ids_of(db, evaluations["before"])
            for n, run_id in enumerate(item_runs):
                save_rating(db, run_id, "ana", dict.fromkeys(CRITERIA, 1 + 2 * n))
            base = np.linspace(0.8, 1.0, 20)
            store_run(db, "monday", {"faithfulness": base})
            store_run(db, "tuesday", {"faithfulness": base - 0.4})
            check(db, settings, "tuesday")
            save_dataset(db, "golden", [pending_item()], "synthesised")
            run_detector_bench(settings, db, str(SAMPLE), "precheck", "answer", limit=12)
        finally:
            db.close()
        with serving(app_env(store, fake.url)) as url, chromium() as browser:
            yield SimpleNamespace(url=url, browser=browser, chat_run=chat.run_id, item_run=item_runs[0])


def open_page(app, path: str, heading: str):
    from playwright.sync_api import expect

    page = app.browser.new_page(viewport={"width": 1280, "height": 1000})
    page.add_init_script(RECORD_DRAWN_JS)
    page.set_default_timeout(60_000)
    page.goto(f"{app.url}/{path}", timeout=90_000)
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(timeout=90_000)
    return page


def settled(page) -> None:
    """Wait until the script has finished and nothing is left stale or as a skeleton."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]') && "
        '!document.querySelector(\'[data-stale="true"], [data-testid="stSkeleton"]\')',
        timeout=60_000,
    )
    page.wait_for_timeout(800)


def whole_page_screenshot(page, name: str) -> None:
    """The app scrolls inside its main block, not the document: the viewport is made as tall as that block for the
    picture (the width, which decides what fits, stays 1280 px)."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 1000")
    page.set_viewport_size({"width": 1280, "height": max(1000, min(int(height), 12_000))})
    page.wait_for_timeout(500)
    screenshot(page, f"consistency-{name}.png")
    page.set_viewport_size({"width": 1280, "height": 1000})


# The drilldown's Trace tab shows spans by their recorded names (judge_correctness) and attributes under their own
# keys (best_similarity), as the tracing sends them: data, not labels, as in any trace explorer. So the Trace tab is
# not held to the snake_case checks; it is held to the others, its tables fitting 1280 px among them.
TRACE_DATA = (
    "snake_case names in visible text",
    "snake_case names in a table's drawn cells",
)


def assert_consistent(page, name: str, not_checked: tuple[str, ...] = ()) -> None:
    settled(page)
    whole_page_screenshot(page, name)  # first: every table on the page is drawn
    assert_no_failure(page, name)
    drawn = page.evaluate(DRAWN_SHOWN_JS)
    problems = {
        "table cells drawn as None, nan or a raw float": sorted(t for t in drawn if re.match(BAD_CELL, t.strip())),
        "shown as None or nan": page.evaluate(MISSING_JS),
        "glyphs the fonts cannot draw": page.evaluate(TOFU_JS, OLD_STATUS_EMOJI),
        "cut text": page.evaluate(CUT_JS),
        "replacement, private-use or unassigned characters": page.evaluate(NO_GLYPH_JS),
        "snake_case names in visible text": page.evaluate(SNAKE_JS, SNAKE_CASE),
        "snake_case names in a table's drawn cells": sorted({m for t in drawn for m in re.findall(SNAKE_CASE, t)}),
        "tables clipped at 1280 px": page.evaluate(CLIPPED_TABLE_JS),
    }
    found = {what: shown for what, shown in problems.items() if shown and what not in not_checked}
    assert not found, f"{name}: " + "; ".join(f"{what}: {shown}" for what, shown in found.items())


QUERIES = {"evaluate": "?eval=before", "compare": "?a=before&b=after"}  # pages that need one to show their content
PAGES = [(p.url_path + QUERIES.get(p.url_path, ""), p.title, p.url_path or "chat") for p in NAV_PAGES]


@pytest.mark.parametrize(("path", "heading", "name"), PAGES, ids=[p[2] for p in PAGES])
def test_every_page_shows_one_vocabulary_and_one_format(app, path, heading, name):
    page = open_page(app, path, heading)
    assert_consistent(page, name)
    page.close()


def test_compare_shows_the_abstained_answer_with_the_shared_status_label(app):
    from playwright.sync_api import expect

    page = open_page(app, "compare?a=before&b=after", "Compare evaluations")
    open_item_by_item(page)
    # B abstained on the item: its status as on every page, a Material icon and the shared label
    status = page.get_by_test_id("stCaptionContainer").filter(has_text=re.compile(r"abstained$"))
    expect(status).to_have_text(re.compile(r"^do_not_disturb_on\s*abstained$"))  # the icon is a ligature's name
    icon = status.locator("span", has_text=re.compile("^do_not_disturb_on$")).last
    font = icon.evaluate("e => getComputedStyle(e).fontFamily")
    assert "Material Symbols" in font, font
    assert_consistent(page, "compare-abstained")
    page.close()


def test_annotate_with_an_answer_to_rate(app):
    page = open_page(app, "annotate", "Annotate")
    page.get_by_label("Your name (ratings are saved under it)").fill("bo")
    page.keyboard.press("Enter")
    page.get_by_test_id("stSelectbox").filter(has_text="Rate the answers of").click()
    page.get_by_role("option", name="before", exact=True).click()
    page.get_by_text(re.compile("Wikipedia index|BLEU|capital city of Peru")).first.wait_for()
    assert_consistent(page, "annotate-rating")
    page.close()


@pytest.mark.parametrize("run", ["chat_run", "item_run"])
def test_every_tab_of_a_drilldown(app, run):
    run_id = getattr(app, run)
    page = open_page(app, f"runs?run_id={run_id}", f"Run {run_id}")
    settled(page)  # a tab clicked while the run still draws the page can be drawn again unclicked
    for tab in DRILLDOWN_TABS:
        page.get_by_role("tab", name=tab).click()
        # each tab's cells on their own: the tabs rerun as a fragment, and the tab before's tables can draw again
        # while they go (on a canvas then removed), so the record starts once they are gone and every table shown
        # is drawn again (a width change redraws each one)
        settled(page)
        page.evaluate("window.__drawn = new Map()")
        page.set_viewport_size({"width": 1279, "height": 1000})
        page.wait_for_timeout(300)
        page.set_viewport_size({"width": 1280, "height": 1000})
        assert_consistent(page, f"drilldown-{run}-{tab.split()[0].lower()}", TRACE_DATA if tab == "Trace" else ())
    page.close()
