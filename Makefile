# `make demo`, `make test`, `make check` and `make lint` set everything up (a .venv with the
# pinned dependencies) and run.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_HOME ?= $(CURDIR)/.spotfit-demo
# No test, benchmark or demo lets botocore ask an instance metadata address for credentials.
export AWS_EC2_METADATA_DISABLED := true
# Compiled modules are kept (outside the source folders), even where the environment says not to
# write them: every process the suite starts (runtimes, CLIs) otherwise compiles spotfit again,
# about 0.45 s each on this 2-core machine (docs/benchmarks.md).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/.pycache

.PHONY: demo test test-stress check heavy-list lint bench bench-coldstart bench-scale clean browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[tf-cpu,gcp,test,lint]'
	# Keras 2 for `training.keras: 2`, beside tensorflow-cpu: its own requirement is the `tensorflow`
	# package, a second TensorFlow (pyproject.toml, tf-cpu).
	$(BIN)/python -m pip install -q --no-deps 'tf-keras==2.21.*'
	touch $(STAMP)

demo: $(STAMP)
	SPOTFIT_HOME=$(DEMO_HOME) $(BIN)/spotfit run examples/digits/spotfit.yaml
	SPOTFIT_HOME=$(DEMO_HOME) $(BIN)/spotfit cost digits

# The whole suite: unit tests, the docstring examples of spotfit/, and the real end-to-end runs,
# on one worker more than the machine has cores, at most 8 (a test file stays on one worker, so
# its module fixtures start once): about a fifth of a worker's time is spent waiting (on a server,
# a backoff, an outage the test stages, a child's start), and the extra worker fills it (on 2
# cores: docs/benchmarks.md, "The test suite's time"). The 20 slowest tests are listed at the end.
# pytest runs under tests/support/suite_run.py, which ends whatever the suite left running
# (however pytest ended) and prints the CPU seconds it used and the real TensorFlow attempts it ran.
WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 7 ? n + 1 : 8 )))
SUITE := -n $(WORKERS) --dist loadfile --durations=20
RUN_SUITE := $(BIN)/python -m tests.support.suite_run
test: $(STAMP) browser
	$(RUN_SUITE) $(SUITE)

# The same suite on a loaded machine, as ../shared/tools/fresh-ci.sh --load loads it: two busy
# loops at the suite's own priority keep both cores busy while it runs. (Not `nice -n 19`: in one
# session the kernel weighs nice values against each other, so the suite would get about 1.5% of
# the CPU and take days.) No test may depend on the machine's speed, so it passes as `make test`
# does, only slower; the busy loops end with it, whatever its outcome.
test-stress: $(STAMP) browser
	$(BIN)/python -c 'while True: pass' & busy1=$$!; \
	$(BIN)/python -c 'while True: pass' & busy2=$$!; \
	trap 'kill $$busy1 $$busy2 2>/dev/null' EXIT INT TERM; \
	$(RUN_SUITE) $(SUITE)

# The dashboard's browser tests drive Debian's chromium (Playwright cannot download a browser
# here); installing it needs root, as in CI. Only `make test` needs it.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

# The fast loop: unit tests and docstring examples on both cores, without the end-to-end runs
# (`slow`) and the tests measured at 1 s or more (`heavy`, listed in tests/heavy.txt); `make test`
# runs them all. Its time: docs/benchmarks.md, "The fast loop".
check: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not heavy" -q -n 2

# Measure the fast loop without the list and write tests/heavy.txt again (about 10 minutes).
heavy-list: $(STAMP)
	$(BIN)/python -m tests.support.heavy

STRICT_PACKAGES = state attempt market controller backends stores spec sdk

lint: $(STAMP)
	$(BIN)/ruff check spotfit tests bench examples
	$(BIN)/mypy
	$(BIN)/mypy --strict $(foreach p,$(STRICT_PACKAGES),-p spotfit.$(p))

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# One controller, many jobs (issue 49): 100 to 2,000 live jobs on a real PostgreSQL, their attempts
# simulated (bench/scale_controller.py); about 20 minutes; the table goes to docs/benchmarks.md.
bench-scale: $(STAMP)
	$(BIN)/python bench/bench_scale.py

# The cold-start benchmark alone: the environment cache, then copy, snapshot and mount on a 2 GiB
# dataset generated in a temporary folder (DATA_GIB=0.5 for a shorter run; docs/benchmarks.md).
DATA_GIB ?= 2
bench-coldstart: $(STAMP)
	$(BIN)/python bench/bench_coldstart.py --data-gib $(DATA_GIB)

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache .mypy_cache .ruff_cache
