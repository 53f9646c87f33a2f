# Every target sets itself up from nothing: a fresh clone needs only `make demo`
# or `make test`. Virtual environments live in the repo folder (git-ignored) and
# are rebuilt only when their requirements change.
PYTHON_BOOT ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
VENV45 := .venv45
PY45 := $(VENV45)/bin/python
BPY_VERSION := 5.0.1
BPY45_VERSION := 4.5.15
SCIPY_VERSION := 1.13.1
EXT_CLI = $(VENV)/lib/python3.11/site-packages/bpy/5.0/scripts/addons_core/bl_pkg/cli/blender_ext.py
WHEEL_PLATFORMS := manylinux2014_x86_64 win_amd64 macosx_12_0_arm64 macosx_10_9_x86_64

.PHONY: setup setup45 test test-core test-blender test-blender45 demo bench bench-scale extension clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements-dev.txt Makefile
	@command -v $(PYTHON_BOOT) >/dev/null || { echo "Python 3.11 is required: python3.11 not found on PATH" >&2; exit 1; }
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt bpy==$(BPY_VERSION)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

setup45: $(VENV45)/.installed

$(VENV45)/.installed: requirements-dev.txt Makefile
	$(PYTHON_BOOT) -m venv $(VENV45)
	$(PY45) -m pip install --quiet --upgrade pip
	$(PY45) -m pip install --quiet -r requirements-dev.txt bpy==$(BPY45_VERSION)
	touch $@

# The extension zip(s), built and validated with the builder that ships in bpy.
extension: setup
	@mkdir -p blender_reldesc/wheels dist
	@for p in $(WHEEL_PLATFORMS); do \
	  ls blender_reldesc/wheels/scipy-$(SCIPY_VERSION)-*$$p*.whl >/dev/null 2>&1 || \
	  $(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
	    --platform $$p -d blender_reldesc/wheels scipy==$(SCIPY_VERSION) || exit 1; \
	done
	$(PY) $(EXT_CLI) validate blender_reldesc
	$(PY) $(EXT_CLI) build --source-dir blender_reldesc --output-dir dist --split-platforms

test: setup extension setup45
	$(PY) -m pytest -q tests
	$(PY45) -m pytest -q tests/blender

test-core: setup
	$(PY) -m pytest -q tests --ignore=tests/blender

demo: setup
	$(PY) -m blender_reldesc demo -o demo_out
	@echo "Open demo_out/demo.blend; see demo_out/before_after.png and demo_out/report.json"

bench: setup
	$(PY) benchmarks/bench_core.py

# Bind and adapt time and peak memory against clip length and triangle count, with a log-log
# plot (matplotlib is only needed here, so it is not in requirements-dev.txt).
bench-scale: setup
	$(PY) -m pip install --quiet matplotlib==3.9.4
	$(PY) benchmarks/bench_scale.py

clean:
	rm -rf $(VENV) $(VENV45) .pytest_cache .hypothesis dist demo_out blender_reldesc/wheels
