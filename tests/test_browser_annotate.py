"""Annotate in headless Chromium: the keyboard alone rates an answer, and a fixed error does not linger; a key
press reruns the rating form alone (a fragment), and saving refreshes the page's count."""

from __future__ import annotations

from browser_server import chromium, wait_idle
from conftest import ROOT
from test_browser import running_app  # noqa: F401 - running_app is a fixture


def record_reruns(page) -> list[str]:
    """The fragment id of every rerun the browser asks for, in order ('' for a run of the whole page)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    reruns = []

    def sent(payload):
        if isinstance(payload, bytes):
            message = BackMsg.FromString(payload)
            if message.WhichOneof("type") == "rerun_script":
                reruns.append(message.rerun_script.fragment_id)

    page.on("websocket", lambda socket: socket.on("framesent", sent))
    return reruns


def press(page, key: str) -> None:
    """A key press once the app is idle: on a loaded machine, a key pressed while a run still drew the page (the
    popover closing, the last score) found its button not yet drawn again, and nothing happened."""
    wait_idle(page)
    page.keyboard.press(key)


def test_keys_rate_an_answer_and_the_error_goes_once_it_is_fixed(running_app, settings):  # noqa: F811
    from playwright.sync_api import expect
    from test_evaluation import ITEMS, dataset

    from pipeline.calibration.annotations import CRITERIA, criterion_rubric, ratings_for
    from pipeline.evaluation.runner import run_evaluation
    from store.db import Database

    db = Database(settings.store_path, 10, 0)
    run_evaluation(settings, db, dataset(ITEMS[:1]), "to-rate")
    db.close()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 2200})
        reruns = record_reruns(page)
        page.goto(f"{running_app}/annotate")
        name = page.get_by_label("Your name (ratings are saved under it)")
        name.wait_for(timeout=60_000)
        name.fill("ana")
        name.press("Enter")
        expect(page.get_by_text("Keys: 1–5 score correctness", exact=False)).to_be_visible(timeout=30_000)
        _, anchors = criterion_rubric("correctness")
        rubric = page.get_by_text(anchors[5][:60], exact=False)
        expect(rubric).to_be_hidden()  # the rubric is a click away, in the popover under the criterion's scores
        page.get_by_role("button", name="Rubric").first.click()
        expect(rubric).to_be_visible(timeout=30_000)
        page.keyboard.press("Escape")
        expect(rubric).to_be_hidden(timeout=30_000)
        expect(page.get_by_text("0 rated of 1")).to_be_visible()
        before = len(reruns)
        page.get_by_role("heading", name="Annotate").click()  # keys typed into the name box are not shortcuts
        press(page, "n")
        error = page.get_by_text("Give a score for correctness", exact=False)
        expect(error).to_be_visible(timeout=30_000)
        correctness = page.get_by_role("radiogroup", name="Correctness")
        correctness.locator("label").nth(3).click()  # fixed with the mouse: 4
        expect(correctness.get_by_role("radio").nth(3)).to_be_checked(timeout=30_000)
        expect(error).to_have_count(0)  # the error went with the fix, before saving again
        page.get_by_role("heading", name="Annotate").click()  # out of the radio: keys there are not shortcuts
        for criterion in CRITERIA[1:]:
            expect(page.get_by_text(f"Keys: 1–5 score {criterion}", exact=False)).to_be_visible(timeout=30_000)
            press(page, "3")
            group = page.get_by_role("radiogroup", name=criterion.capitalize())
            expect(group.get_by_role("radio").nth(2)).to_be_checked(timeout=30_000)
        # every score, key and the failed save reran the form alone, never the page with its reads of the store
        assert len(reruns) > before and all(reruns[before:]), reruns[before:]
        press(page, "n")
        expect(page.get_by_text("Saved run", exact=False)).to_be_visible(timeout=30_000)
        expect(page.get_by_text("The verifier's verdicts on run", exact=False)).to_be_visible()
        expect(page.get_by_text("1 rated of 1")).to_be_visible()  # the save reran the page: its count too
        page.screenshot(path=str(ROOT / "test-artifacts" / "annotate.png"), full_page=True)
    db = Database(settings.store_path, 10, 0)
    try:
        [rating] = ratings_for(db, list(range(1, 10)))
    finally:
        db.close()
    assert rating["annotator"] == "ana" and [rating[c] for c in CRITERIA] == [4] + [3] * (len(CRITERIA) - 1)
