"""The Datasets page in headless Chromium: the keyboard alone reviews pending items, each key's save a new version
of the dataset that the page names."""

from __future__ import annotations

from browser_server import chromium, wait_idle
from conftest import ROOT
from test_browser import running_app  # noqa: F401 - running_app is a fixture
from test_browser_annotate import press

from pages.views.datasets import ACCEPT_KEY, NEXT_KEY, REJECT_KEY


def test_keys_move_accept_and_reject_pending_items_each_saving_a_version(running_app, settings):  # noqa: F811
    from playwright.sync_api import expect

    from pipeline.evaluation.dataset import GoldenItem
    from pipeline.evaluation.datasets import load, save
    from store.db import Database

    items = [
        GoldenItem(
            id=f"s{k}",
            question=f"What does chunk {k} say?",
            reference=f"Chunk {k} says {k}.",
            origin="synthesised",
            provenance={"kind": "single_hop", "chunk_ids": [f"c{k}"], "review": "pending"},
        )
        for k in (1, 2, 3)
    ]
    db = Database(settings.store_path, 10, 0)
    save(db, "golden", items, "synthesised")
    db.close()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        page.goto(f"{running_app}/datasets")
        expect(page.get_by_text("Keys: A accepts", exact=False)).to_be_visible(timeout=60_000)
        expect(page.get_by_text("What does chunk 1 say?", exact=True)).to_be_visible()
        # the list of datasets drawn (its grid's scripts load lazily: a key pressed before that was lost), settled
        page.locator("[data-testid='stDataFrame'] canvas").first.wait_for(timeout=60_000)
        wait_idle(page)
        page.wait_for_timeout(1000)
        page.get_by_role("heading", name="Datasets").click()  # the focus on the page, not in a box
        press(page, NEXT_KEY)
        expect(page.get_by_text("What does chunk 2 say?", exact=True)).to_be_visible(timeout=30_000)
        press(page, ACCEPT_KEY)
        expect(page.get_by_text("Accepted item s2: saved dataset golden as version 2.")).to_be_visible(timeout=30_000)
        expect(page.get_by_text("What does chunk 3 say?", exact=True)).to_be_visible(timeout=30_000)  # the next one
        press(page, REJECT_KEY)
        expect(page.get_by_text("Rejected item s3: saved dataset golden as version 3.")).to_be_visible(timeout=30_000)
        page.screenshot(path=str(ROOT / "test-artifacts" / "datasets.png"), full_page=True)
    db = Database(settings.store_path, 10, 0)
    try:
        second, third = load(db, "golden", 2), load(db, "golden", 3)
    finally:
        db.close()
    assert [i.provenance["review"] for i in second.items] == ["pending", "accepted", "pending"]
    assert [i.id for i in third.items] == ["s1", "s2"]
