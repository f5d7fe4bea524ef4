# `make demo` and `make test` set everything up (a .venv with the pinned dependencies) and run.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_HOME ?= $(CURDIR)/.spotfit-demo

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[tf-cpu,test]'
	touch $(STAMP)

demo: $(STAMP)
	SPOTFIT_HOME=$(DEMO_HOME) $(BIN)/spotfit run examples/digits/spotfit.yaml
	SPOTFIT_HOME=$(DEMO_HOME) $(BIN)/spotfit cost digits

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache
