# Two commands set everything up on a fresh machine:
#   make demo   - create .venv if missing, install, walk through the tool on the examples
#   make test   - create .venv if missing, install with test extras, run the whole suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# torch first, pinned: it is the CPU build these machines carry on disk; an
# unpinned torch would pull a CUDA build of several GB.
TORCH ?= torch==2.13.0
JOBS ?= 2

.PHONY: demo test bench schema docs lint-self clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-demo: pyproject.toml | $(PY)
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[ml,interop]' --config-settings editable_mode=compat
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[ml,dev]' --config-settings editable_mode=compat
	touch $@

# An editable install writes no bytecode, and where PYTHONDONTWRITEBYTECODE is set
# every ftmanifest process compiled its modules again (~1 s each): compile them once.
# The demo runs in a private HOME and cache, offline; its log is stamped with the tree it
# came from, so that the tests can reuse it instead of running the demo again.
demo: $(VENV)/.installed-demo
	$(PY) -m compileall -q ftmanifest
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m tests.support.demorun

# The slowest tests are listed at the end of every run: the suite's time is a target.
test: $(VENV)/.installed-test
	$(PY) -m compileall -q ftmanifest
	$(PY) -m pytest -n $(JOBS) -q --durations=30

bench: $(VENV)/.installed-test
	@failed=0; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || failed=1; done; exit $$failed

schema: $(VENV)/.installed-demo
	$(PY) -m ftmanifest schema --out schema/ftmanifest.schema.json \
		--out ftmanifest/manifest/ftmanifest.schema.json
	$(PY) -m ftmanifest.cli.reference manifest.md

# the generated reference under docs/reference/ (CLI, manifest fields, lint rules,
# exit and reason codes); tests/docs_test.py fails when a page is stale
docs: $(VENV)/.installed-demo
	$(PY) -m ftmanifest.cli.reference

lint-self: $(VENV)/.installed-test
	$(PY) -m ruff check ftmanifest tests benchmarks
	$(PY) -m mypy ftmanifest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo-out
