# The two commands that work on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench binary clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/appliance demo

lint: $(STAMP)
	$(BIN)/ruff check appliance tests bench build

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q -x --durations=15

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

binary: $(STAMP)
	$(BIN)/python build/build_binary.py

clean:
	rm -rf $(VENV) dist build/work .mypy_cache .ruff_cache .pytest_cache
