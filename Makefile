# Every target sets itself up from nothing: a fresh clone needs only `make test`
# or `make demo`. The venv lives in .venv (git-ignored) and is rebuilt only when
# requirements-dev.txt changes.
PYTHON_BOOT ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test test-core bench clean

setup: $(STAMP)

$(STAMP): requirements-dev.txt
	@command -v $(PYTHON_BOOT) >/dev/null || { echo "Python 3.11 is required (python3.11 not found on PATH)" >&2; exit 1; }
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

test: setup
	$(PY) -m pytest -q tests

bench: setup
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
