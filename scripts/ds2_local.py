"""The autoscaler on this machine: the closed-loop demo, and a local stack to operate in the UI.

    .venv/bin/python scripts/ds2_local.py demo [--keep-ui]   (make demo)
    .venv/bin/python scripts/ds2_local.py up                 (make up)
    .venv/bin/python scripts/ds2_local.py down               (make down)

``demo`` starts Flink (its own instance under data/demo/flink), submits the test job
under-provisioned with a stepped rate schedule, starts Airflow (api-server, scheduler,
dag-processor, triggerer; its metadata DB on the project's own PostgreSQL) with the demo job's
DAG unpaused, and lets the scheduler run the scaling DAG every interval while the load steps up
and down. It prints one line per epoch, then the report (rescales and the reversals among them, time
to the sustained rate, over-provisioning, downtime) and writes data/demo/report.md and data/demo/demo.png. Everything it
started is stopped at the end (``--keep-ui`` leaves Airflow and Flink up); the data stays.

``up`` starts the development stack for the jobs in include/jobs.yaml (Flink on 8081 with the
test job running, Airflow on 8080, user admin with a generated password); ``down`` stops what ``up`` started.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"
FLINK_SH = ROOT / "scripts" / "flink.sh"
AIRFLOW_SH = ROOT / "scripts" / "airflow.sh"
POSTGRES_SH = ROOT / "scripts" / "postgres.sh"
SPARK_SH = ROOT / "scripts" / "spark.sh"
PROMETHEUS_SH = ROOT / "scripts" / "prometheus.sh"
OPERATORS = ["Source: Source", "Parse", "Count", "Sink: Writer"]
# Count costs 175 us per record (~5,660 rec/s per instance): 20k needs 4, 30k needs 6, 10k needs 2.
COST_ARGS = ["--count-wait-us", "175"]
KAFKA_SH = ROOT / "scripts" / "kafka.sh"
# The demo's job reads a Kafka topic of 8 partitions that the load generator fills at the demo's schedule:
# the policy sees the Kafka source's records out plus the growth of its FLIP-33 pendingRecords (honest
# inputs), never a rate the job was told. A fetch holds at most 16 KiB a partition, under a second of a
# partition's input at 30,000 rec/s (docs/kafka.md: with Kafka's default 1 MiB the lag reads stale).
TOPIC, PARTITIONS = "demo-lines", 8
SOURCE_ARGS = ["--kafka-topic", TOPIC, "--kafka-group", "ds2-demo", "--kafka-partition-fetch-bytes", "16384"]

sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins")]

from autoscaler import testjob  # noqa: E402
from autoscaler.config.options import MAX_LATE_EPOCHS  # noqa: E402

JAR = testjob.JAR
PARALLELISM_ARGS = testjob.PARALLELISM_ARGS


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def free_port(preferred: int) -> int:
    if port_free(preferred):
        return preferred
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, check=check, text=True)


class Stack:
    """Flink, Spark (a warm Connect server), PostgreSQL and Airflow under one folder, stopped by their pid files."""

    def __init__(self, folder: Path, flink_port: int, airflow_port: int, extra_env: dict[str, str]) -> None:
        self.folder = folder
        self.env = {
            **os.environ,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "FLINK_DATA_DIR": str(folder / "flink"),
            "FLINK_REST_PORT": str(flink_port),
            "FLINK_RPC_PORT": str(free_port(6123)),
            "AIRFLOW_HOME": str(folder / "airflow"),
            "PG_DATA_DIR": str(folder / "postgres"),
            "SPARK_DATA_DIR": str(folder / "spark"),
            "PROM_DATA_DIR": str(folder / "prometheus"),
            "KAFKA_DATA_DIR": str(folder / "kafka"),
            "AIRFLOW_PORT": str(airflow_port),
            "SPARK_LOCAL_IP": "127.0.0.1",
            **extra_env,
        }
        self.flink_url = f"http://127.0.0.1:{flink_port}"
        self.airflow_url = f"http://127.0.0.1:{airflow_port}"

    def flink_up(self) -> None:
        run([str(FLINK_SH), "build-job"], self.env)
        run([str(FLINK_SH), "up"], self.env)

    def kafka_up(self) -> Path:
        """The Kafka broker; the path of its client config (the login, owner-only)."""
        self.env.setdefault("KAFKA_PORT", str(free_port(29092)))
        run([str(KAFKA_SH), "up"], self.env)
        return self.folder / "kafka" / "client.properties"

    def spark_up(self, cluster: bool = False) -> None:
        """The warm policy engine (on a standalone master and workers with ``cluster``); the jobs' Spark
        connection (spark_ds2) points at it."""
        run([str(SPARK_SH), "up", *(["--cluster"] if cluster else [])], self.env)
        url = subprocess.run([str(SPARK_SH), "url"], cwd=ROOT, env=self.env, check=True, text=True, capture_output=True).stdout
        host, port = url.strip().removeprefix("sc://").rsplit(":", 1)
        token_file = subprocess.run([str(SPARK_SH), "token-file"], cwd=ROOT, env=self.env, check=True, text=True,
                                    capture_output=True).stdout.strip()  # fmt: skip
        # The server's token is the connection's password (the hook sends it as the bearer token).
        conn = {"conn_type": "spark_connect", "host": f"sc://{host}", "port": int(port),
                "password": Path(token_file).read_text().strip()}  # fmt: skip
        self.env["AIRFLOW_CONN_SPARK_DS2"] = json.dumps(conn)

    def metrics_up(self) -> dict[str, str]:
        """Prometheus and its StatsD receiver; Airflow started after this sends its metrics and ours there."""
        run([str(PROMETHEUS_SH), "up"], self.env)
        out = subprocess.run([str(PROMETHEUS_SH), "env"], cwd=ROOT, env=self.env, check=True, text=True, capture_output=True)
        settings = dict(line.split("=", 1) for line in out.stdout.split())
        self.env.update({k: v for k, v in settings.items() if k.startswith("AIRFLOW__METRICS__")})
        return settings

    def airflow_up(self) -> None:
        run([str(AIRFLOW_SH), "up"], self.env)

    def down(self) -> None:
        run([str(AIRFLOW_SH), "down"], self.env, check=False)
        run([str(POSTGRES_SH), "down"], self.env, check=False)
        run([str(SPARK_SH), "down"], self.env, check=False)
        run([str(FLINK_SH), "down"], self.env, check=False)
        run([str(KAFKA_SH), "down"], self.env, check=False)
        run([str(PROMETHEUS_SH), "down"], self.env, check=False)

    def client(self):  # noqa: ANN201 - the core client type
        from autoscaler.flink.client import FlinkConnection, FlinkRestClient

        return FlinkRestClient(FlinkConnection(base_url=self.flink_url))

    def submit(self, args: list[str]) -> str:
        from autoscaler.flink.deployment import JobDeployment, resolve_jar

        client = self.client()
        jar_id = resolve_jar(client, JobDeployment("ds2-testjob", "/tmp", PARALLELISM_ARGS, jar_path=JAR))
        job_id = client.run_jar(jar_id, None, args)
        client.wait_all_running(job_id, timeout_s=60)
        return job_id


def demo(args: argparse.Namespace) -> int:
    from autoscaler.record import loop_report

    out = (ROOT / "data" / "demo").resolve()
    if out.exists():
        Stack(out, 0, 0, {}).down()  # a previous demo left running with --keep-ui
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rates = [int(r) for r in args.rates.split(",")]
    steps = [(i * args.phase, rate) for i, rate in enumerate(rates)]
    # A password generated per demo folder, as 'up' does (make demo-ui leaves this instance up: no admin/admin).
    demo_env = {"DS2_DATA_DIR": str(out), "DS2_JOBS_CONFIG": str(out / "jobs.yaml")}
    stack = Stack(out, free_port(8081), free_port(8080), demo_env)
    t_start = time.monotonic()
    generator: subprocess.Popen | None = None
    try:
        log(f"starting Flink (REST {stack.flink_url}) and building the test job")
        stack.flink_up()
        log("starting Kafka (one KRaft broker on loopback, SASL/SCRAM)")
        client_config = stack.kafka_up()
        # The DAG's first epoch starts at the first boundary after Spark and Airflow are up (about
        # 50 s; margin for a loaded machine), so that the triggerer takes its start boundary on time;
        # the load schedule counts from it too.
        first_start = math.ceil((time.time() + args.startup) / args.interval) * args.interval
        schedule_start = datetime.fromtimestamp(first_start, tz=UTC)
        rate_schedule = ",".join(f"{s}s:{r}" for s, r in steps)
        generator = start_generator(stack, client_config, rate_schedule, int(schedule_start.timestamp() * 1000), out)
        base = ["--job-name", "ds2-testjob", *COST_ARGS, *SOURCE_ARGS, "--kafka-client-config", str(client_config)]
        job_id = stack.submit([*base, "--count-parallelism", "1"])
        log(
            f"test job {job_id} reads topic {TOPIC} under-provisioned: Count at 1; the generator writes from "
            f"{schedule_start:%H:%M:%S} (the first epoch's start) {', '.join(f'{s}s: {r:,} rec/s' for s, r in steps)}"
        )
        entry = {
            "name": "demo",
            "flink_job_name": "ds2-testjob",
            "jar": str(JAR),
            "base_args": base,
            "parallelism_args": PARALLELISM_ARGS,
            "savepoint_dir": f"file://{out / 'flink' / 'savepoints'}",
            "policy_interval": f"{args.interval}s",
            "collect": {"short_window": "10s"},
            # The demo compresses time: a 3-min phase cannot hold the default 5-min wait before a scale-down of a
            # load that fell, so this job waits half a phase (an option of the job, not of the policy's defaults).
            "policy": {
                "max_parallelism": {"Parse": 8, "Count": 8, "Sink: Writer": 8},
                "scale_down_interval": f"{args.phase // 2}s",
            },
            "tags": ["demo"],
            "start_date": schedule_start.isoformat(),
        }
        (out / "jobs.yaml").write_text(yaml.safe_dump({"version": 1, "jobs": [entry]}, sort_keys=False))
        log("starting the warm Spark engine (a Spark Connect server) for the policy")
        stack.spark_up()
        log(
            f"starting Airflow ({stack.airflow_url}, user admin, password in {stack.folder / 'airflow' / 'admin-password'}); "
            f"DAG ds2_demo runs every {args.interval} s"
        )
        stack.airflow_up()
        end = schedule_start.timestamp() + len(steps) * args.phase
        store = out / "store"
        # Every epoch from the first the scheduler ran to the last that ends with the load schedule:
        # one that left no trace is listed as lost, never dropped from the report.
        last = int(end // args.interval) - 1
        first: int | None = None
        seen: set[int] = set()
        print(loop_report.table([], OPERATORS).splitlines()[0], flush=True)
        # The last epoch's run gets time to finish, also when it runs late (up to max_late_epochs intervals).
        settle = end + (3 + MAX_LATE_EPOCHS.default) * args.interval
        while time.time() < settle:
            time.sleep(2)
            rows = loop_report.epoch_rows(store, "demo", interval_s=args.interval)
            first = rows[0].epoch if rows and first is None else first
            for row in rows:
                if row.epoch not in seen and (row.outcome or row.verdict == "quarantined") and row.epoch <= last:
                    seen.add(row.epoch)
                    print(loop_report.table([row], OPERATORS).splitlines()[-1], flush=True)
            if time.time() >= end and first is not None and all(e in seen for e in range(first, last + 1)):
                break
        rows = loop_report.epoch_rows(store, "demo", range(first if first is not None else last, last + 1), args.interval)
        for row in rows:
            if row.epoch not in seen:
                print(loop_report.table([row], OPERATORS).splitlines()[-1], flush=True)
        schedule = loop_report.schedule_times(schedule_start, steps)
        ps = loop_report.phases(rows, loop_report.capacities(store, "demo"), schedule)
        report = "\n\n".join(
            [
                "# Closed-loop demo",
                f"Load {', '.join(f'{r:,}' for r in rates)} rec/s for {args.phase} s each; policy interval {args.interval} s; "
                f"Count costs 175 us per record. Run {schedule_start:%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores.",
                "```\n" + loop_report.table(rows, OPERATORS) + "\n```",
                loop_report.summary(ps, rows),
                f"Wall time: {time.monotonic() - t_start:.0f} s. Data: {out} (store/, validation-docs/, airflow/).",
            ]
        )
        (out / "report.md").write_text(report + "\n")
        png = loop_report.chart(rows, schedule, OPERATORS, out / "demo.png")
        print("\n" + loop_report.summary(ps, rows), flush=True)
        log(f"report: {out / 'report.md'}; chart: {png}")
        if args.keep_ui:
            password = stack.folder / "airflow" / "admin-password"
            log(
                f"kept running: Airflow {stack.airflow_url} (user admin, password in {password}), Flink {stack.flink_url}; "
                "stop with: make down"
            )
        return 0
    finally:
        if generator is not None and generator.poll() is None:
            generator.terminate()
            generator.wait(60)
        if not args.keep_ui:
            log("stopping Airflow, Spark, PostgreSQL, Flink and Kafka (the data stays in data/demo)")
            stack.down()


def start_generator(stack: Stack, client_config: Path, schedule: str, start_ms: int, out: Path) -> subprocess.Popen:
    """The topic, and the load generator writing the test job's lines into it at the schedule (until stopped)."""
    python = str(VENV_BIN / "python")
    common = ["--client-config", str(client_config), "--topic", TOPIC]
    run([python, "-m", "autoscaler.kafka", "create-topic", *common, "--partitions", str(PARTITIONS)], stack.env)
    log_file = (out / "generator.log").open("w")
    return subprocess.Popen(
        [python, "-m", "autoscaler.kafka", "produce", *common, "--rate-schedule", schedule, "--start-ms", str(start_ms),
         "--keys", "10000", "--progress", str(out / "generator.jsonl")],
        cwd=ROOT, env=stack.env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def local_stack() -> Stack:
    return Stack(ROOT / "data" / "local", 8081, 8080, {})


def up(_: argparse.Namespace) -> int:
    stack = local_stack()
    if not port_free(8081) and not (stack.folder / "flink" / "pids").exists():
        raise SystemExit("port 8081 is taken by something this project did not start: stop it first")
    stack.flink_up()
    client = stack.client()
    if client.find_job("ds2-testjob") is None:
        from autoscaler.config.jobs import find_job

        job = find_job("testjob")
        stack.submit([*job.deployment.base_args, "--count-parallelism", "1"])
        log("submitted the test job (ds2-testjob, Count at 1: DS2 will ask for 4)")
    stack.spark_up()
    prometheus = stack.metrics_up()
    stack.airflow_up()
    log(
        f"Airflow {stack.airflow_url} (user admin, password in {stack.folder / 'airflow' / 'admin-password'}), "
        f"Flink {stack.flink_url}, Prometheus {prometheus['PROM_URL']} (user {prometheus['PROM_USER']}, password in "
        f"{prometheus['PROM_PASSWORD_FILE']}; docs/metrics.md); stop with: make down"
    )
    return 0


def down(_: argparse.Namespace) -> int:
    local_stack().down()
    demo_dir = ROOT / "data" / "demo"
    if demo_dir.exists():
        Stack(demo_dir, 0, 0, {}).down()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="closed loop against the local Flink test job")
    d.add_argument("--keep-ui", action="store_true", help="leave Airflow and Flink running afterwards")
    d.add_argument("--interval", type=int, default=30, help="policy interval, seconds (default 30)")
    d.add_argument("--phase", type=int, default=180, help="seconds per load level (default 180)")
    d.add_argument("--rates", default="20000,30000,10000", help="source rate per phase, rec/s")
    d.add_argument("--startup", type=int, default=75, help="seconds allowed for Spark and Airflow to start (default 75)")
    d.set_defaults(func=demo)
    sub.add_parser("up", help="Flink (8081) with the test job + Airflow (8080)").set_defaults(func=up)
    sub.add_parser("down", help="stop what up/demo --keep-ui started").set_defaults(func=down)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
