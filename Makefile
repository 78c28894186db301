# Every target prepares the machine first (scripts/setup.sh is idempotent).
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/floodgate demo --groups 4

lint: setup
	$(BIN)/ruff check .

test: setup lint
	$(BIN)/pytest

bench:
	@bash scripts/setup.sh --bench
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
