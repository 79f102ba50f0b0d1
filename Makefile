# `make run` sets up and starts the app; `make test` sets up and runs every test (what CI runs); `make test-fast`
# runs ruff and the tests that are neither browser nor slow (pytest.ini's markers, docs/testing.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501
STREAMLIT_FLAGS := --server.headless true --browser.gatherUsageStats false --server.address 127.0.0.1 --server.port $(PORT)

.PHONY: run test test-fast bench doctor clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

$(VENV)/.dev-installed: requirements-dev.txt requirements-otel.txt requirements-scale.txt $(VENV)/.installed
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed
	$(PY) -m pipeline ingest --if-empty data/kb || echo "Could not ingest data/kb now; the app will say why."
	$(PY) serve_app.py $(STREAMLIT_FLAGS)  # streamlit run streamlit_app.py, the pages' modules imported first

test: $(VENV)/.dev-installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d .docs-site  # not --quiet: it hides the warnings strict counts
	$(PY) -m pytest

test-fast: $(VENV)/.dev-installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -m "not browser and not slow"

bench: $(VENV)/.dev-installed
	$(PY) -m bench

doctor: $(VENV)/.installed
	$(PY) -m pipeline doctor

clean-venv:
	rm -rf $(VENV)
