# Branchline: `make run` starts the app with demo data; `make test` runs every test.
# Both create the virtualenv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export DJANGO_SETTINGS_MODULE := config.settings

.PHONY: run test lint format vendor bench clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

static/vendor/.installed: package.json package-lock.json scripts/vendor.mjs
	npm ci --ignore-scripts --no-audit --no-fund --silent
	node scripts/vendor.mjs
	touch $@

vendor: static/vendor/.installed

run: $(VENV)/.installed vendor
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-1} $(PY) manage.py seed_demo
	@echo "Branchline is starting at http://127.0.0.1:$(PORT)/"
	DEBUG=$${DEBUG:-1} $(PY) -m daphne -b 127.0.0.1 -p $(PORT) config.asgi:application

test: $(VENV)/.installed vendor
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest $(PYTEST_ARGS)

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

format:
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

bench: $(VENV)/.installed
	$(PY) benchmarks/engine_decide.py

clean:
	rm -rf $(VENV) node_modules static/vendor
