# Two commands do all set-up on a fresh machine:
#   make run   installs everything and runs ShapeLens on the bundled seed example
#   make test  installs everything and runs every check and test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $$HOME/.pyenv)
# The 3.12+ code paths (sys.monitoring) are tested with torch on these interpreters too
# (pytest-other-pythons says what each runs). Without pyenv:
# EXTRA_PYTHONS="/path/to/python3.12 /path/to/python3.13" make test;
# SKIP_OTHER_PYTHONS=1 skips them (say so when you report a green run).
OTHER_PYTHON_VERSIONS := 3.12.1 3.13.0
EXTRA_PYTHONS ?= $(foreach v,$(OTHER_PYTHON_VERSIONS),$(PYENV_ROOT)/versions/$(v)/bin/python)
TORCH_PIN := torch==2.13.0
# The other interpreters' venvs have the newest torch users run there; the first of
# EXTRA_PYTHONS (3.12, which runs the whole suite) also the libraries people train with
# (tests/test_library_stack.py traces programs that use them).
NEWEST_TORCH_PINS := torch==2.14.1 numpy
LIBRARY_PINS := torchvision==0.29.1 transformers==5.25.0 lightning==2.6.6 timm==1.0.31 einops==0.8.2 accelerate==1.16.0

.PHONY: install run test test-installs lint typecheck pytest other-venvs pytest-other-pythons pytest-monitoring pytest-backend-subset bench clean extension extension-unit bundle-python vsix e2e-tools e2e e2e-run test-compat compat-venvs test-torch-versions

install: $(VENV)/.installed

# uv installs the libraries (pip for itself and the main venv's torch, which this machine
# keeps as a local wheel that pip's own settings find), ~4x faster than pip. Its cache sits
# in the clone and its venvs hard-link their files from it: the CUDA builds of torch that
# the other interpreters' venvs take from PyPI (~5 GB each unpacked, their nvidia-*
# libraries shared within a torch release) are unpacked once. One uv install runs at a
# time (UV_LOCK; scripts/make_venv.sh says why).
UV_PIN := uv==0.13.8
UV := .tools/uv/bin/uv
export UV_CACHE_DIR := $(CURDIR)/.cache/uv
export UV_LOCK := $(CURDIR)/.tools/uv/install.lock
UV_INSTALL = flock $(UV_LOCK) $(UV) pip install -q --python

# This machine and CI set PYTHONDONTWRITEBYTECODE=1: every process (each traced run, fork
# server, language server and test worker) would compile every module it imports from
# source, again. Python writes each module's bytecode the first time a process imports it
# here instead, so the venvs are not compiled whole up front either (~25 s of CPU per torch
# venv, ~9,000 files, most never imported; six venvs): scripts/warm_imports.py writes what
# the suites import in one process right after each install, before several processes
# would all compile torch at once.
unexport PYTHONDONTWRITEBYTECODE

$(UV):
	$(PYTHON) -m venv .tools/uv
	.tools/uv/bin/python -m pip install -q $(UV_PIN)

# setup.py builds the sys.settrace gate (C, CPython 3.11 only) into server/ (git-ignored).
$(VENV)/.installed: pyproject.toml setup.py server/shapelens/engine/backends/_library_gate.c | $(UV)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile $(TORCH_PIN)
	$(UV_INSTALL) $(PY) -e ".[dev]"
	$(PY) scripts/warm_imports.py
	touch $@

run: install
	$(VENV)/bin/shapelens run examples/seed_linear_fit.py

