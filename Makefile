# litrepro: two commands do all the set-up on a fresh machine.
#   make reproduce   executes every method's notebook for seeds 42, 43, 44 into rendered/
#   make test        the whole test suite, nbval over the rendered notebooks included
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SEEDS  ?= 42 43 44
SHARED ?= $(abspath ../shared)

# Tests and CI read the shared, verified corpus and seed files when they exist.
ifneq ($(wildcard $(SHARED)/data/gutenberg-1524-hamlet.txt),)
export LITREPRO_CORPUS ?= $(SHARED)/data/gutenberg-1524-hamlet.txt
endif
ifneq ($(wildcard $(SHARED)/seeds),)
export LITREPRO_SEEDS_DIR ?= $(SHARED)/seeds
endif
export MPLBACKEND ?= Agg

NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: install reproduce test lab explore bench corpus clean effect-study rlbp-study claims dose-response rlbp-diagnosis rlbp-td-calibration rlbp-d3rlpy rlbp-contextual effect-holm

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml requirements.lock
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[test]'
	touch $@

install: $(VENV)/.installed

corpus: install
	@if [ -z "$$LITREPRO_CORPUS" ]; then $(BIN)/python -m litrepro fetch-corpus; fi

reproduce: corpus
	$(BIN)/python -m litrepro run --seeds $(SEEDS) --force
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# README.md and docs/*.md: regenerate every result block from the committed JSON (litrepro.claims)
claims: install
	$(BIN)/python -m litrepro claims --write

test: install
	$(BIN)/python -m litrepro claims --check
	$(BIN)/python -m pytest tests $(NBVAL) rendered --fault-results build/fault_tests.json

lab: install
	$(BIN)/jupyter lab notebooks/

# The two explorers (notebooks/explore_*.ipynb) as standalone pages, served by Voila on 127.0.0.1 behind a
# fresh token (printed in the addresses), with no request to another host (docs/security.md).
EXPLORE_PORT ?= 8866
explore: corpus
	$(BIN)/python -m litrepro.explore.serve --port $(EXPLORE_PORT)

bench: install
	$(BIN)/python benchmarks/run.py

# waypoint_opd: paired per-seed differences of the arms over 16 seeds (its JSON records no wall time)
effect-study: corpus
	$(BIN)/python -m litrepro study effect-study --seeds 42-57 --jobs 2
	$(BIN)/python -m litrepro study effect-holm   # Holm-adjusted rows beside it (seconds; make effect-holm)
	$(BIN)/python -m litrepro run --seeds $(SEEDS) --no-progress   # re-renders the summary notebook that shows it
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# pinterest_rlbp: 20 seeds x 4 critic backups, the headroom and 8/16 logged days, paired CIs (its JSON records no wall time)
rlbp-study: install
	$(BIN)/python -m litrepro study rlbp-study --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro run --seeds $(SEEDS) --no-progress   # re-renders the summary notebook that shows it
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# waypoint_opd: the effect study's Holm-adjusted intervals, from its committed JSON (seconds; no run)
effect-holm: install
	$(BIN)/python -m litrepro study effect-holm
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# waypoint_opd: the gate's effect at 5 teacher-RL learning rates, 16 seeds, paired CIs (dose_response.json records 80 s wall on 2 cores)
dose-response: corpus
	$(BIN)/python -m litrepro study dose-response --seeds 42-57 --jobs 2
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# pinterest_rlbp: the learned bidder against the critic's budget (4 backups x 5 budgets), a convergence rule, data scaling
# and three baselines, 20 seeds; resumable (build/studies/rlbp-budget/); prints its cost first (budget_study.json records
# 248 CPU-s per seed: about 41 min for all 20 on 2 cores)
.PHONY: rlbp-budget
rlbp-budget: install
	$(BIN)/python -m litrepro study rlbp-budget --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# waypoint_opd: the transfer regime, 17 arms x 240 updates, learning curves and the learning-rate frontier, 16 seeds
# (prints its expected cost first; 1064 s on 2 cores, transfer_study.json's wall_seconds)
.PHONY: waypoint-transfer
waypoint-transfer: corpus
	$(BIN)/python -m litrepro study waypoint-transfer --seeds 42-57 --jobs 2

