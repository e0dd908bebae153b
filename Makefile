# The README's two commands are `make demo` and `make test`; each installs first when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DATA ?= data

.PHONY: install demo test test-fast lint clean slurm-up slurm-down

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch and torchvision first, as a pair: other pairings fail to import torchvision.
	$(BIN)/pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m mmsum.cli.demo --data-dir $(DEMO_DATA)

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# A single-node SLURM on this machine (root; apt-get install -y slurm-wlm munge), see docs/scaling.md.
slurm-up:
	scripts/slurm_local.sh start

slurm-down:
	scripts/slurm_local.sh stop

clean:
	rm -rf $(DEMO_DATA)/demo outputs multirun