# On 2 cores from a fresh clone: the main venv and the extension's node_modules first. The
# other installs (mostly downloads and unpacking) go on in the background while the 3.11
# suite runs: the 3.12 and 3.13 venvs (waited for before their suites), and those needed
# only at the end (the compatibility stage's two venvs of torch 2.4; code-server and
# playwright for the e2e). Lint, types and the .vsix run beside the 3.11 suite; then the
# whole suite under 3.12 (the extension's unit tests beside it) and the backend-sensitive
# tests under 3.13; the compatibility stage; then the end-to-end test alone (a browser
# driving code-server, timing-sensitive). Each suite is spread over PYTEST_WORKERS processes
# (a test mostly waits on a traced child, so more workers than cores keep both busy; a
# file's tests stay together in one worker, in order). --output-sync keeps each part's
# output together. All of it is CPU-bound on 2 cores: the installs' CPU (unpacking, the
# bytecode) is taken from the 3.11 suite's.
PYTEST_WORKERS ?= 3
PYTEST_ARGS := -q -n $(PYTEST_WORKERS) --dist loadfile
# Run under 3.12 only (the venv with torch 2.14 and the library stack): the programs that
# use transformers, timm, Lightning and einops (tests/test_library_stack.py), torchrun runs
# from the command line (test_distributed_truth's, ~50 s of CPU on 3 ranks; the editor's
# here), the shape-only runs of the whole clean corpus and of the 1.2B GPT (~45 s; the GPT
# on 3.10 with torch 2.4 too).
MAIN_ONLY := -k "not ((test_distributed_truth and not language_server) or clean_corpus_raises_no_alarm_shapes_only or billion_parameter_gpt)"
test:
	$(MAKE) -j2 --output-sync=target install node_modules/.installed
	@set -e; ( $(MAKE) other-venvs > .other-venvs.log 2>&1 ) & soon=$$!; \
	( $(MAKE) -j2 compat-venvs e2e-tools > .background-installs.log 2>&1 ) & later=$$!; \
	trap 'kill $$soon $$later 2>/dev/null || true' EXIT; \
	$(MAKE) -j4 --output-sync=target pytest lint typecheck vsix; \
	wait $$soon || { cat .other-venvs.log; echo "the 3.12 and 3.13 venvs failed to install" >&2; exit 1; }; \
	$(MAKE) -j2 --output-sync=target pytest-monitoring extension-unit; \
	$(MAKE) pytest-backend-subset; \
	wait $$later || { cat .background-installs.log; echo "the compatibility venvs or the e2e tools failed to install" >&2; exit 1; }; \
	$(MAKE) test-compat; \
	$(MAKE) e2e-run

test-installs:
	$(MAKE) -j4 --output-sync=target install other-venvs node_modules/.installed e2e-tools

lint: install
	$(VENV)/bin/ruff check server tests bench examples
	$(VENV)/bin/ruff format --check server tests bench examples
	$(VENV)/bin/pylint --disable=all --enable=duplicate-code --score=no server/shapelens

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(PY) -m pytest $(PYTEST_ARGS) --ignore=tests/test_library_stack.py $(MAIN_ONLY)

# .venv312, .venv313 (named by version), made side by side (their uv installs one after
# another): a missing interpreter fails.
venv_of = .venv$$($(1) -c 'import sys; print("%d%d" % sys.version_info[:2])')
other-venvs: | $(UV)
	@set -e; if [ -n "$(SKIP_OTHER_PYTHONS)" ]; then exit 0; fi; \
	installs=; libraries="$(LIBRARY_PINS)"; \
	for interpreter in $(EXTRA_PYTHONS); do \
	  if [ ! -x $$interpreter ]; then \
	    echo "make test needs $$interpreter (pyenv install $(OTHER_PYTHON_VERSIONS)), or EXTRA_PYTHONS=..., or SKIP_OTHER_PYTHONS=1" >&2; exit 1; \
	  fi; \
	  UV=$(UV) scripts/make_venv.sh $(call venv_of,$$interpreter) $$interpreter \
	    $(NEWEST_TORCH_PINS) $$libraries -e ".[test]" & \
	  installs="$$installs $$!"; libraries=; \
	done; \
	for install in $$installs; do wait $$install || exit 1; done

