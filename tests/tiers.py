"""The suite's tiers (pytest.ini's markers): `browser` for every test that drives Chromium, `slow` for the
non-browser tests that take the most time. `make test-fast` leaves both out; `make test` runs everything.

A test is `browser` when its file is named test_browser*.py (conftest.py marks those at collection), or when it is
marked so itself. A test that drives Chromium without the marker fails at once: browser_server.chromium() asks
`require_browser_marker` first, so a browser test cannot slip into the fast tier by its name or a forgotten mark.
"""

from fnmatch import fnmatch
from pathlib import Path

BROWSER_FILES = "test_browser*.py"

_running = {"test": None, "browser": False}  # the test being set up or run now, and whether it is marked browser


def is_browser_file(path: Path) -> bool:
    return fnmatch(Path(path).name, BROWSER_FILES)


def running(test: str | None, browser: bool) -> None:
    """Called by conftest.py before each test's setup (its fixtures included)."""
    _running.update(test=test, browser=browser)


def require_browser_marker() -> None:
    """Raise when the test running now drives Chromium without the browser marker (outside pytest: nothing)."""
    if _running["test"] is not None and not _running["browser"]:
        raise RuntimeError(
            f"{_running['test']} drives Chromium but is not marked browser: name its file {BROWSER_FILES} or mark "
            "it @pytest.mark.browser (pytest.ini), so that make test-fast leaves it out"
        )
