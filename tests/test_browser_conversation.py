"""A conversation in headless Chromium: a question and a follow-up on the Chat page, both answers shown with their
verdicts, the follow-up read as the standalone question it was retrieved for; New conversation starts afresh."""

from __future__ import annotations

import re

from browser_server import assert_no_failure, chromium, wait_idle
from test_browser import running_app  # noqa: F401 - running_app is a fixture

FIRST = "Who introduced the Transformer?"
FOLLOW_UP = "When was it published?"
STANDALONE = "When was the Transformer published?"
DONE = "Done: accepted"  # the steps' box once the run ends
VERDICT = re.compile(r"accepted: faithfulness at or above the threshold\s*· faithfulness\s*1\.00")  # its status line


def ask(page, question: str) -> None:
    box = page.get_by_test_id("stChatInputTextArea")
    box.wait_for(timeout=60_000)
    wait_idle(page)
    box.fill(question)
    box.press("Enter")


def test_a_question_and_its_follow_up_both_show_their_answers_with_verdicts(running_app):  # noqa: F811
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1800})
        page.goto(running_app)
        messages = page.get_by_test_id("stChatMessage")
        ask(page, FIRST)
        expect(messages).to_have_count(2, timeout=60_000)
        expect(messages.nth(1)).to_contain_text(DONE, timeout=60_000)
        ask(page, FOLLOW_UP)
        expect(messages).to_have_count(4, timeout=60_000)
        expect(messages.nth(3)).to_contain_text(DONE, timeout=60_000)
        wait_idle(page)
        # both turns stay on the page, each answer with its verdicts; the follow-up says what it was retrieved for
        expect(messages.nth(0)).to_contain_text(FIRST)
        expect(messages.nth(1)).to_contain_text("Vaswani")
        expect(messages.nth(2)).to_contain_text(FOLLOW_UP)
        follow_up = messages.nth(3)
        expect(follow_up).to_contain_text(f"retrieved for '{STANDALONE}'")
        expect(follow_up).to_contain_text("transformer.md")  # its sources: this turn's passages
        for answer in (messages.nth(1), follow_up):
            expect(answer).to_contain_text(VERDICT)
            expect(answer.locator(".stMarkdownBadge").filter(has_text="claim 1").first).to_be_visible()
        follow_up.get_by_text("Claims (", exact=False).click()
        expect(follow_up.get_by_test_id("stTable")).to_contain_text("supported")
        assert_no_failure(page, "chat with a follow-up")

        page.get_by_role("button", name="New conversation").click()
        expect(messages).to_have_count(0, timeout=30_000)
        ask(page, FOLLOW_UP)
        expect(messages).to_have_count(2, timeout=60_000)
        wait_idle(page)
        expect(messages.nth(1)).not_to_contain_text("retrieved for")  # nothing earlier to read it with
        assert_no_failure(page, "a new conversation")
