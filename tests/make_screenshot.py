"""Take the README's screenshot, docs/images/chat.png: the Chat page with one answer and its claims coloured.

Run it by hand (`.venv/bin/python tests/make_screenshot.py`); pytest does not collect it. Like the browser
tests, it ingests data/kb through the fake Ollama into a temporary store, starts the app against them and
drives Debian's headless Chromium. The fake paraphrases, and its first answer to a question adds sentences
the sources do not hold; with no retry and `when_unverified = "show_best"` that answer is shown as it is, so
the picture has supported (green) and unsupported (orange) sentences side by side.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from browser_server import CHROMIUM, app_env, serving  # noqa: E402
from conftest import KB, ROOT, TEST_ENV  # noqa: E402
from fake_ollama import FakeOllama  # noqa: E402

from pipeline.config import load_settings  # noqa: E402

QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"
OUT = ROOT / "docs" / "images" / "chat.png"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SETTINGS = {"WORKBENCH_MAX_RETRIES": "0", "WORKBENCH_WHEN_UNVERIFIED": "show_best"}


def ingest_kb(store: Path, ollama_url: str) -> None:
    from pipeline.knowledge.ingest import ingest
    from pipeline.models.llm import LLM
    from store import db as store_db

    settings = load_settings(environ={**TEST_ENV, "OLLAMA_HOST": ollama_url, "WORKBENCH_DB": str(store)})
    database = store_db.Database(str(store), 2, 0)
    ingest([str(KB)], settings, database, LLM(settings, database))
    database.close()


def main() -> None:
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as folder, FakeOllama(answer_style="paraphrase") as fake:
        store = Path(folder) / "workbench.duckdb"
        ingest_kb(store, fake.url)
        fake.forget_answers()
        with serving(app_env(store, fake.url, SETTINGS)) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.set_default_timeout(90_000)
                page.goto(url)
                box = page.get_by_test_id("stChatInputTextArea")
                box.wait_for()
                box.fill(QUESTION)
                box.press("Enter")
                expect(page.get_by_text("faithfulness", exact=False).first).to_be_visible()
                expect(page.get_by_text("Sources:", exact=False).first).to_be_visible()
                page.wait_for_timeout(1500)  # let the last redraw settle
                # the app scrolls to the newest output; the picture starts at the question instead
                page.get_by_test_id("stChatMessage").first.evaluate("e => e.scrollIntoView({block: 'start'})")
                page.wait_for_timeout(500)
                OUT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(OUT))
            finally:
                browser.close()
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
