"""Changing a floor on Settings & health in headless Chromium at 1280 px: the file is written, the Evaluate report
reads the new floor at once (no restart), and a refused value shows the loader's message under its field and
writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_server import assert_no_failure, chromium, click_until_run, screenshot, wait_idle
from test_browser import running_app  # noqa: F401 - the fixture
from test_compare import two_real_runs


@pytest.fixture
def evaluated_app(kb_db, settings, fake, request):
    """'before' and 'after' over two items ('after' has a faithfulness mean of 0.50, below the default floor 0.70),
    then the running app, which reads the settings file the test environment names."""
    two_real_runs(fake, settings, kb_db)
    return request.getfixturevalue("running_app")


def save_floors(page, floors: str) -> None:
    field = page.get_by_role("textbox", name="floors")
    field.wait_for(timeout=60_000)
    wait_idle(page)
    field.fill(floors)
    click_until_run(page, page.get_by_role("button", name="Save floors and prices"))
    wait_idle(page)


def test_a_floor_changed_on_settings_applies_at_once_and_a_bad_one_is_refused(evaluated_app):
    from playwright.sync_api import expect

    settings_file = Path(os.environ["WORKBENCH_CONFIG"])
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1200})
        page.goto(f"{evaluated_app}/evaluate?eval=after")
        expect(page.get_by_text("faithfulness 0.50 (floor 0.70)", exact=False)).to_be_visible(timeout=60_000)

        page.goto(f"{evaluated_app}/settings")
        save_floors(page, "faithfulness=0.60")
        expect(page.get_by_text("floors: applied at once", exact=False)).to_be_visible(timeout=30_000)
        assert 'floors = "faithfulness=0.60"' in settings_file.read_text()

        page.goto(f"{evaluated_app}/evaluate?eval=after")  # the same app, not restarted: the new floor applies
        expect(page.get_by_text("faithfulness 0.50 (floor 0.60)", exact=False)).to_be_visible(timeout=60_000)
        assert_no_failure(page, page.url)

        page.goto(f"{evaluated_app}/settings")
        before = settings_file.read_bytes()
        save_floors(page, "faithfulness")
        error = page.get_by_test_id("stAlertContainer").filter(has_text="setting floors = 'faithfulness'")
        expect(error).to_be_visible(timeout=30_000)
        expect(error).to_contain_text("is out of range")
        expect(error).to_contain_text("comma-separated metric=number pairs")
        # next to its field: just below it, in the same column
        field = page.get_by_role("textbox", name="floors").bounding_box()
        box = error.bounding_box()
        assert 0 < box["y"] - (field["y"] + field["height"]) < 200 and abs(box["x"] - field["x"]) < 40, (field, box)
        assert settings_file.read_bytes() == before
        assert_no_failure(page, page.url)
        screenshot(page, "settings-edit.png")
