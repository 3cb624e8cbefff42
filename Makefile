# Two set-up commands for a fresh machine: `make demo` (the main job) and `make test`.
# Each creates ./.venv and installs what it needs by itself.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[engine,test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/specgauge demo

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf $(VENV)