# waypoint_opd: the OPD step's gradient norm and parameter change against the record, with explaining arms (opd_calibration.json records its wall time; under a minute on 2 cores)
.PHONY: waypoint-opd-calibration
waypoint-opd-calibration: corpus
	$(BIN)/python -m litrepro study waypoint-opd-calibration --seeds 42-57 --jobs 1

# waypoint_opd: the transfer regime's arms from a teacher that forgets (a two-phase curriculum), 16 seeds (no run of it is committed)
.PHONY: waypoint-curriculum
waypoint-curriculum: corpus
	$(BIN)/python -m litrepro study waypoint-curriculum --seeds 42-57 --jobs 2

# pinterest_rlbp: placebo, operator and ablations (one factor per row unless the row says otherwise) at our default budget of 600 critic steps, 20 seeds, paired CIs (458 s on 2 cores, diagnosis.json's wall_seconds)
rlbp-diagnosis: install
	$(BIN)/python -m litrepro study rlbp-diagnosis --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# pinterest_rlbp: hypotheses for why our held-out TD losses differ from the seed's (units; relaxation vs Adam), 20 seeds (its JSON records no wall time)
rlbp-td-calibration: install
	$(BIN)/python -m litrepro study rlbp-td-calibration --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# pinterest_rlbp: d3rlpy's DoubleDQN, DiscreteCQL and DiscreteBCQ on the exported logged transitions, evaluated in the
# simulator's truth at 600, 3000 and 6000 steps, 20 seeds, paired CIs (522 s on 2 cores, d3rlpy_crosscheck.json's wall_seconds; prints its cost).
# d3rlpy comes with the test extra (`make install`); the results are in the rlbp-d3rlpy claims block.
# The contextual market (issue 29, our reconstruction): oracles, the learned bidder and six off-policy estimators.
# contextual_study.json records 190 s wall, 377 CPU-s on 2 cores (20 seeds); the script prints its cost.
rlbp-contextual: install
	$(BIN)/python -m litrepro study rlbp-contextual --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro study rlbp-contextual-pairing   # the learned bidder minus the table policies, paired (seconds)
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# The backup, budget and diagnosis studies re-run in the contextual market (issue 29, our reconstruction): 4 backups
# and a placebo x 4 critic budgets, the held-out-TD-loss rule and the baselines, 20 seeds; the script prints its
# cost first (contextual_budget.json records 2585 CPU-s, about 129 per seed, 2518 s wall on 2 cores).
.PHONY: rlbp-contextual-budget
rlbp-contextual-budget: install
	$(BIN)/python -m litrepro study rlbp-contextual-budget --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro study rlbp-contextual-pairing   # the learned bidder minus the table policies, paired (seconds)
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# The contextual budget study's learned arms minus the contextual study's table policies, paired by seed from the two
# committed JSON files (no simulation; seconds): rendered/pinterest_rlbp/contextual_pairing.json.
.PHONY: rlbp-contextual-pairing
rlbp-contextual-pairing: install
	$(BIN)/python -m litrepro study rlbp-contextual-pairing
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

# The seed market's one-factor diagnosis arms (target sync, gamma, the actor's support and temperature) in the
# contextual market, paired with the budget study's max_min and placebo, 20 seeds; prints its cost first.
.PHONY: rlbp-contextual-diagnosis
rlbp-contextual-diagnosis: install
	$(BIN)/python -m litrepro study rlbp-contextual-diagnosis --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

rlbp-d3rlpy: install
	$(BIN)/python -m litrepro study rlbp-d3rlpy --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro claims --write   # the result blocks in README.md and docs/ (make claims)

clean:
	rm -rf $(VENV) build src/*.egg-info

# Re-draw every committed PNG from the committed JSON (no study or seed re-runs; a few seconds).
.PHONY: replot
replot:
	$(BIN)/python -m litrepro.replot

# After a passing `make test`: commit its fault tests' outcomes, which the trust report shows.
.PHONY: fault-results
fault-results:
	@test -f build/fault_tests.json || { echo "build/fault_tests.json is missing: run make test first"; exit 2; }
	$(BIN)/python -m litrepro.fault_results build/fault_tests.json rendered/fault_tests.json

# The reader's edition: a static HTML book of the committed rendered/ notebooks and JSON (never
# re-executed), with the generated trust report, into build/book/ (open build/book/index.html).
.PHONY: book
book: install
	$(BIN)/python -m litrepro.book --out build/book
