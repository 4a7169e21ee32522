# The README's two commands: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYPROJECT_SUM := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(PYPROJECT_SUM)
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
, := ,

.PHONY: run test test-fastpaths-off install lint bench simulate clean-data demo-event fuzz soak screenshots coverage \
	cluster cluster-down failover

# The venv with the project and the given extras, installed again when pyproject.toml changes (the target is
# the stamp: $(VENV)/.<kind>-<checksum of pyproject.toml>; older stamps of that kind are removed).
# devtools/install.py says what it does, with the elapsed time (a line per step, and every few seconds while pip
# works), and prints pip's own output only when it fails.
define venv_install
	@$(PYTHON) -m devtools.install --venv $(VENV) --extras "$(1)"
	@rm -f $(VENV)/.$(2)-*
	@touch $@
endef

$(STAMP): pyproject.toml
	$(call venv_install,test,installed)

install: $(STAMP)

run: $(STAMP)
	HOST=$(HOST) PORT=$(PORT) $(PY) -m devtools.launcher

# FASTPATHS=off (`make test FASTPATHS=off`): the whole suite with every fast path off (common/fastpath/README.md).
FASTPATHS ?= on
test: $(STAMP)
	FASTPATHS=$(FASTPATHS) $(PY) -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

# What CI runs with the fast paths off: the fast-path package's own tests and a smoke subset over every road a
# fast path shortens (claim, receipts, matcher pages and parity, decisions, holds, vacancy claims, a
# cancellation, the outbox, races), not the whole suite a second time.
FASTPATHS_OFF_SMOKE := tests/common/fastpath tests/common/test_outbox.py tests/common/test_cas.py \
	tests/waitlist/test_claim_and_book.py tests/waitlist/test_claim_queries.py tests/waitlist/test_offers.py \
	tests/waitlist/test_matcher.py tests/waitlist/test_eligibility_parity.py tests/waitlist/test_dispatch_queries.py \
	tests/waitlist/test_races.py tests/waitlist/test_delivery.py \
	tests/scheduling/test_api.py tests/waitlist/test_api.py
test-fastpaths-off: $(STAMP)
	FASTPATHS=off $(PY) -m pytest -n 2 --dist loadfile $(FASTPATHS_OFF_SMOKE) $(PYTEST_ARGS)

# ruff on everything; mypy (django-stubs, djangorestframework-stubs) on every app, config/ and devtools/, configured in
# pyproject.toml.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

# With `make run` up: sign and post a CRM assessment event for a Gangnam demo patient.
REVISION ?= $(shell date +%s)
demo-event: $(STAMP)
	set -a; . .data/run.env; set +a; $(PY) manage.py reevaluation_demo_event --clinic cl_demo_gangnam \
		--crm-patient-ref crm-cl_demo_gangnam-3 --revision $(REVISION) --url $$DEMO_BASE_URL

# Console screenshots at 1280 px and 390 px into docs/screenshots/ (Playwright on /usr/bin/chromium).
screenshots: $(STAMP)
	CONSOLE_SCREENSHOTS=1 $(PY) -m pytest -n 0 -q -m browser tests/operations/test_screenshots.py

# The suite under coverage (pytest-cov) over the product's packages: the lines no test executes, per file, in
# .data/coverage.txt (and .data/coverage.json); how dead code is found (docs/architecture.md, "Dead code").
COVERED := common scheduling waitlist reevaluation operations observability interop config devtools
coverage: $(STAMP)
	mkdir -p .data
	$(PY) -m pytest -n 2 --dist loadfile $(foreach p,$(COVERED),--cov=$(p)) --cov-report= $(PYTEST_ARGS)
	$(PY) -m coverage report --skip-covered --show-missing > .data/coverage.txt
	$(PY) -m coverage json -o .data/coverage.json
	tail -1 .data/coverage.txt

clean-data:
	rm -rf .data

# Benchmarks (not part of `make test`): BENCH_SCALE=quick (default, a few minutes) or full (the issue's
# sizes, under 30 minutes on 2 cores). Needs PostgreSQL and Redis up (BENCH_DATABASE_URL, REDIS_URL);
# installs the bench extras, and wrk and pgbench with apt when missing. See docs/benchmarks.md.
BENCH_SCALE ?= quick
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.bench-installed-$(PYPROJECT_SUM)

$(BENCH_STAMP): pyproject.toml
	$(call venv_install,test$(,)bench,bench-installed)

bench: $(BENCH_STAMP)
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	@command -v pgbench >/dev/null || (apt-get update -qq && apt-get install -y -qq postgresql-client)
	BENCH_SCALE=$(BENCH_SCALE) $(PY) -m bench.run $(BENCH_ARGS)

# Schemathesis against gunicorn on loopback (scratch database, private Redis): at least FUZZ_MIN_REQUESTS
# (10,000) requests with a STAFF and an ADMIN token; fails on any 5xx or schema violation. See docs/security.md.
fuzz: $(STAMP)
	$(PY) -m tests.support.fuzz

# Mixed load on loopback for SOAK_MINUTES (30) with the invariant checker every minute; fails on any
# violation or 5xx. CI runs SOAK_MINUTES=2 after `make test`. See docs/security.md.
SOAK_MINUTES ?= 30
soak: $(STAMP)
	SOAK_MINUTES=$(SOAK_MINUTES) $(PY) -m tests.support.soak
# Backfill simulation (not part of `make test`): SIM_SCALE=default (twelve clinic months: one practitioner, 28 days,
# 12 seeds; SIM_WORKERS processes, default 3, longest runs first) or full (three clinics of five practitioners,
# 5 seeds); SIM_SEED sets the first seed. Needs PostgreSQL (SIM_DATABASE_URL, default clinic_waitlist_sim: a
# template migrated when the migrations change, copied for each run); rewrites sim/results/*.json and
# docs/simulation.md. See docs/simulation.md.
SIM_SCALE ?= default
SIM_ARGS ?=
SIM_STAMP := $(VENV)/.sim-installed-$(PYPROJECT_SUM)

$(SIM_STAMP): pyproject.toml
	$(call venv_install,test$(,)sim,sim-installed)

simulate: $(SIM_STAMP)
	SIM_SCALE=$(SIM_SCALE) $(PY) -m sim.run $(SIM_ARGS)

# The highly available shape on this machine (docs/deployment.md "The cluster"): pg_auto_failover (monitor, primary,
# synchronous standby), a PgBouncer per node, Redis master + replica + three Sentinels, two web, two workers, beat.
# Separate processes on loopback ports 55430-58002; data in .data/cluster (CLUSTER_DIR). Run as root: installs its
# Debian packages with apt when missing and runs PostgreSQL and PgBouncer as the postgres user. `make cluster-down` stops it (CLUSTER_ARGS=--wipe also removes the data).
CLUSTER_ARGS ?=
cluster: $(STAMP)
	$(PY) deploy/cluster/cluster.py up

cluster-down:
	$(PY) deploy/cluster/cluster.py down $(CLUSTER_ARGS)

# The failover drill against `make cluster` (brought up if needed): a storm with the PostgreSQL primary's machine
# and then the Redis master killed mid-way; fails on commits not synchronous at the kill, a lost commit, an invariant
# violation, a vacancy not offered within 60 s or a first write later than 30 s after a kill. DRILL_ARGS=--short: one kill (CI). docs/benchmarks.md.
DRILL_ARGS ?=
failover: $(STAMP)
	deploy/cluster/drill.sh $(DRILL_ARGS)
