# Thin aliases. The README's two commands are `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install run test lint bench image

$(BIN)/skill-mcp: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	@touch $@

install: $(BIN)/skill-mcp

run: install
	$(BIN)/skill-mcp serve

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/mypy src/skill_mcp

bench: install
	$(BIN)/python -m bench