# Every tracing backend meets every feature: the whole suite runs on one interpreter per
# backend, 3.11 (`pytest`: sys.settrace and the C gate; torch 2.13) and the first of
# EXTRA_PYTHONS (`pytest-monitoring`, 3.12: sys.monitoring; torch 2.14 and the libraries
# people train with); the others (3.13: sys.monitoring with its own frame locals) run the
# tests marked `backend` (pyproject.toml): those whose outcome depends on how the tracer sees
# the program (line and call events, frames and their locals, imports, debugpy, notebook
# kernels, snoop). The compatibility stage runs the corpus, shape-only runs, the module tree
# and failing calls on the oldest torch too.
pytest-other-pythons: pytest-monitoring pytest-backend-subset

# torchrun's launcher and the merge of ranks (test_distributed) are the same on every
# Python: the 3.11 suite runs them, and test_distributed_truth's editor runs; here its ranks
# traced by sys.monitoring from the command line.
pytest-monitoring: other-venvs
	@set -e; if [ -n "$(SKIP_OTHER_PYTHONS)" ]; then echo "== SKIP_OTHER_PYTHONS set: 3.12 not tested"; exit 0; fi; \
	set -- $(EXTRA_PYTHONS); venv=$(call venv_of,$$1); \
	echo "== tests under $$($$venv/bin/python --version), torch $$($$venv/bin/python -c 'from importlib.metadata import version; print(version("torch"))'): the whole suite"; \
	SHAPELENS_LIBRARY_PYTHON=$(CURDIR)/$$venv/bin/python $$venv/bin/python -m pytest $(PYTEST_ARGS) \
	  --ignore=tests/test_distributed.py -k "not (test_distributed_truth and language_server)"

pytest-backend-subset: other-venvs
	@set -e; if [ -n "$(SKIP_OTHER_PYTHONS)" ]; then echo "== SKIP_OTHER_PYTHONS set: 3.13 not tested"; exit 0; fi; \
	set -- $(EXTRA_PYTHONS); shift; \
	for interpreter in "$$@"; do \
	  venv=$(call venv_of,$$interpreter); \
	  echo "== tests under $$($$venv/bin/python --version), torch $$($$venv/bin/python -c 'from importlib.metadata import version; print(version("torch"))'): those marked backend"; \
	  $$venv/bin/python -m pytest $(PYTEST_ARGS) --ignore=tests/test_library_stack.py -m backend; \
	done

# The compatibility stage: the oldest torch through --python (torch 2.4.1 on 3.10 and 3.11),
# each in a cached venv under .venv-compat/ (a CUDA build from PyPI, ~5 GB each), time-boxed
# (scripts/test_compat.sh says what runs). The newest, 2.14.1, is the 3.12 and 3.13 venvs'.
test-compat: install compat-venvs
	UV=$(UV) PY=$(PY) PYENV_ROOT=$(PYENV_ROOT) scripts/test_compat.sh

compat-venvs: | $(UV)
	UV=$(UV) PY=$(PY) PYENV_ROOT=$(PYENV_ROOT) scripts/test_compat.sh --install

# The torch releases between those (2.6, 2.8, 2.10, 2.12), the same tests, once each.
test-torch-versions: install | $(UV)
	UV=$(UV) PY=$(PY) PYENV_ROOT=$(PYENV_ROOT) scripts/test_compat.sh --between

