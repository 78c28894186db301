# Every target prepares the machine first (scripts/setup.sh is idempotent).
VENV := .venv
BIN := $(VENV)/bin
# Compiled modules are kept (__pycache__, ignored by git) even where the host's
# environment says not to: the tests and the demo start hundreds of Python processes,
# and each compiled the project again (0.3 s of CPU each; pytest's assertion rewriting
# of every test file, 7 s a run).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test lint bench docs clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/floodgate demo --groups 4

lint: setup
	$(BIN)/ruff check .

test: setup lint
	$(BIN)/pytest -n 3 --dist loadgroup -m "not quiet"  # three workers: most tests wait on sockets and processes, not a core
	$(BIN)/pytest -m quiet  # then, alone, what judges latency against a line

# docs/ into site/ (open site/index.html); strict: a broken link or anchor fails the build
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

bench:
	@bash scripts/setup.sh --bench
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build site *.egg-info
