# Two commands set everything up on a fresh machine:
#   make demo   - create .venv if missing, install, walk through the tool on the examples
#   make test   - create .venv if missing, install with test extras, run the whole suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# torch pinned: it is the CPU build these machines carry on disk; an
# unpinned torch would pull a CUDA build of several GB.
TORCH ?= torch==2.13.0
# Three workers on two cores: a worker waiting on a subprocess, a rank or a timeout leaves
# its core to the others (the whole suite, one tree: 662 s with three, 690 s with two).
JOBS ?= 3
# uv installs the packages where it can be had: it fetches and unpacks in parallel and
# compiles the bytecode on every core (the test extras: about 16 s here against pip's 68 s,
# the same versions). pip still chooses torch's wheel, since it reads this machine's pip
# configuration, which names the CPU build on disk: it only downloads it (a copy), and uv
# installs that file with the rest (torch alone: 12 s against pip's 23 s, on one core).
# uv lives in a folder of its own, outside the venvs the tool judges. Where uv cannot be
# fetched or cannot reach the index, pip installs it all.
UV_DIR ?= .venv-uv
UV := $(UV_DIR)/bin/uv
WHEELS = $(UV_DIR)/wheels/$(subst /,_,$(VENV))
DEMO_EXTRAS := ml,interop
TEST_EXTRAS := ml,dev
# $(call install,EXTRAS): torch, then the project, editable, with EXTRAS, into $(VENV)
install = { rm -rf $(WHEELS) && $(PIP) download -q --no-deps -d $(WHEELS) $(TORCH) \
		&& $(UV) pip install -q --python $(PY) --compile-bytecode \
			$(WHEELS)/$(subst ==,-,$(TORCH))*.whl -e '.[$(1)]' \
			--config-settings editable_mode=compat; } \
	|| { $(PIP) install -q $(TORCH) \
		&& $(PIP) install -q -e '.[$(1)]' --config-settings editable_mode=compat; }

.PHONY: demo test bench schema docs lint-self clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(UV): | $(PY)
	$(PIP) install -q --target $(UV_DIR) uv \
		|| echo "uv could not be installed: pip installs the packages"

$(VENV)/.installed-demo: pyproject.toml | $(PY) $(UV)
	$(call install,$(DEMO_EXTRAS))
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY) $(UV)
	$(call install,$(TEST_EXTRAS))
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
	rm -rf $(VENV) $(UV_DIR) .pytest_cache .hypothesis demo-out
