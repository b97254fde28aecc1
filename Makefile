# Two commands on a fresh machine: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PSP_DATA ?= ../shared/data
export PSP_DATA

.PHONY: venv demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU wheel on disk; plain `torch` would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) -m psp_hf.demo

test: venv
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: venv
	$(PY) bench/encode.py
	$(PY) bench/train.py
	$(PY) bench/eval.py
	$(PY) bench/prepare.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
