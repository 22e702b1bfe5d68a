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

# The suite on $(WORKERS) workers (tests/workers.py says how it is shared out), stopping at
# the first failure; then the few tests that time something (marker `serial`), alone.
# Three on two cores: much of a test is waiting on a server or a subprocess, and two
# workers kept the cores about 60% busy (7:20 against 8:59; four: 6:58).
WORKERS ?= 3
unit: $(STAMP)
	$(BIN)/pytest -q -n $(WORKERS) --dist loadgroup --no-loadscope-reorder --maxfail=1 \
		-m "not serial" --durations=15
	$(BIN)/pytest -q -x -p no:xdist -m serial --durations=5

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

binary: $(STAMP)
	$(BIN)/python build/build_binary.py

clean:
	rm -rf $(VENV) dist build/work .mypy_cache .ruff_cache .pytest_cache
