# The two commands a newcomer needs are `make demo` and `make test`; both set themselves up.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
EXAMPLE := examples/ds2-wordcount

.PHONY: setup demo demo-ui offline test test-scheduler test-tuning test-faults test-kafka test-install test-py313 wheel test-lab test-fast lint bench bench-dag lab sim-sweep sim-frontier sim-fidelity clean up down flink-install flink-up flink-up-adaptive flink-down \
	flink-status flink-job airflow-up airflow-down airflow-status postgres-up postgres-down postgres-status \
	prometheus-up prometheus-down prometheus-status kafka-up kafka-down kafka-status s3proxy-up s3proxy-down s3proxy-status zookeeper-up zookeeper-down zookeeper-status cluster-up cluster-status cluster-down cluster-test cluster-test-s3 test-s3

setup:
	@scripts/bootstrap.sh

## The main job: the autoscaler in a closed loop (local Flink + Kafka + Airflow scheduler + Spark), ~12 min.
demo: setup
	$(PY) scripts/ds2_local.py demo
## The same, leaving Airflow (its admin password generated and printed) and Flink running afterwards; `make down` stops them.
demo-ui: setup
	$(PY) scripts/ds2_local.py demo --keep-ui

## The offline DS2 policy (Spark) on the bundled wordcount example.
offline: setup
	bin/ds2-policy --topology $(EXAMPLE)/flink_wordcount_topology.csv --rates $(EXAMPLE)/flink_rates.log --table

## Local Flink (8081, test job running) + Airflow (8080, user admin, password generated into data/local/airflow/admin-password) for the jobs in include/jobs.yaml.
up: setup
	$(PY) scripts/ds2_local.py up
down:
	$(PY) scripts/ds2_local.py down

## Everything CI runs: lint, unit tests, Spark tests.
test: setup
	$(VENV)/bin/ruff check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m "not faults and not cluster and not lab and not kafka_long and not install and not object_store_dag and not tuning_long and not scheduler_long"

## The approval gate (timeout, reject, approve) with a backfill, the fleet path and the flag-less SQL jobs, each
## under a real Airflow scheduler (~10 min). make test keeps an assigned approver's answer under the scheduler
## (test_auth), backfills under a busy scheduler (test_postgres), test_sql_job and the fleet policy's own tests.
test-scheduler: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m scheduler_long

## Multi-configuration tuning on real Flink: two profiling copies beside a running job, a configuration applied, the DAG (~4 min).
test-tuning: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m tuning_long

## Fault drills on real Flink and Airflow (injected failures at every rescale step, processes killed mid-rescale, a run two intervals late, restart loop, full disk, HA, PostgreSQL restarted, two
## autoscalers, the restricted viewer; ~22 min).
test-faults: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m faults

## The longer Kafka suite: the broker killed and restarted, a source with fewer partitions than readers, Nexmark.
test-kafka: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m kafka_long

## The provider as a user installs it: the wheel into a fresh venv with stock Airflow, its plugins on a real
## api-server, a five-line DAG file rescaling a real Flink job (~4 min).
test-install: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m install

## The unit suite on Python 3.13 (scripts/test-python.sh; its own .venv-3.13), beside make test's 3.11.
test-py313: setup
	scripts/test-python.sh 3.13

## The provider's wheel into dist/ (scripts/build-wheel.sh).
wheel: setup
	scripts/build-wheel.sh

test-lab: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m lab

test-fast: setup
	$(VENV)/bin/pytest -m "not spark"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(PY) benchmarks/bench_policy.py
bench-dag: setup
	$(PY) benchmarks/bench_dag.py

## The simulated lab (scripts/ds2_sim.py, docs/policy-lab.md): the production policy and decide code in a
## closed loop against a model of the job. sim-sweep is the benchmark: 22 scenarios of 2-24 h x every kind
## x 10 seeds (7 min on 2 cores of the 2026-12-04 host, 20 on the slower EPYC of 2026-12-03; benchmarks/sim/sweep.md); sim-frontier sweeps each kind's headroom knob
## (benchmarks/sim/frontier.md, PNGs; 44 min on the 2026-12-04 host, 78 on the EPYC); sim-fidelity replays every stored real run (benchmarks/sim/fidelity.md).
sim-sweep: setup
	$(PY) scripts/ds2_sim.py sweep
