"""The cluster mode for ``make cluster-test``: ``scripts/ds2_cluster.py`` on a folder of the test's own.

The cluster is what ``make cluster-up`` starts (Airflow with the CeleryExecutor and two workers on a
Redis broker, a Spark master with two workers and the Connect server, Flink with two TaskManagers,
PostgreSQL), with a jobs config of the test's: its jobs run the test job under the names the config
gives them. Processes are killed the way a lost host loses them: the process and everything it forked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autoscaler import testjob
from autoscaler.flink.client import FlinkConnection, FlinkRestClient
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.airflow_fixtures import AirflowServer

CLUSTER_PY = ROOT / "scripts" / "ds2_cluster.py"
PYTHON = ROOT / ".venv" / "bin" / "python"
# 175 us per record: one Count instance takes ~5,660 records/s. The source owes what it could not emit
# (8 partitions, FLIP-33 pendingRecords), so the policy reads honest inputs, as in production.
COST_ARGS = ["--count-wait-us", "175", "--partitions", "8", "--backlog", "true"]
# What the source owes counts from this instant, in every run of the job: without it each restart would
# count from its own submission, and a restored source would owe nothing until the new count caught up
# with what the old run had emitted (seen: no record for a minute after a rescale).
SCHEDULE_START_MS = str(int(time.time() * 1000))


def job_args(name: str, rate: int) -> list[str]:
    """The test job's arguments for every run of the job called ``ds2-<name>`` (parallelism aside)."""
    return ["--job-name", f"ds2-{name}", "--rate", str(rate), *COST_ARGS, "--schedule-start-ms", SCHEDULE_START_MS]


def job_entry(name: str, rate: int, interval_s: int, folder: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "flink_job_name": f"ds2-{name}",
        "jar": str(testjob.JAR),
        "base_args": job_args(name, rate),
        "parallelism_args": testjob.PARALLELISM_ARGS,
        "savepoint_dir": f"file://{folder / 'flink' / 'savepoints'}",
        "policy_interval": f"{interval_s}s",
        "collect": {"short_window": "5s"},
        "policy": {"kind": "ds2", "max_parallelism": {"Count": 8, "Parse": 8, "Sink: Writer": 8}},  # DS2's exact sizes
        "validation": {"lateness_s": 90},
        **extra,
    }


@dataclass
class Cluster:
    folder: Path
    env: dict[str, str]
    up_seconds: float
    up_log: str

    def run(self, command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(PYTHON), str(CLUSTER_PY), command], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    @property
    def ports(self) -> dict[str, int]:
        return json.loads((self.folder / "cluster.json").read_text())

    @property
    def flink(self) -> FlinkRestClient:
        return FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{self.ports['flink']}"))

    def airflow(self) -> AirflowServer:
        home = self.folder / "airflow"
        env = dict(self.env)
        return AirflowServer(f"http://127.0.0.1:{self.ports['airflow']}", home, ROOT / "dags", env)

    def pid(self, pid_file: Path) -> int:
        pid, _ = pid_file.read_text().split()
        return int(pid)

    def celery_worker_pid(self, n: int) -> int:
        return self.pid(self.folder / "airflow" / "pids" / f"celery-worker-{n}.pid")

    def spark_worker_pid(self, n: int) -> int:
        return self.pid(self.folder / "spark" / "pids" / f"worker-{n}.pid")

    def taskmanager_pids(self) -> list[int]:
        pids = []
        for f in (self.folder / "flink" / "pids").glob("*taskexecutor*.pid"):
            for line in f.read_text().split():
                if line.isdigit() and alive(int(line)):
                    pids.append(int(line))
        return pids

    def recorded_pids(self) -> list[int]:
        """Every pid a service script recorded for this cluster (Flink's files list one pid a line; the
        others hold "<pid> <start ticks>")."""
        out = []
        for f in self.folder.rglob("*.pid"):
            words = f.read_text().split()
            flink = f.relative_to(self.folder).parts[0] == "flink"
            out += [int(w) for w in (words if flink else words[:1]) if w.isdigit()]
        return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def descendants(pid: int) -> list[int]:
    """``pid`` and every process it forked, directly or not (whatever their process group)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def kill_host(pid: int, what: str) -> list[int]:
    """SIGKILL ``pid`` and all it forked, as when its host dies; waits until they are gone."""
    victims = descendants(pid)
    for p in victims:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    poll(f"{what} (pids {victims}) to die", lambda: not any(alive(p) for p in victims), 30, 0.1)
    return victims


def write_jobs(folder: Path, entries: list[dict[str, Any]]) -> Path:
    path = folder / "jobs.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "jobs": entries}, sort_keys=False))
    return path


def start_cluster(entries_for: Any) -> Iterator[Cluster]:
    """Bring a cluster up in a new folder (``entries_for(folder)`` gives the jobs); down at the end."""
    # In /tmp, readable by all: as root, PostgreSQL runs as 'postgres', which must reach its folder.
    folder = Path(tempfile.mkdtemp(prefix="ds2-cluster-"))
    folder.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "DS2_CLUSTER_DIR": str(folder),
        "DS2_JOBS_CONFIG": str(write_jobs(folder, entries_for(folder))),
        "DS2_DATA_DIR": str(folder),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    cluster = Cluster(folder, env, 0.0, "")
    t0 = time.monotonic()
    res = cluster.run("up")
    cluster.up_seconds, cluster.up_log = time.monotonic() - t0, res.stdout + res.stderr
    try:
        assert res.returncode == 0, cluster.up_log[-5000:]
        yield cluster
    finally:
        down = cluster.run("down")
        print(down.stdout + down.stderr)
