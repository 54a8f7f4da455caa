# Two commands do all set-up: `make demo` (the main job) and `make test` (the test suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/gymwatch: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/gymwatch

.PHONY: install demo test bench screenshots
install: $(BIN)/gymwatch

demo: install
	$(BIN)/gymwatch demo

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python -m benchmarks

screenshots: install
	$(BIN)/python scripts/make_screenshots.py
