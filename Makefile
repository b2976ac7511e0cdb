# `make run` and `make test` set up what is missing, then do their job.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test setup

setup: $(STAMP)

# torch is installed first and pinned: an unpinned resolve would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

run: $(STAMP)
	$(VENV)/bin/python -m safelife_rl train

# lint first (seconds): ruff (checks and formatting), and import-linter's contracts on the floors of safelife_rl
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python -m pytest -n auto -q --durations=15
