"""An answer in headless Chromium at 1280 px: each claim marker sits on its own sentence, the claims table fits
without a horizontal scroll, and an abstention shows what it withheld and why, as text."""

from __future__ import annotations

from browser_server import chromium
from test_browser import QUESTION, running_app  # noqa: F401 - running_app is a fixture

# Each claim marker (a badge) and what is just before and after it.
MARKERS = """
(root) => [...root.querySelectorAll('.stMarkdownBadge')].map((badge) => ({
  text: badge.innerText,
  before: badge.previousSibling ? (badge.previousSibling.nodeType === 1 ? 'element' : 'text') : null,
  beforeClass: badge.previousSibling && badge.previousSibling.className || '',
  beforeText: badge.previousSibling ? badge.previousSibling.textContent : '',
  afterText: badge.nextSibling ? badge.nextSibling.textContent : '',
}))
"""
# Elements inside root that scroll sideways (their content is wider than they are).
SIDEWAYS = """
(root) => [...root.querySelectorAll('*'), root]
  .filter((e) => e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
  .map((e) => (e.getAttribute('data-testid') || e.tagName) + ' ' + e.scrollWidth + '>' + e.clientWidth)
"""


def ask(page, url: str, question: str) -> None:
    page.goto(url)
    box = page.get_by_test_id("stChatInputTextArea")
    box.wait_for(timeout=60_000)
    box.fill(question)
    box.press("Enter")


def test_each_claim_marker_belongs_to_its_sentence_and_the_claims_table_fits_1280_px(running_app):  # noqa: F811
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        ask(page, running_app, QUESTION)
        expect(page.get_by_text("accepted: faithfulness", exact=False).first).to_be_visible(timeout=60_000)
        answer = page.get_by_test_id("stChatMessage").last
        markers = answer.evaluate(MARKERS)
        assert len(markers) == 2, markers  # the fake's answer: two sentences, one claim each
        for n, marker in enumerate(markers, start=1):
            assert f"claim {n}" in marker["text"], marker
            # right after its sentence's last character, no space between; the space comes after the marker
            assert marker["before"] == "element" and "stMarkdownColoredBackground" in marker["beforeClass"], marker
            assert marker["beforeText"].rstrip() == marker["beforeText"] and marker["beforeText"].endswith("."), marker
            assert marker["afterText"] == "" or marker["afterText"].startswith(" "), marker
        answer.get_by_text("Claims (2)").click()
        table = answer.get_by_test_id("stTable")
        expect(table).to_be_visible()
        for column in ("claim", "verdict", "verifier", "evidence"):
            header = table.get_by_role("columnheader", name=column, exact=True)
            expect(header).to_be_in_viewport()
        assert answer.evaluate(SIDEWAYS) == []  # nothing in the answer scrolls sideways
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        expect(table.get_by_text("21 million", exact=False).first).to_be_visible()  # the evidence, wrapped


def test_an_abstention_shows_the_withheld_answer_and_why_as_text(running_app, fake):  # noqa: F811
    from playwright.sync_api import expect

    withheld = "<img src=x onerror=alert(1)> The RAG paper won the best paper award at ICML 2019 [1]."
    fake.enqueue(withheld, model="llama3.2", match=lambda body: not body.get("format"), times=3)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        ask(page, running_app, QUESTION)
        expect(page.get_by_text("no answer could be verified against them", exact=False)).to_be_visible(timeout=90_000)
        answer = page.get_by_test_id("stChatMessage").last
        box = answer.locator("[class*='st-key-withheld-']")
        expect(box).to_be_visible()
        expect(box.locator(".stMarkdownBadge").filter(has_text="Withheld")).to_be_visible()
        expect(box).to_contain_text("not given as the answer: faithfulness below the threshold")
        expect(box.get_by_text(withheld)).to_be_visible()  # the model's words, the tag shown as text
        expect(box.locator(".stMarkdownBadge").filter(has_text="claim 1")).to_be_visible()  # its claim's verdict
        assert page.locator("img[src='x']").count() == 0
