VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# pytest with its assertion-rewrite cache (tests/__pycache__) even where PYTHONDONTWRITEBYTECODE is set: rewriting
# the test modules' asserts is ~12 s of a run, every run, without it. Two xdist workers per core, work-stealing:
# the live-server tests spend much of their time waiting on their servers, so a second worker per core fills it
# (measured on a quiet 2-core machine, the whole suite: 135 s with -n 2, 111 s with -n 4 --dist worksteal).
# The fast tier is all CPU (no live servers): one worker per core.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q --dist worksteal

.PHONY: install demo test test-fast lint bench native
# The package is installed (editable: source changes need no reinstall) again only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[native]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed
	$(MAKE) native

# The hot modules compiled by mypyc (src/kubetwin/native; about a minute on 2 cores, only when a source changed since
# the last build). Where it cannot build (no C compiler), the pure Python runs: the same results, slower.
native:
	$(PY) -m kubetwin.native build || echo "kubetwin.native: not built, the pure Python runs"

demo: install
	$(VENV)/bin/kubetwin demo --out runs/demo

# The browser tests (tests/test_report_browser.py) drive Debian's chromium through Playwright: Playwright's own
# browser download is not reachable, so the system package is installed when it is missing.
test: $(VENV)/.installed-test
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(MAKE) native
	$(PYTEST) -n $(TEST_WORKERS)

# The edit loop's tier: every test but the slow, live-server, browser and documentation ones (pytest markers,
# pyproject.toml), in under a minute on 2 cores; `make test` is the gate.
test-fast: $(VENV)/.installed-test
	$(PYTEST) -n auto -m "not slow and not live and not browser and not docs"

bench: install
	$(PY) benchmarks/bench_scheduling.py
	$(PY) benchmarks/bench_report.py --repeat 3 --base-rev 8c4b814
