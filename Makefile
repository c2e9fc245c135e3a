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
	$(PY) -m pip install -q -e ".[test]"
	@touch $(STAMP)

venv: $(STAMP)

## Run the main end-to-end job on the bundled Adult data.
demo: $(STAMP)
	$(PY) -m synthinfer.demo --out demo-output $(DEMO_ARGS)

## Set up and run the whole test suite.
test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q

clean:
	rm -rf $(VENV) demo-output .pytest_cache
