# The README's two commands: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test install lint bench clean-data

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	HOST=$(HOST) PORT=$(PORT) $(PY) -m config.launcher

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .

clean-data:
	rm -rf .data
