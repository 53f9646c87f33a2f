# Every target sets itself up from nothing: a fresh clone needs only `make demo` or `make test`.
# Virtual environments live in the repo folder (git-ignored) and are rebuilt only when their
# requirements change. Python is found as a user's machine has it (tools/find-python: on PATH,
# a pyenv version, the usual install folders).
#
#   .venv        Blender 5.2 LTS (bpy 5.2.3), Python 3.13: demo, extension, the whole suite
#   .venv53      Blender 5.3 (bpy 5.3.0), Python 3.13: the Blender tests again
#   .venv45      Blender 4.5 LTS (bpy 4.5.15), Python 3.11, every dependency at its stated floor
#   .venv-latest bpy 5.3.0 with the newest numpy, scipy, dask, distributed (upgraded each run)
VENV := .venv
PY := $(VENV)/bin/python
PY53 := .venv53/bin/python
PY45 := .venv45/bin/python
PYLATEST := .venv-latest/bin/python
# pytest on every core, a test handed to whichever worker is free (the slowest take up to 35 s, most under
# 1 s). `make test PYTEST='-m pytest -q'` runs serially.
PYTEST := -m pytest -q -n auto --dist worksteal

# The scipy bundled in the extension zips, for both Pythons Blender ships (4.5: 3.11, 5.1+: 3.13)
# on the four platforms. The same version is listed in blender_manifest.toml and pinned in
# requirements/blender-5.2.txt (tests/blender/test_extension.py checks they agree).
SCIPY_BUNDLED := 1.17.1
WHEEL_PYTHONS := 3.11 3.13
WHEEL_PLATFORMS := manylinux_2_28_x86_64 win_amd64 macosx_12_0_arm64 macosx_10_14_x86_64
# The extension builder that ships inside the bpy wheel (the same code as `blender -c extension`).
EXT_CLI = $(VENV)/lib/python3.13/site-packages/bpy/*/scripts/addons_core/bl_pkg/cli/blender_ext.py

.PHONY: setup setup53 setup45 setup-latest setup-docs test test-latest test-core test-blender demo bench bench-scale \
        extension examples pictures docs docs-check clean

# $(call venv,DIR,PYTHON VERSION,REQUIREMENTS): DIR/.installed, made anew when REQUIREMENTS change.
define venv
$(1)/.installed: $(3) requirements/test.txt
	rm -rf $(1)
	py=$$$$(tools/find-python $(2)) && "$$$$py" -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet -r $(3)
	$(1)/bin/python -m pip install --quiet --no-deps -e .
	touch $$@
endef
$(eval $(call venv,$(VENV),3.13,requirements/blender-5.2.txt))
$(eval $(call venv,.venv53,3.13,requirements/blender-5.3.txt))
$(eval $(call venv,.venv45,3.11,requirements/blender-4.5.txt))

# The documentation site's tools (Sphinx, Furo, MyST); the reference pages are generated with .venv's bpy.
$(eval $(call venv,.venv-docs,3.13,requirements/docs.txt))

setup: $(VENV)/.installed
setup53: .venv53/.installed
setup45: .venv45/.installed
setup-docs: .venv-docs/.installed

# Not a stamp: the newest releases are installed every time.
setup-latest:
	test -x $(PYLATEST) || { py=$$(tools/find-python 3.13) && "$$py" -m venv .venv-latest; }
	$(PYLATEST) -m pip install --quiet --upgrade pip
	$(PYLATEST) -m pip install --quiet --upgrade --upgrade-strategy eager -r requirements/latest.txt
	$(PYLATEST) -m pip install --quiet --no-deps -e .
	@$(PYLATEST) -c "import bpy, numpy, scipy, dask, distributed; print('latest: bpy', bpy.app.version_string, \
	  'numpy', numpy.__version__, 'scipy', scipy.__version__, 'dask', dask.__version__, \
	  'distributed', distributed.__version__)"

# The scipy wheels the zips bundle, downloaded anew when SCIPY_BUNDLED changes.
WHEELS_STAMP := $(VENV)/.scipy-wheels-$(SCIPY_BUNDLED)
$(WHEELS_STAMP): $(VENV)/.installed
	rm -rf blender_reldesc/wheels && mkdir -p blender_reldesc/wheels
	for v in $(WHEEL_PYTHONS); do for p in $(WHEEL_PLATFORMS); do \
	  $(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version $$v \
	    --platform $$p -d blender_reldesc/wheels scipy==$(SCIPY_BUNDLED) || exit 1; \
	done; done
	touch $@

# The extension zips, one per platform, validated and built with Blender 5.2's own builder.
extension: setup $(WHEELS_STAMP)
	@mkdir -p dist
	$(PY) $(EXT_CLI) validate blender_reldesc
	$(PY) $(EXT_CLI) build --source-dir blender_reldesc --output-dir dist --split-platforms

# Everything on Blender 5.2 LTS; the Blender tests again on 5.3; everything again on 4.5 LTS with
# every dependency at its floor.
test: setup extension setup53 setup45
	$(PY) $(PYTEST) tests
	$(PY53) $(PYTEST) tests/blender
	$(PY45) $(PYTEST) tests

# The whole suite with the newest numpy, scipy, dask and distributed (.ci/run runs it too).
test-latest: setup-latest
	$(PYLATEST) $(PYTEST) tests

test-core: setup
	$(PY) $(PYTEST) tests --ignore=tests/blender

test-blender: setup extension
	$(PY) $(PYTEST) tests/blender

demo: setup
	$(PY) -m blender_reldesc demo -o demo_out
	@echo "Open demo_out/demo.blend; see demo_out/before_after.png and demo_out/report.json"

# Each demo scene as a .blend, bound and edited, ready for its last button (examples/, git-ignored).
examples: setup
	$(PY) -m blender_reldesc examples -o examples

# The documentation's pictures, rendered by the demo (committed: a few minutes of Cycles on the CPU).
pictures: setup
	$(PY) tools/docs_pictures.py

# The documentation site in docs/_build/html: the reference pages regenerated from the code, then a
# strict build (every warning an error: a broken link, a missing picture, a page in no table of contents).
SPHINX = .venv-docs/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html
docs: setup setup-docs
	$(PY) tools/docs_reference.py
	$(SPHINX)
	@echo "Open docs/_build/html/index.html"

# CI: the same build, and the committed reference must be what the code gives.
docs-check: setup setup-docs
	$(PY) tools/docs_reference.py --check
	$(SPHINX)

bench: setup
	$(PY) benchmarks/bench_core.py

# Bind and adapt time and peak memory against clip length and triangle count, with a log-log
# plot (matplotlib is only needed here, so it is not in the requirements).
bench-scale: setup
	$(PY) -m pip install --quiet matplotlib==3.10.7
	$(PY) benchmarks/bench_scale.py

clean:
	rm -rf $(VENV) .venv53 .venv45 .venv-latest .venv-docs .pytest_cache .hypothesis dist demo_out examples \
	  docs/_build blender_reldesc/wheels
