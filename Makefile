# Two commands do all set-up on a fresh machine:
#   make run   installs everything and runs ShapeLens on the bundled seed example
#   make test  installs everything and runs every check and test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $$HOME/.pyenv)
# Other interpreters for the 3.12+ code paths (numpy only: torch for them is a multi-GB download).
EXTRA_PYTHONS ?= $(wildcard $(PYENV_ROOT)/versions/3.12.1/bin/python $(PYENV_ROOT)/versions/3.13.0/bin/python)
TORCH_PIN := torch==2.13.0

.PHONY: install run test lint typecheck pytest pytest-other-pythons bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

run: install
	$(VENV)/bin/shapelens run examples/seed_linear_fit.py

test: install lint typecheck pytest pytest-other-pythons

lint: install
	$(VENV)/bin/ruff check server tests bench examples

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(PY) -m pytest -q

# The tracer's tests again under Python 3.12 and 3.13 (torch tests skip there, numpy ones run).
pytest-other-pythons:
	@set -e; for interpreter in $(EXTRA_PYTHONS); do \
	  version=$$($$interpreter -c 'import sys; print("%d%d" % sys.version_info[:2])'); \
	  venv=.venv$$version; \
	  if [ ! $$venv/.installed -nt pyproject.toml ]; then \
	    $$interpreter -m venv $$venv && $$venv/bin/python -m pip install -q -e ".[test]" && touch $$venv/.installed; \
	  fi; \
	  echo "== tests under $$($$venv/bin/python --version)"; \
	  $$venv/bin/python -m pytest -q; \
	done

bench: install
	bench/setup_anchors.sh
	$(PY) bench/run_bench.py
	$(PY) bench/lsp_latency.py --out bench/results/latest.md

clean:
	rm -rf $(VENV) .venv3* .venv-anchors .pytest_cache .mypy_cache .ruff_cache
