# Two commands a newcomer needs: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck bench clean venv chromium

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest

demo: $(STAMP)
	$(BIN)/paigow-table demo

# The browser tests drive Debian's chromium (tests/browser); CI runs as root.
chromium:
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/house_way.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
