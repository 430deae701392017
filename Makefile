# The two commands a newcomer needs are `make demo` and `make test`; both set themselves up.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
EXAMPLE := examples/ds2-wordcount

.PHONY: setup demo test test-fast lint bench clean flink-install flink-up flink-up-adaptive flink-down flink-status flink-job

setup:
	@scripts/bootstrap.sh

## The main job at this stage: the offline DS2 policy (Spark) on the bundled wordcount example.
demo: setup
	bin/ds2-policy --topology $(EXAMPLE)/flink_wordcount_topology.csv --rates $(EXAMPLE)/flink_rates.log --table

## Everything CI runs: lint, unit tests, Spark tests.
test: setup
	$(VENV)/bin/ruff check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest

test-fast: setup
	$(VENV)/bin/pytest -m "not spark"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(PY) benchmarks/bench_policy.py

## Local Flink 2.3 (from the PyPI wheels, loopback only) and the scalable test job.
flink-install: setup
	scripts/flink.sh install
flink-up: setup
	scripts/flink.sh up
flink-up-adaptive: setup
	scripts/flink.sh up --adaptive
flink-down:
	scripts/flink.sh down
flink-status:
	scripts/flink.sh status
flink-job: setup
	scripts/flink.sh build-job

clean:
	-scripts/flink.sh down
	rm -rf data build .pytest_cache .ruff_cache
