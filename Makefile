# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
JOBS   ?= 2

.PHONY: demo test venv clean bench

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,spark]"
	@touch $(STAMP)

venv: $(STAMP)

## Run the main end-to-end job on the bundled Adult data.
demo: $(STAMP)
	$(PY) -m synthinfer.demo --out demo-output $(DEMO_ARGS)

## Set up and run the whole test suite.
test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q

## Speed checks (minutes) into benchmarks/*/results; the paper-reproduction studies take
## hours and are run by hand (README, "Benchmarks"). `make bench FULL=1` adds the full Adult
## NUTS fit and writes benchmarks/napsu/results/speed.json, which the README's figures cite.
BENCH_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
ifdef FULL
NAPSU_SPEED_ARGS := --out benchmarks/napsu/results/speed.json
else
NAPSU_SPEED_ARGS := --skip-adult-nuts --out benchmarks/napsu/results/speed_quick.json
endif
bench: $(STAMP)
	XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
	  $(PY) benchmarks/napsu/engine_speed.py
	$(PY) benchmarks/napsu/speed.py $(NAPSU_SPEED_ARGS)
	$(PY) benchmarks/analysis/speed.py
	$(BENCH_ENV) $(PY) benchmarks/weights/speed_adult.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache
