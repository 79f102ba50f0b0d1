"""The suite's tiers: every test that drives Chromium is marked browser, whatever its file is called."""

import subprocess
import sys

import pytest
import tiers
from conftest import ROOT


def test_every_test_browser_file_is_a_browser_file():
    browser_files = sorted((ROOT / "tests").glob("test_browser*.py"))
    assert len(browser_files) >= 13 and all(tiers.is_browser_file(path) for path in browser_files)
    assert not tiers.is_browser_file(ROOT / "tests" / "test_store.py")


@pytest.mark.slow
def test_collection_marks_a_browser_files_tests_and_a_test_marked_so_elsewhere():
    files = ["tests/test_browser_safety.py", "tests/test_faults_more.py"]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-m", "browser", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    chosen = [line for line in listed.stdout.splitlines() if "::" in line]
    assert chosen, listed.stdout + listed.stderr
    safety = [test for test in chosen if test.startswith(files[0])]
    faults = [test for test in chosen if test.startswith(files[1])]
    assert safety and faults == [
        f"{files[1]}::test_kill_9_of_the_app_during_a_save_leaves_the_store_whole_and_no_half_run"
    ]


def test_driving_chromium_in_a_test_not_marked_browser_fails_before_it_starts():
    from browser_server import chromium

    with pytest.raises(RuntimeError, match="drives Chromium but is not marked browser"):
        with chromium():
            pass
