# Two commands on a fresh machine: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PSP_DATA ?= ../shared/data
export PSP_DATA

.PHONY: venv demo test lint bench registry-text clean

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

# English text from Debian packages for the distillation pool (issue 7), unpacked without installing:
# WordNet glosses, the fortune collections, GCIDE, The Devil's Dictionary, the Jargon File. See
# src/psp_hf/distill/registry_text.py for the licences; psp_hf.distill finds them under .cache/registry-text/root.
# GCIDE (dict-gcide) is left out by default: it is larger than all the rest together, and labelling it with the
# teacher would not fit the one-hour training budget on a 2-core machine. REGISTRY_DEBS="... dict-gcide" adds it.
REGISTRY_DEBS ?= wordnet-base fortunes-min fortunes dict-devil dict-jargon

registry-text: .cache/registry-text/.unpacked

.cache/registry-text/.unpacked:
	mkdir -p .cache/registry-text/debs .cache/registry-text/root
	cd .cache/registry-text/debs && apt-get download $(REGISTRY_DEBS)
	for deb in .cache/registry-text/debs/*.deb; do dpkg -x $$deb .cache/registry-text/root; done
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
