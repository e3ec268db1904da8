# Quick start: `make demo` (install, import the sample, rank it offline) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.demo: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet .
	touch $@

$(VENV)/.dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.demo

demo: $(VENV)/.demo
	$(BIN)/triage demo

test: $(VENV)/.dev
	$(BIN)/python -m pytest -q

lint: $(VENV)/.dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

bench: $(VENV)/.dev
	$(BIN)/python bench/ingest.py && $(BIN)/python bench/search.py && \
	$(BIN)/python bench/tagging.py && $(BIN)/python bench/ranking.py && $(BIN)/python bench/learning.py && \
	$(BIN)/python bench/drills.py && $(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) store/chroma.sqlite3 store/*/ agenda.md
