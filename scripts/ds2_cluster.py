"""The cluster mode on this machine: the compose deployment's topology as separate local processes.

    .venv/bin/python scripts/ds2_cluster.py up       (make cluster-up)
    .venv/bin/python scripts/ds2_cluster.py status   (make cluster-status)
    .venv/bin/python scripts/ds2_cluster.py down     (make cluster-down)

``up`` starts, on loopback, each from the project's own script and each idempotent (what already runs
is reported, what died is started again):

- PostgreSQL (``scripts/postgres.sh``), Airflow's metadata DB and the Celery result backend;
- Redis (``scripts/redis.sh``), the Celery broker, with a password generated per install;
- Airflow with the CeleryExecutor (``scripts/airflow.sh``, ``conf/airflow/celery.env``): api-server,
  scheduler, dag-processor, triggerer and two Celery workers;
- Spark: a standalone master, two workers and the Connect server on that master (``scripts/spark.sh
  up --cluster``); the jobs' ``spark_ds2`` connection points at it, so policies and backfills run on
  the workers;
- Flink: a JobManager and two TaskManagers (``scripts/flink.sh``), savepoints and checkpoints in a
  folder every process reaches, as a shared volume would be;
- Kafka (``scripts/kafka.sh``): one broker with a SCRAM user of its own, as the compose file's kafka
  service. One, not three: on the 2 cores of these machines the rest of the cluster already takes them,
  and one broker's internal topics have one replica (conf/kafka/server.properties). A Kafka-fed job
  names its client config, ``data/cluster/kafka/client.properties``, as ``kafka_client_config``.
- With ``DS2_CLUSTER_STORE=s3``: an object store (``scripts/s3proxy.sh``) holding the store, reached
  through the ``ds2_store`` connection, and each Celery worker with a data folder of its own
  (``AIRFLOW_WORKER_DATA_DIRS``), as workers on separate hosts have (docs/object-store.md).

Everything lives under ``DS2_CLUSTER_DIR`` (data/cluster): each service's data, logs and pid files,
the ports chosen at the first ``up`` (cluster.json), and the store. The jobs are those of
``DS2_JOBS_CONFIG`` (include/jobs.yaml); when it registers ``testjob`` and no such Flink job runs,
the test job is submitted, as ``make up`` does. ``down`` stops every process by its pid file and
checks that none is left.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ds2_local import AIRFLOW_SH, FLINK_SH, KAFKA_SH, POSTGRES_SH, ROOT, SPARK_SH, Stack, free_port, log

REDIS_SH = ROOT / "scripts" / "redis.sh"
S3PROXY_SH = ROOT / "scripts" / "s3proxy.sh"
# The topology, as the compose file describes it (tests/unit/test_compose.py ties the two).
TOPOLOGY = {
    "AIRFLOW_EXECUTOR": "CeleryExecutor",
    "AIRFLOW_CELERY_WORKERS": "2",
    "AIRFLOW_PARALLELISM": "16",
    "SPARK_WORKERS": "2",
    "SPARK_WORKER_CORES": "1",
    "FLINK_TASKMANAGERS": "2",
    "FLINK_SLOTS": "4",
}
# Away from make up's 8080/8081, so both can run; the first free port from these when taken.
DEFAULT_PORTS = {"airflow": 8180, "flink": 8181, "flink_rpc": 6223, "kafka": 29192, "s3proxy": 29200}


def cluster_dir() -> Path:
    return Path(os.environ.get("DS2_CLUSTER_DIR", ROOT / "data" / "cluster")).resolve()


def ports(folder: Path) -> dict[str, int]:
    """The ports of this cluster: chosen at the first ``up`` and kept, so a second ``up`` finds the same."""
    state = folder / "cluster.json"
    kept = json.loads(state.read_text()) if state.is_file() else {}
    # A service that joined since the first up (the broker) gets its port now, kept from then on.
    chosen = {name: kept.get(name) or free_port(port) for name, port in DEFAULT_PORTS.items()}
    if chosen != kept:
        folder.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(chosen) + "\n")
    return chosen


def stack() -> Stack:
    folder = cluster_dir()
    chosen = ports(folder)
    env = {
        **TOPOLOGY,
        "REDIS_DATA_DIR": str(folder / "redis"),
        "DS2_DATA_DIR": os.environ.get("DS2_DATA_DIR", str(folder)),
    }
    if object_store():
        env |= {"S3PROXY_DATA_DIR": str(folder / "s3proxy"), "S3PROXY_PORT": str(chosen["s3proxy"]),
                "AIRFLOW_WORKER_DATA_DIRS": "1"} | store_env(folder)  # fmt: skip
    s = Stack(folder, chosen["flink"], chosen["airflow"], env)
    s.env["FLINK_RPC_PORT"] = str(chosen["flink_rpc"])
    s.env["KAFKA_PORT"] = str(chosen["kafka"])
    return s


def object_store() -> bool:
    """Whether this cluster keeps its store on an object store (DS2_CLUSTER_STORE=s3; default: a folder)."""
    value = os.environ.get("DS2_CLUSTER_STORE", "folder")
    if value not in ("folder", "s3"):
        raise SystemExit(f"ds2_cluster: DS2_CLUSTER_STORE must be 'folder' or 's3', got {value!r}")
    return value == "s3"


def store_env(folder: Path) -> dict[str, str]:
    """The store's URL and its connection (the object store's login, from its owner-only client env) once it
    has been started; the Airflow processes read the connection from AIRFLOW_CONN_DS2_STORE."""
    client = folder / "s3proxy" / "client.env"
    if not client.is_file():
        return {}
    values = dict(line.split("=", 1) for line in client.read_text().splitlines() if "=" in line)
    connection = {"conn_type": "aws", "login": values["AWS_ACCESS_KEY_ID"], "password": values["AWS_SECRET_ACCESS_KEY"],
                  "extra": {"endpoint_url": values["AWS_ENDPOINT_URL"], "region_name": values["AWS_REGION"]}}  # fmt: skip
    env = {"DS2_STORE": values["DS2_STORE"], "DS2_STORE_CONN_ID": "ds2_store", "AIRFLOW_CONN_DS2_STORE": json.dumps(connection)}
    lease = folder / "s3proxy" / "lease-url"  # the journals' lease: a role and database of the cluster's PostgreSQL
    if lease.is_file():
        from sqlalchemy.engine import make_url

        url = make_url(lease.read_text().strip())
        env["AIRFLOW_CONN_DS2_LEASE"] = json.dumps({"conn_type": "postgres", "login": url.username, "password": url.password,
                                                    "host": url.host, "port": url.port, "schema": url.database})  # fmt: skip
        env["DS2_LEASE_CONN_ID"] = "ds2_lease"
    return env


def script(path: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(path), *args], cwd=ROOT, env=env, text=True, capture_output=True)


def up(_: argparse.Namespace) -> int:
    t0 = time.monotonic()
    s = stack()
    # PostgreSQL has its own folder here; as root its server runs as 'postgres', which must reach it.
    s.folder.mkdir(parents=True, exist_ok=True)
    s.folder.chmod(0o755)
    log(f"starting the cluster in {s.folder}")
    if object_store():
        subprocess.run([str(S3PROXY_SH), "up"], cwd=ROOT, env=s.env, check=True, text=True)
        subprocess.run([str(POSTGRES_SH), "up"], cwd=ROOT, env=s.env, check=True, text=True)
        url = subprocess.run([str(POSTGRES_SH), "url", "ds2lease"], cwd=ROOT, env=s.env, check=True, text=True,
                             capture_output=True).stdout.strip().splitlines()[-1]  # fmt: skip
        lease = s.folder / "s3proxy" / "lease-url"
        lease.touch(mode=0o600)
        lease.write_text(url + "\n")  # owner-only: it holds the role's password
        s = stack()  # now with the store's URL and connection, and the lease's
    s.flink_up()
    subprocess.run([str(FLINK_SH), "start-missing"], cwd=ROOT, env=s.env, check=True, text=True)
    submit_testjob(s)
    client_config = s.kafka_up()
    s.spark_up(cluster=True)
    s.airflow_up()  # PostgreSQL and Redis first, by scripts/airflow.sh
    log(
        f"cluster up in {time.monotonic() - t0:.1f} s: Airflow {s.airflow_url} (CeleryExecutor, 2 workers; user admin, "
        f"password in {s.folder / 'airflow' / 'admin-password'}), Flink {s.flink_url} (2 TaskManagers), "
        f"Spark {s.env['AIRFLOW_CONN_SPARK_DS2']} (2 workers), Kafka on 127.0.0.1:{s.env['KAFKA_PORT']} (client config "
        f"{client_config}); make cluster-status, make cluster-down"
    )
    return 0


def submit_testjob(s: Stack) -> None:
    """The test job, when the jobs config registers it and Flink does not run it (as make up does)."""
    from autoscaler.config.jobs import load_jobs

    jobs = {job.name: job for job in load_jobs()}
    job = jobs.get("testjob")
    if job is None or s.client().find_job(job.flink_job_name) is not None:
        return
    s.submit([*job.deployment.base_args, "--count-parallelism", "1"])
    log("submitted the test job (ds2-testjob, Count at 1: DS2 will ask for 4)")


# Each service's script, in the order status reports them and the reverse of the order down stops them.
SERVICES = {"postgres": POSTGRES_SH, "redis": REDIS_SH, "airflow": AIRFLOW_SH, "spark": SPARK_SH, "flink": FLINK_SH,
            "kafka": KAFKA_SH, "s3proxy": S3PROXY_SH}  # fmt: skip


def services() -> dict[str, Path]:
    """The services of this cluster: the object store only when it keeps its store there."""
    return {name: path for name, path in SERVICES.items() if name != "s3proxy" or object_store()}


def status(_: argparse.Namespace) -> int:
    """Each service's status; exit 0 when all run and answer, 3 when all are stopped, 1 otherwise."""
    s = stack()
    codes = []
    for name, path in services().items():
        res = script(path, ["status"], s.env)
        print((res.stdout + res.stderr).strip() or f"{name}: exit {res.returncode}", flush=True)
        codes.append(res.returncode)
    if all(c == 0 for c in codes):
        return 0
    return 3 if all(c == 3 for c in codes) else 1


def leftovers(folder: Path) -> list[str]:
    """Processes still running whose command line names the cluster's folder (none after ``down``)."""
    mine = str(folder)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mine in cmdline and state != "Z":
            found.append(f"{entry.name} {cmdline[:120]}")
    return found


def down(_: argparse.Namespace) -> int:
    s = stack()
    for path in reversed(list(services().values())):
        res = script(path, ["down"], s.env)
        print((res.stdout + res.stderr).strip(), flush=True)
    left = leftovers(s.folder)
    if left:
        log("still running after down:\n  " + "\n  ".join(left))
        return 1
    log(f"cluster down: no process of {s.folder} left")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (("up", up), ("status", status), ("down", down)):
        sub.add_parser(name).set_defaults(func=func)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
