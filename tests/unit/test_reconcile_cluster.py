"""The reconciler's fleet pass: the journals read once, the cluster's jobs listed once, each job named once."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

from autoscaler.flink.deployment import JobDeployment
from autoscaler.rescale import reconcile as module
from autoscaler.rescale.reconcile import Watched, reconcile_cluster


class Cluster:
    base_url = "http://flink:8081"

    def __init__(self, running: set[str]) -> None:
        self.running, self.listings = running, 0

    def jobs(self) -> list[SimpleNamespace]:
        self.listings += 1
        return [SimpleNamespace(name=n, state="RUNNING") for n in sorted(self.running)]


def watched(name: str, mechanism: str = "savepoint-restart") -> Watched:
    deployment = JobDeployment(job_name=f"flink-{name}", savepoint_dir="file:///sp", jar_id="0" * 8 + "-x_job.jar")
    return Watched(name, deployment, mechanism, savepoint_timeout_s=30, start_timeout_s=30)


def journal(folder, action_id: str, job_name: str, idle_s: float, result: dict | None = None) -> None:
    path = folder / f"{action_id}.json"
    data = {"action_id": action_id, "job_name": job_name, "mechanism": "savepoint-restart", "target": {"Count": 2}}
    path.write_text(json.dumps(data | ({"result": result} if result else {})))
    then = time.time() - idle_s
    os.utime(path, (then, then))


def test_one_pass_settles_only_stale_actions_and_names_each_job_that_does_not_run(tmp_path, monkeypatch):
    journal(tmp_path, "a1", "flink-a", idle_s=3600)  # stale: nobody finishes it
    journal(tmp_path, "b1", "flink-b", idle_s=10)  # fresh: its own task is at work
    journal(tmp_path, "c1", "flink-c", idle_s=3600, result={"outcome": "succeeded"})  # finished long ago
    settled: list[str] = []

    def settle(client, deployment, action, savepoint_timeout_s, start_timeout_s):
        settled.append(action.action_id)
        client.running.add(deployment.job_name)  # the resume path restarted it
        return SimpleNamespace(action_id=action.action_id, outcome="succeeded", message="restarted")

    reads = []
    real_unfinished = module.unfinished
    monkeypatch.setattr(module, "settle", settle)
    monkeypatch.setattr(module, "unfinished", lambda *a, **k: reads.append(a) or real_unfinished(*a, **k))
    cluster = Cluster(running={"flink-c"})
    jobs = [watched("a"), watched("b"), watched("c"), watched("d"), watched("e", "in-place")]
    jobs += [watched(f"x{i}") for i in range(50)]
    cluster.running |= {f"flink-x{i}" for i in range(50)}
    results, problems = reconcile_cluster(cluster, jobs, tmp_path)
    assert settled == ["a1"] and [r.outcome for r in results] == ["succeeded"]
    # b's rescale is still at work and has stopped it for now (its task reports); e is rescaled in place (never
    # stopped); d does not run.
    assert problems == {"d": ["no job called 'flink-d' runs on Flink (http://flink:8081)"]}
    assert len(reads) == 1 and cluster.listings == 1  # 55 jobs: one read of the journals, one listing
