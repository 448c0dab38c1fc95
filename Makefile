# Two commands do everything on a fresh machine:  make demo  |  make test
# Re-running does only what changed: the venv and the editable install are
# stamp files (redone when pyproject.toml/setup.py change); the extension is
# handed to ninja every time, which recompiles only changed files.

PYTHON ?= python3
comma  := ,
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMPS := .stamps
# Building imports torch; our own backend must not autoload half-built.
# ccache, where installed, makes rebuilds of unchanged files (other
# checkouts, clean clones on the same machine) near-free; optional. The base is
# the checkout, so the venv's torch headers are relative paths too (a hit in any clone).
# The sloppiness lets ccache cache files compiled with the precompiled header (docs/building.md).
CCACHE_DIR_PATH := $(wildcard /usr/lib/ccache)
BUILD_ENV := TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=2 $(if $(CCACHE_DIR_PATH),PATH=$(CCACHE_DIR_PATH):$$PATH CCACHE_BASEDIR=$(CURDIR) CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines$(comma)time_macros)

.PHONY: setup ext demo test test-deep test-sanitize test-tsan stress-exit long-runs op-coverage dtype-widening bench clean docs browser screenshot

setup: ext $(STAMPS)/install

# torch==2.13.0: pip takes the CPU build where its configuration offers one (a
# find-links directory or a CPU index); PyPI's default is the multi-GB CUDA build. ninja makes extension rebuilds incremental.
$(STAMPS)/deps: pyproject.toml
	@mkdir -p $(STAMPS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q "torch==2.13.0" numpy pybind11 pytest pytest-xdist hypothesis expecttest ninja "setuptools>=64" wheel
	# the report page (bokeh), the docs site (sphinx), the browser tests (playwright; pillow counts
	# a screenshot's pixels): pyproject's extras
	$(PIP) install -q "bokeh>=3.4" "playwright>=1.40" "pillow>=9" "sphinx>=7.2" "myst-parser>=2" "pydata-sphinx-theme>=0.15"
	# the training stacks tests/ecosystem/ runs unmodified (pyproject's ecosystem extra)
	$(PIP) install -q "transformers>=5.23,<5.24" "accelerate>=1.15,<1.16"
	touch $@

# Always asks ninja: it tracks every source and header itself (a stamp
# compared by mtime can miss an edit made while another build ran).
ext: $(STAMPS)/deps
	$(BUILD_ENV) $(PY) setup.py -q build_ext --inplace

$(STAMPS)/install: $(STAMPS)/deps pyproject.toml setup.py
	TORCH_NEURON_SIM_NO_EXT=1 $(BUILD_ENV) $(PIP) install -q --no-build-isolation --no-deps -e .
	touch $@

demo: setup
	$(PY) examples/demo.py
	$(PY) -m torch_neuron_sim report examples/transformer_lm.py

# The browser tests drive Debian's chromium with Playwright (which cannot
# download its own browser builds here). Installed once; needs root (CI is).
browser: $(STAMPS)/browser
$(STAMPS)/browser:
	@mkdir -p $(STAMPS)
	test -x /usr/lib/chromium/chromium || { apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core; }
	touch $@

# The docs site, warnings as errors (tests/docs/test_docs_site.py builds it too).
docs: setup
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: open docs/_build/html/index.html"

# The README's screenshot of the report page (docs/images/report.png).
screenshot: setup browser
	$(PY) scripts/report_screenshot.py

# One pytest worker per core (pytest-xdist), a test file per worker at a time:
# a file's module fixtures (the docs build, the OpInfo shard, a browser) are
# then built once, and most of the suite's time is fresh interpreters
# importing torch, which parallelise well. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= auto
# TORCH=<version> (TORCH_PYTHON=<X.Y> too): the suite against that torch instead, in its own venv
# (.venv-torch<version>) and build directory (build-torch<version>/); the default ones are untouched
# (scripts/test_torch_version.py; README, "Torch versions"). Not part of CI: multi-GB downloads.
TORCH ?=
TORCH_PYTHON ?=
ifeq ($(TORCH),)
test: setup browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile
else
test: browser
	$(BUILD_ENV) $(PYTHON) scripts/test_torch_version.py --torch $(TORCH) $(if $(TORCH_PYTHON),--python $(TORCH_PYTHON)) \
	  -- -q -n $(TEST_WORKERS) --dist loadfile
endif

# Deep also means longer stress: the exit stress runs each program 200 times
# (tests/device/test_exit_under_load.py; `make test` runs 10 of each), and the
# long runs are 10,000 steps and 1,000,000 ops (tests/memory/test_long_runs.py).
test-deep: setup browser
	NEURON_SIM_HYPOTHESIS_PROFILE=deep NEURON_SIM_OPINFO=deep NEURON_SIM_STRESS_RUNS=200 NEURON_SIM_LONG_RUN=deep $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Reruns the OpInfo suite in full (every dtype, every reference input) and
# rewrites docs/op-coverage.md from the results.
op-coverage: setup
	NEURON_SIM_OPINFO=write $(PY) -m pytest -q tests/testing/opinfo

# Which native ops are computed in a wider dtype (docs/dtype-widening.md).
dtype-widening: setup
	$(PY) tests/testing/opinfo/dtype_sweep.py > docs/dtype-widening.md

# The extension built with AddressSanitizer + UndefinedBehaviorSanitizer in
# its own directory (build-sanitize/; the normal build is untouched), then the
# tests that exercise the C++ layers run against it; docs/sanitizer.md gets
# the run's figures and whether it fits CI (scripts/test_sanitize.py). Not in
# `make test`: the sanitizer flags share no object with the normal build, so
# every C++ file compiles again, and the tests run slower under
# ASan (docs/sanitizer.md gives the last run's figures); `.ci/run` runs it after `make test`.
SANITIZE_TESTS ?= tests/execution/test_execution.py tests/execution/test_structured_fallback.py tests/memory/test_memory_api.py tests/memory/test_memory_debug.py \
	tests/memory/test_memory_reliability.py tests/device/test_streams.py tests/execution/test_dtype_policy.py tests/execution/test_errors.py \
	tests/device/test_registration.py tests/execution/test_attention.py tests/device/test_random.py tests/memory/test_pinned_memory.py \
	tests/execution/test_complex_views.py tests/execution/test_dtype_widening.py tests/execution/test_unsupported.py \
	tests/execution/test_fuzz_views_and_ops.py tests/execution/test_hostile_native_tables.py tests/device/test_concurrent_threads.py \
	tests/device/test_autograd_exit.py
test-sanitize: setup
	$(BUILD_ENV) $(PY) scripts/test_sanitize.py $(SANITIZE_TESTS)

# The README's example and the demo's training loop, 200 runs each, two at a
# time, in fresh interpreters: 0 non-zero exits (an abort at exit is -6); a
# failed run's output is kept in build/stress-exit/.
stress-exit: setup
	$(PY) scripts/stress_exit.py --runs 200 --jobs 2

# The long runs at the sizes of `make test-deep` (10,000 training steps, 1,000,000
# ops under a report, 100,000 under the profiler), their figures written into
# docs/memory.md ("Long runs") by scripts/long_runs.py.
long-runs: setup
	$(PY) scripts/long_runs.py

# The extension built with ThreadSanitizer in build-tsan/ (the normal build is
# untouched), then the same tests as test-sanitize (among them the eight-thread
# test, streams and the autograd device thread at exit);
# docs/sanitizer.md gets the run's figures and its suppressions with their
# reasons (scripts/test_sanitize.py --thread). Not in `make test`, for the
# same reason as test-sanitize; `.ci/run` runs it after test-sanitize.
TSAN_TESTS ?= $(SANITIZE_TESTS)
test-tsan: setup
	$(BUILD_ENV) $(PY) scripts/test_sanitize.py --thread $(TSAN_TESTS)

# Writes docs/benchmarks.md, the README's table and benchmarks/ratchets.json, and fails when
# a missed aim got worse than its committed ratchet (figures come from this run only;
# bench_report_page opens the report page in headless Chromium, hence browser).
bench: setup browser
	$(PY) benchmarks/run_all.py

clean:
	rm -rf build build-sanitize build-torch* $(STAMPS) torch_neuron_sim/*.so *.egg-info docs/_build
