"""One running app per browser test module: Streamlit takes seconds to start, so a module's tests share one
server (against a fake Ollama and a store the module prepares) and one headless Chromium, each test with its
own page."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import tiers
from conftest import ROOT, TEST_ENV

from pipeline.config import Settings, load_settings

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def wait_idle(page, timeout_ms: float = 60_000) -> None:
    """Until the app's script is not running: typed or pressed while a run still draws the page, a value or a key can
    be lost (the widget or shortcut drawn again), most often on a loaded machine."""
    page.locator(IDLE).wait_for(timeout=timeout_ms)


# From now on, count the app's script runs (full or a fragment's): each sets stApp's script state to running.
COUNT_RUNS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  window.scriptRuns = 0;
  window.runCounter?.disconnect();
  window.runCounter = new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.scriptRuns++;
  });
  window.runCounter.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def count_runs(page) -> None:
    """Count the app's script runs from now on (read them with script_runs)."""
    page.evaluate(COUNT_RUNS)


def script_runs(page) -> int:
    return page.evaluate("window.scriptRuns")


def click_until_run(page, target, tries: int = 3, wait_ms: float = 10_000) -> None:
    """Click `target`, and click it again, as a user would, when no script run follows within `wait_ms`: on a busy
    machine a click on a form's submit button was once followed by nothing for a minute (CI, under load), the page
    idle and the button enabled."""
    from playwright.sync_api import TimeoutError as NoRunYet

    wait_idle(page)
    for _ in range(tries):
        count_runs(page)
        target.click()
        try:
            page.wait_for_function("window.scriptRuns > 0", timeout=wait_ms)
            return
        except NoRunYet:
            pass
    raise AssertionError(f"no script run followed {tries} clicks on {target}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_healthy(url: str, process: subprocess.Popen, output: IO[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output.seek(0)
            raise RuntimeError(f"streamlit exited: {output.read()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("streamlit did not become healthy")


# An exception in a page's script (st.exception), and the frontend's error boundary (a component that crashed).
FAILURES = "[data-testid='stException'], [data-testid='stErrorElementStack']"


def app_env(store: Path, ollama_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test environment (conftest.TEST_ENV) for a store file and a fake Ollama, nothing inherited."""
    clean = {k: v for k, v in os.environ.items() if not (k.startswith("WORKBENCH_") or k == "OLLAMA_HOST")}
    return {
        **clean,
        **TEST_ENV,
        "OLLAMA_HOST": ollama_url,
        "WORKBENCH_DB": str(store),
        "WORKBENCH_CONFIG": "",  # no settings file
        **(extra or {}),
    }


def prepared_store(template: Path, folder: Path, ollama_url: str) -> tuple[Path, Settings]:
    """A copy of the ingested template store in folder, and settings for it (as the app will read them)."""
    store = folder / "workbench.duckdb"
    shutil.copy(template, store)
    return store, load_settings(environ=app_env(store, ollama_url))


# The served app's model calls go to a working fake: the tests' 5 s (conftest.TEST_ENV, short for the fault tests)
# failed 2 of an evaluation's 5 items at load 15 on 2 cores, and no browser test waits on a model call's timeout.
SERVED_REQUEST_TIMEOUT_S = "60"


@contextmanager
def serving(env: dict[str, str], idle_release_s: str | None = "0.2", script: str = "streamlit_app.py") -> Iterator[str]:
    """Streamlit serving the app (or another script, with the app's configuration) with env on a free port; its URL.
    The store is let go `idle_release_s` after each use (0.2 s: a test can write to it meanwhile; None: the
    setting's default, as for a user)."""
    port = free_port()
    # The app's output goes to a file: a pipe that nobody read filled up (64 KiB, in one module's run) and the
    # app's next write blocked, so a page stopped rendering and SIGTERM could not stop the app (its event loop was
    # stuck behind the blocked writer). Nearly all of that output was the file watcher's "Inotify queue
    # overflowed" warnings, its rescans of the checkout costing half the app's CPU: the tests edit no source, so
    # it is off.
    output = tempfile.TemporaryFile("w+")
    # the app as `make run` starts it (serve_app.py: its pages' modules imported before the server starts)
    command = ["serve_app.py"] if script == "streamlit_app.py" else ["-m", "streamlit", "run", script]
    process = subprocess.Popen(
        [
            sys.executable,
            *command,
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env={
            **env,
            "WORKBENCH_REQUEST_TIMEOUT_S": SERVED_REQUEST_TIMEOUT_S,
            **({"WORKBENCH_STORE_IDLE_RELEASE_S": idle_release_s} if idle_release_s else {}),
        },
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, process, output)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:  # do not leave it running, whatever holds it up
            process.kill()
            process.wait(timeout=20)
        output.close()


@contextmanager
def chromium() -> Iterator:
    tiers.require_browser_marker()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser):
    """A tall page with patient defaults: the machine running the tests may be busy."""
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(60_000)
    page.set_default_navigation_timeout(90_000)
    return page


def assert_no_failure(page, where: str) -> None:
    """No exception from the page's script and no crashed component, with what they say when there is one."""
    failures = page.locator(FAILURES)
    assert failures.count() == 0, (where, failures.all_inner_texts())


def screenshot(page, name: str) -> None:
    folder = ROOT / "test-artifacts"
    folder.mkdir(exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)


def choose_tab(page, name: str, tries: int = 3) -> None:
    """Click a tab once the page is idle, until the browser shows it chosen: a click that lands as a run ends can
    be drawn over by that run (seen 1 time in 3 on the drilldown's Trace tab, the Answer tab shown again)."""
    tab = page.get_by_role("tab", name=name, exact=True)
    for _ in range(tries):
        wait_idle(page)  # a tab clicked while the run still draws the page can be drawn again unclicked
        tab.click()
        try:
            tab.and_(page.locator("[aria-selected='true']")).wait_for(timeout=10_000)
            wait_idle(page)
            if tab.get_attribute("aria-selected") == "true":
                return
        except Exception:  # noqa: BLE001 - not chosen yet: click again
            continue
    raise AssertionError(f"the tab {name!r} was not chosen after {tries} clicks")


def open_item_by_item(page) -> None:
    """Compare's Item by item tab chosen (drawn when chosen) once the page has drawn."""
    from playwright.sync_api import expect

    choose_tab(page, "Item by item")
    expect(page.get_by_text("Open an item side by side")).to_be_visible(timeout=60_000)
    wait_idle(page)


def open_trace_tab(page, url: str, run_id: int):
    """A run's drilldown in `page`, its Trace tab chosen once the page has drawn; the tab's panel."""
    from playwright.sync_api import expect

    page.goto(f"{url}/runs?run_id={run_id}", timeout=90_000)
    expect(page.get_by_role("heading", name=f"Run {run_id}", exact=True)).to_be_visible(timeout=90_000)
    choose_tab(page, "Trace")
    panel = page.get_by_role("tabpanel", name="Trace")
    expect(panel.get_by_text("Select a span", exact=False)).to_be_visible(timeout=60_000)
    wait_idle(page)
    return panel
