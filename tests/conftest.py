"""Fixtures: every test gets its own store file and settings; a fake Ollama server on loopback."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tiers  # noqa: E402
from fake_ollama import FakeOllama  # noqa: E402

from pipeline.answering import retriever  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.models import llm, slots  # noqa: E402
from store import db as store_db  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "data" / "kb"
TEST_ENV = {
    "WORKBENCH_REQUEST_TIMEOUT_S": "5",
    "WORKBENCH_LLM_BACKOFF_S": "0.01",
    "WORKBENCH_STORE_IDLE_RELEASE_S": "0",
    "WORKBENCH_STORE_LOCK_TIMEOUT_S": "2",
    "COLUMNS": "250",
}


def reset_process_state() -> None:
    store_db.close_all()
    llm.forget_digests()
    retriever._indexes.clear()
    slots.forget()  # a later fake may listen on an earlier one's port
    # the app's cached resources (settings, the store, health) belong to one test: a page run later in the same
    # process must not meet an earlier test's Ollama address or store
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()


def pytest_collection_modifyitems(items):
    """Every test in a test_browser*.py file is a browser test (tiers.py)."""
    for item in items:
        if tiers.is_browser_file(item.path):
            item.add_marker(pytest.mark.browser)


def pytest_runtest_setup(item):
    tiers.running(item.nodeid, item.get_closest_marker("browser") is not None)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A fresh store path and settings from a clean environment for every test."""
    for name in list(os.environ):
        if name.startswith("WORKBENCH_") or name in ("OLLAMA_HOST", "GITHUB_STEP_SUMMARY"):
            monkeypatch.delenv(name)  # GITHUB_STEP_SUMMARY: a CI job's summary gets no test's gate
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "workbench.duckdb"))
    (tmp_path / "workbench.toml").touch()  # an empty settings file (a file WORKBENCH_CONFIG names must exist)
    monkeypatch.setenv("WORKBENCH_CONFIG", str(tmp_path / "workbench.toml"))
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, value)
    reset_process_state()
    yield tmp_path
    reset_process_state()


@pytest.fixture
def fake(monkeypatch):
    with FakeOllama() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        yield server


@pytest.fixture
def settings(fake):
    return load_settings()


@pytest.fixture
def db(settings):
    return store_db.get_database(settings)


@pytest.fixture(scope="session")
def ingested_store(tmp_path_factory):
    """A store file with data/kb ingested through the fake, built once and copied per test."""
    from pipeline.knowledge.ingest import ingest
    from pipeline.models.llm import LLM

    path = tmp_path_factory.mktemp("template") / "kb.duckdb"
    with FakeOllama() as server:
        env = {**TEST_ENV, "OLLAMA_HOST": server.url, "WORKBENCH_DB": str(path)}
        settings = load_settings(environ=env)
        database = store_db.Database(str(path), 2, 0)
        results = ingest([str(KB)], settings, database, LLM(settings, database))
        database.close()
    assert all(r.status == "added" for r in results) and len(results) >= 8
    return path


@pytest.fixture
def kb_db(ingested_store, settings):
    """The per-test store, holding the sample knowledge base."""
    shutil.copy(ingested_store, settings.store_path)
    return store_db.get_database(settings)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray (127.0.0.1, 2 CPUs) for every test that runs an evaluation on it: starting one takes
    seconds, and its workers' first item pays the imports."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-scale.txt)")
    from pipeline.evaluation import ray_executor

    ray_executor.start(num_cpus=2)
    yield ray
    ray_executor.stop()


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.slow)])
def executor(request):
    """The evaluation executor a test runs under: each such test runs for both (on Ray in the slow tier)."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param
