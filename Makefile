# crosssim: `make crossval` and `make test` are all a fresh clone needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.crosssim-installed
POLICY ?= policies/hopper-ppo-mujoco/card.yaml
ENGINES ?= mujoco,pybullet,newton-mujoco-warp
EPISODES ?= 10
SEED ?= 0
ARGS ?=
export MUJOCO_GL ?= egl
# Warp kernels compile into ~/.cache/crosssim/warp (engines/newton.py), never into the checkout:
# compiled kernels planted by a pull request would run as code.

.PHONY: venv crossval test test-fast policies fixtures bench validate multisim correct clean-venv

venv: $(STAMP)

# torch first, pinned: the local CPU build. An unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[all,dev]'
	touch $@

crossval: $(STAMP)
	$(VENV)/bin/crosssim crossval --policy $(POLICY) --engines $(ENGINES) --episodes $(EPISODES) --seed $(SEED) $(ARGS)

test: $(STAMP)
	$(PY) -m pytest $(ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" $(ARGS)

policies: $(STAMP)
	$(PY) scripts/train_policies.py $(ARGS)

# Policies other people trained (RL Zoo, Unitree G1, Playground Go1) into ../shared/fixtures, where
# tests and tests/cards look: from their repositories at pinned commits, every file sha256-checked
# (scripts/fixtures.json); an existing folder is only checked. FIXTURES=dir puts them elsewhere.
fixtures: $(STAMP)
	$(PY) scripts/fetch_fixtures.py $(if $(FIXTURES),--dest $(FIXTURES)) $(ARGS)

bench: $(STAMP)
	$(PY) bench/run_all.py $(ARGS)

clean-venv:
	rm -rf $(VENV)

validate: $(STAMP)
	$(PY) bench/train_population.py
	$(PY) bench/validate_risk.py $(ARGS)

# Multi-engine training experiment (docs/multisim.md): trains 4 recipes x 4 seeds (cached), then evaluates.
multisim: $(STAMP)
	$(PY) bench/multisim.py --seeds 0,1,2,3 $(ARGS)

# Corrections experiment (docs/correction.md): operator corrections on a slippery floor -> a residual ->
# base vs corrected, where the corrections were collected and where they were not; reports/correct/.
correct: $(STAMP)
	$(PY) scripts/correct_experiment.py $(ARGS)
