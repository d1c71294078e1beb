# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv and install
# everything first. torch is pinned to 2.13.0 and installed before the rest from PyTorch's CPU
# index (TORCH_INDEX), so pip takes the CPU wheel (2.13.0+cpu) instead of pulling CUDA packages;
# a machine that cannot reach that index falls back to its other indexes at once (no retries).
# On a GPU machine: make install TORCH_INDEX= (PyPI's default CUDA build), see docs/install.md.
PYTHON ?= python3
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
VENV := .venv
BIN := $(VENV)/bin
DATA ?= $(or $(EVIRANK_DATASETS),../shared/datasets)
STAMP := $(VENV)/.installed

.PHONY: install browser demo serve test test-slow lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel setuptools
	$(BIN)/python -m pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX) --retries 0)
	$(BIN)/python -m pip install --quiet -e ".[all,dev]"
	touch $(STAMP)

# Debian's Chromium for the browser tests (Playwright drives it; its own browser downloads are never used).
browser:
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	else echo "browser tests will be skipped: chromium is missing and installing it needs root (apt-get install -y chromium)"; fi

demo: install
	DATA=$(DATA) bash scripts/demo.sh

# The search service and its page on the demo's SciFact index (built by `make demo`, or here).
serve: install
	test -f demo/index/evirank-index.json || $(BIN)/evirank index \
		--corpus "$$(DATA=$(DATA) $(BIN)/evirank -q data get scifact)" --index demo/index
	HF_HUB_OFFLINE=1 $(BIN)/evirank serve --index demo/index --scores demo/scores.sqlite --host 127.0.0.1 --port 8080

# The suite on TEST_WORKERS pytest-xdist workers, a file per worker at a time, the long files first
# (tests/conftest.py); TEST_WORKERS=1 runs it in one process. benchmarks/suite_time.py measures both.
TEST_WORKERS ?= 2

test: install browser
	$(BIN)/python -m pytest -q $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test-slow: install
	$(BIN)/python -m pytest -q -m slow

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src

clean:
	rm -rf demo .pytest_cache .mypy_cache .ruff_cache
