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

.PHONY: install reproduce test lab explore bench corpus clean effect-study rlbp-study rlbp-td-calibration

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

test: install
	$(BIN)/python -m pytest tests $(NBVAL) rendered

lab: install
	$(BIN)/jupyter lab notebooks/

# The two explorers (notebooks/explore_*.ipynb) as standalone pages, served by Voila on localhost.
EXPLORE_PORT ?= 8866
explore: corpus
	@echo "litrepro explorers (Ctrl-C stops the server):"
	@echo "  pinterest_rlbp: http://localhost:$(EXPLORE_PORT)/voila/render/explore_pinterest_rlbp.ipynb"
	@echo "  waypoint_opd:   http://localhost:$(EXPLORE_PORT)/voila/render/explore_waypoint_opd.ipynb"
	$(BIN)/voila notebooks/ --no-browser --port=$(EXPLORE_PORT) --Voila.ip=127.0.0.1 --show_tracebacks=True

bench: install
	$(BIN)/python benchmarks/run.py

# waypoint_opd: paired per-seed differences of the arms over 16 seeds (a few minutes on one core)
effect-study: corpus
	$(BIN)/python studies/waypoint_effect_study.py --seeds 42-57
	$(BIN)/python -m litrepro run --seeds $(SEEDS) --no-progress   # re-renders the summary notebook that shows it

# pinterest_rlbp: 20 seeds x 4 critic backups, the headroom and 8/16 logged days, paired CIs (about 15 min on 2 cores)
rlbp-study: install
	$(BIN)/python studies/rlbp_policy_study.py --seeds 42-61 --jobs 2
	$(BIN)/python -m litrepro run --seeds $(SEEDS) --no-progress   # re-renders the summary notebook that shows it

# pinterest_rlbp: why our held-out TD losses differ from the seed's (units; relaxation vs Adam), 20 seeds (about 2 min on 2 cores)
rlbp-td-calibration: install
	$(BIN)/python studies/rlbp_td_calibration.py --seeds 42-61 --jobs 2

clean:
	rm -rf $(VENV) build src/*.egg-info
