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

test: $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test]'
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/bench_scheduling.py
