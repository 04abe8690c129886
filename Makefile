VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

.PHONY: install demo test lint bench
install: $(VENV)/bin/python
	$(PY) -m pip install -q -e .

demo: install
	$(VENV)/bin/kubetwin demo --out runs/demo

# The browser tests (tests/test_report_browser.py) drive Debian's chromium through Playwright: Playwright's own
# browser download is not reachable, so the system package is installed when it is missing.
test: $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test]'
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/bench_scheduling.py
	$(PY) benchmarks/bench_report.py --repeat 3 --base-rev 8c4b814
