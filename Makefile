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

.PHONY: venv crossval test test-fast policies fixtures bench validate validate-retest validate-design-round2 validate-design-round3 validate-untouched2 validate-untouched3 validate-retest-untouched3 validate-untouched4 design-round2 design-round3 retest-untouched3 multisim correct clean-venv

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

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process: most tests use
# one core (measured: load 1.2 on 2 cores for a serial run). Capped at 4, since a test may start
# its own engine workers; TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))" 2>/dev/null || echo 2)
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not slow" $(ARGS)

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

# The validation study (validation/README.md: the protocol, what each target costs). Each target
# trains the population split it needs first (cached in .cache/population) and writes its table into
# validation/NOTEBOOK.md between the target's markers.

# The three parts scored with the shipped design (validation/NOTEBOOK.md, "Validation").
validate: $(STAMP)
	$(PY) validation/train_population.py
	$(PY) validation/validate_risk.py $(ARGS)

# How much of the validation's miss is measurement noise ("Retest"); after make validate.
validate-retest: $(STAMP)
	$(PY) validation/validate_retest.py $(ARGS)

# Design round 2: gear play and dropped frames on the ladders, chosen on the choosing parts.
validate-design-round2: $(STAMP)
	$(PY) validation/train_population.py
	$(PY) validation/design_round2.py $(ARGS)

# Design round 3: a combined headroom for the verdict, on design round 2's records.
validate-design-round3: $(STAMP)
	$(PY) validation/train_population.py
	$(PY) validation/design_round3.py $(ARGS)

# The second and third untouched parts: each scored once, with the design validation/seals.yaml
# records as frozen for it after its seal; validate_sealed.py refuses before.
validate-untouched2 validate-untouched3: validate-untouched%: $(STAMP)
	$(PY) validation/train_population.py --split untouched$*
	$(PY) validation/validate_sealed.py --part untouched$* $(ARGS)

# How much of the third untouched part's miss is measurement noise; after validate-untouched3.
validate-retest-untouched3: $(STAMP)
	$(PY) validation/retest_sealed.py --part untouched3 $(ARGS)

# The study's targets under their names before validation/ existed.
design-round2 design-round3: %: validate-%
retest-untouched3: validate-retest-untouched3

# Multi-engine training experiment (docs/multisim.md): trains 4 recipes x 4 seeds (cached), then evaluates.
multisim: $(STAMP)
	$(PY) validation/multisim.py --seeds 0,1,2,3 $(ARGS)

# Corrections experiment (docs/correction.md): operator corrections on a slippery floor -> a residual ->
# base vs corrected, where the corrections were collected and where they were not; reports/correct/.
correct: $(STAMP)
	$(PY) scripts/correct_experiment.py $(ARGS)

# Dependency ranges at their lower bounds (docs/install.md): uv resolves every direct
# dependency of `.[all,dev]` to the lowest version its range allows (the extras' own pins may lift
# some, e.g. newton lifts mujoco), installs that set into a throwaway venv outside the checkout and
# runs the tests that touch those libraries. Not part of `make test`: it downloads a second set.
BOUNDS_DIR ?= /tmp/crosssim-bounds
BOUNDS_TESTS ?= tests/test_stats.py tests/test_card_schema.py tests/test_cards.py tests/test_risk.py \
	tests/test_gym_equivalence.py tests/test_parity.py tests/test_crossval.py tests/test_policies.py tests/test_report.py
bounds:
	test -x $(BOUNDS_DIR)/tool/bin/uv || ($(PYTHON) -m venv $(BOUNDS_DIR)/tool && $(BOUNDS_DIR)/tool/bin/pip install -q uv)
	$(BOUNDS_DIR)/tool/bin/uv pip compile pyproject.toml --extra all --extra dev --resolution lowest-direct \
		--python-version 3.11 -q -o $(BOUNDS_DIR)/lowest.txt
	rm -rf $(BOUNDS_DIR)/env && $(BOUNDS_DIR)/tool/bin/uv venv -q -p $(PYTHON) $(BOUNDS_DIR)/env
	VIRTUAL_ENV=$(BOUNDS_DIR)/env $(BOUNDS_DIR)/tool/bin/uv pip install -q -r $(BOUNDS_DIR)/lowest.txt
	VIRTUAL_ENV=$(BOUNDS_DIR)/env $(BOUNDS_DIR)/tool/bin/uv pip install -q --no-deps -e .
	CROSSSIM_CACHE=$(BOUNDS_DIR)/rows $(BOUNDS_DIR)/env/bin/python -m pytest -q -p no:cacheprovider -m "not slow" $(BOUNDS_TESTS)

# The fourth untouched part (validation/validate_untouched4.py): the deployment rehearsal's test.
validate-untouched4: $(STAMP)
	$(PY) validation/train_population.py --split untouched4
	$(PY) validation/validate_untouched4.py --phase measure $(ARGS)
	$(PY) validation/validate_untouched4.py --phase retest $(ARGS)
	$(PY) validation/validate_untouched4.py --phase seeds $(ARGS)
	$(PY) validation/validate_untouched4.py --phase score