sim-frontier: setup
	$(PY) scripts/ds2_sim.py sweep --frontier
sim-fidelity: setup
	$(PY) scripts/ds2_sim.py fidelity

## The policy lab's full sweep: every scenario under ds2, utilization and rules against measured ground
## truth (hours on 2 cores; resumable: finished results are kept). Results: benchmarks/lab/runs/, attempt sweep-<commit> (indexed in
## benchmarks/lab/README.md), docs/policy-lab.md.
lab: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/ds2_lab.py sweep

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

## Local Airflow alone (scripts/airflow.sh: loopback, user admin with a generated password; its metadata DB on the project's
## own PostgreSQL, scripts/postgres.sh, started with it and stopped by airflow-down).
airflow-up: setup
	scripts/airflow.sh up
airflow-down:
	scripts/airflow.sh down
	scripts/postgres.sh down
airflow-status:
	scripts/airflow.sh status
	scripts/postgres.sh status

## The project's PostgreSQL alone (data/postgres, 127.0.0.1, first free port from 25432).
postgres-up: setup
	scripts/postgres.sh up
postgres-down:
	scripts/postgres.sh down
postgres-status:
	scripts/postgres.sh status

clean:
	-$(PY) scripts/ds2_local.py down
	-$(PY) scripts/ds2_cluster.py down
	-scripts/airflow.sh down
	-scripts/postgres.sh down
	-scripts/flink.sh down
	rm -rf data build .pytest_cache .ruff_cache

## Prometheus and the StatsD receiver for the autoscaler's metrics (loopback, password generated; docs/metrics.md).
prometheus-up: setup
	scripts/prometheus.sh up
prometheus-down:
	scripts/prometheus.sh down
prometheus-status:
	scripts/prometheus.sh status

## A local S3-compatible object store (S3Proxy 4.1.0 over a folder, loopback, SigV4; jar from Maven Central):
## scripts/s3proxy.sh. DS2_STORE=s3://ds2/store with its client env puts the store there (docs/object-store.md).
s3proxy-up:
	scripts/s3proxy.sh up
s3proxy-down:
	scripts/s3proxy.sh down
s3proxy-status:
	scripts/s3proxy.sh status

## ZooKeeper for Flink's high availability (scripts/zookeeper.sh; then FLINK_ZOOKEEPER_QUORUM=$$(scripts/zookeeper.sh quorum) scripts/flink.sh up --ha).
zookeeper-up:
	scripts/zookeeper.sh up
zookeeper-down:
	scripts/zookeeper.sh down
zookeeper-status:
	scripts/zookeeper.sh status

## A local Kafka 4.4 broker (KRaft, loopback, SASL/SCRAM; jars from Maven Central): scripts/kafka.sh.
kafka-up: setup
	scripts/kafka.sh up
kafka-down:
	scripts/kafka.sh down
kafka-status:
	scripts/kafka.sh status

## The cluster mode (docs/deploy.md): Airflow with the CeleryExecutor (2 workers, Redis broker), a Spark standalone
## master with 2 workers, Flink with 2 TaskManagers, PostgreSQL; loopback only, secrets generated per install, data/cluster.
cluster-up: setup
	@scripts/flink.sh build-job
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) scripts/ds2_cluster.py up
cluster-status: setup
	@$(PY) scripts/ds2_cluster.py status
cluster-down: setup
	$(PY) scripts/ds2_cluster.py down
## The cluster mode end to end, with faults injected while work is in flight (~15 min; its own cluster in a temp folder).
cluster-test: setup
	@scripts/flink.sh build-job
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -rP -m cluster tests/cluster/test_cluster.py
## The scaling DAG with its store on an object store (S3Proxy), credentials from a connection (~2.5 min; docs/object-store.md).
test-s3: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -m object_store_dag
## The cluster mode with its store on an object store (S3Proxy) and a data folder per Celery worker, with the
## Celery-worker-killed drill (~8 min; docs/object-store.md).
cluster-test-s3: setup
	@scripts/flink.sh build-job
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/pytest -rP -m cluster tests/cluster/test_cluster_object_store.py
