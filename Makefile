# Two commands do all set-up: `make demo` (the main job) and `make test` (the test suite). Both use
# one .venv: `make demo` installs gymwatch and what it runs; `make install` (and so `make test`,
# `make lint`) adds the pinned test stack. Each install is done once, again when pyproject.toml changes.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# gymwatch (editable) and its runtime dependencies
$(VENV)/.installed-runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# ... and the test stack (which installs the runtime too)
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed-runtime

.PHONY: install demo test lint bench screenshots
install: $(VENV)/.installed-test

demo: $(VENV)/.installed-runtime
	$(BIN)/gymwatch demo

# The end-to-end tests need real Gyms (0.4.0, and 0.7.0 on a CPython >= 3.13.14 built once, ~8 min),
# chromium, and a real Slurm (Debian's slurm-wlm, munge, slurmdbd + MariaDB, a SPANK plugin built
# here): each install is skipped when already there. The tests start and stop the Slurm themselves.
test: install
	bash .ci/install_gym.sh 0.4.0
	bash .ci/install_gym.sh 0.7.0
	bash .ci/install_chromium.sh
	bash .ci/install_slurm.sh
	$(BIN)/python -m pytest -q

# The layering (import-linter contracts), the style (ruff) and the types (mypy: the files listed in
# pyproject.toml): all set in pyproject.toml, a few seconds.
lint: install
	$(BIN)/lint-imports
	$(BIN)/ruff check gymwatch tests benchmarks scripts
	$(BIN)/mypy

bench: install
	$(BIN)/python -m benchmarks

screenshots: install
	$(BIN)/python scripts/make_screenshots.py