# Every script adds its table to bench/results/latest.md; docs/speed.md shows the report.
bench: install
	bench/setup_anchors.sh
	$(PY) bench/run_bench.py
	for python in $(VENV)/bin/python .venv312/bin/python .venv313/bin/python; do \
	  if [ -x $$python ]; then $(PY) bench/lsp_latency.py --python $$python --out bench/results/latest.md || exit 1; fi; \
	done
	$(PY) bench/scale.py --out bench/results/latest.md
	$(PY) bench/memory_accuracy.py --out bench/results/latest.md
	$(PY) bench/shape_only.py $$(for python in $(VENV)/bin/python .venv312/bin/python; do \
	  if [ -x $$python ]; then printf -- '--python %s ' $$python; fi; done) --out bench/results/latest.md
	$(PY) bench/trace_floor.py --out bench/results/latest.md
	for python in $(VENV)/bin/python .venv312/bin/python .venv313/bin/python; do \
	  if [ -x $$python ]; then $$python bench/step_costs.py --out bench/results/latest.md || exit 1; fi; \
	done
	for python in .venv312/bin/python .venv313/bin/python; do \
	  if [ -x $$python ]; then $$python bench/callback_costs.py --out bench/results/latest.md || exit 1; fi; \
	done
	$(PY) bench/notebook.py $$(for python in $(VENV)/bin/python .venv312/bin/python .venv313/bin/python; do \
	  if [ -x $$python ]; then printf -- '--python %s ' $$python; fi; done) --out bench/results/latest.md
	$(PY) bench/distributed.py --out bench/results/latest.md
	$(PY) bench/real_programs.py --out bench/results/latest.md
	$(PY) bench/real_programs.py --breakdown --programs char_gpt,char_gpt_312 --out bench/results/latest.md
	for python in $(VENV)/bin/python .venv312/bin/python; do \
	  if [ -x $$python ]; then $$python bench/program_floor.py --out bench/results/latest.md || exit 1; fi; \
	done
	$(PY) bench/corpus.py --out bench/results/latest.md
	$(PY) bench/speed_doc.py

clean:
	rm -rf $(VENV) .venv3* .venv-compat .venv-anchors .cache .pytest_cache .mypy_cache .ruff_cache
	find server -name "*.so" -delete

# -- VS Code extension ---------------------------------------------------------------------
BUNDLED_LIBS := vscode-extension/bundled/libs
PY_BUNDLE_PINS := pygls==2.1.1 lsprotocol==2025.0.0 cattrs==26.2.1 attrs==26.1.0 typing_extensions==4.16.0 pysnooper==1.2.3

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

extension: node_modules/.installed
	npm run --silent compile

extension-unit: node_modules/.installed
	npm run --silent test:unit

# The server's Python libraries and the shapelens package, bundled so the user's
# interpreter needs nothing but torch (git-ignored; rebuilt on every vsix). Pure Python
# only: the gate built here is for this machine's CPython, so it stays out (docs/editors.md).
bundle-python: install
	rm -rf $(BUNDLED_LIBS)
	$(PY) -m pip install -q --no-deps --target $(BUNDLED_LIBS) $(PY_BUNDLE_PINS)
	$(PY) -m pip install -q --no-deps --target $(BUNDLED_LIBS) --only-binary=:all: \
	  --platform any --python-version 3.11 --implementation py debugpy==1.8.22
	cp -r server/shapelens $(BUNDLED_LIBS)/shapelens
	find $(BUNDLED_LIBS) -name __pycache__ -prune -exec rm -rf {} +
	find $(BUNDLED_LIBS)/shapelens -name "*.so" -delete

vsix: extension bundle-python
	npm run --silent package
	! $(PY) -m zipfile -l vscode-extension/shapelens.vsix | grep -E 'libs/shapelens/[^ ]*\.(so|pyd) '

# A real VS Code: code-server + headless Debian chromium driven by playwright-core
# (tools installed into the git-ignored .tools/; screenshots land in .artifacts/e2e/).
e2e-tools:
	scripts/install-code-server.sh
	scripts/install-chromium.sh

e2e: vsix e2e-tools
	$(MAKE) e2e-run

# The end-to-end test on the .vsix built already (make test builds it earlier, next to lint).
e2e-run:
	.tools/e2e/node_modules/.bin/tsc -p vscode-extension/e2e
	SHAPELENS_VSIX=vscode-extension/shapelens.vsix SHAPELENS_PYTHON=$(PY) node vscode-extension/e2e/run.mjs
