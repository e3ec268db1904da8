# Quick start: `make demo` (install, import the sample, rank it offline) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench screening asreview clean

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
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

lint: $(VENV)/.dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

bench: $(VENV)/.dev
	$(BIN)/python bench/ingest.py && $(BIN)/python bench/search.py && \
	$(BIN)/python bench/tagging.py && $(BIN)/python bench/ranking.py && $(BIN)/python bench/learning.py && \
	$(BIN)/python bench/drills.py && $(BIN)/python bench/startup.py

# ASReview, the screening bench's baseline, in an environment of its own (never a dependency).
.venv-asreview/bin/python: bench/asreview-requirements.txt
	$(PYTHON) -m venv .venv-asreview
	.venv-asreview/bin/pip install --quiet -r bench/asreview-requirements.txt
	touch $@

asreview: .venv-asreview/bin/python

# The simulated researcher on the shared screening datasets, beside ASReview (~30 min, 2 cores).
screening: $(VENV)/.dev .venv-asreview/bin/python
	$(BIN)/python bench/screening.py ../shared/fixtures/screening --agendas bench/screening \
		--json bench/results/screening-all.json

clean:
	rm -rf $(VENV) .venv-asreview store/chroma.sqlite3 store/*/ agenda.md
