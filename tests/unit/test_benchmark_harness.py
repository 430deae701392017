"""The benchmarks' shared harness: conditions, statistics and the atomic results writer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness import machine, machine_line, stats, write_results


def test_stats_and_conditions():
    assert stats([]) is None
    assert stats([3.0, 1.0, 2.0]) == {"n": 3, "min": 1.0, "median": 2.0, "max": 3.0}
    c = machine()
    assert c["cores"] >= 1 and len(c["load_avg_at_start"]) == 3 and c["date"].endswith("+00:00")
    assert f"{c['cores']} cores" in machine_line(c)


def test_results_are_replaced_whole(tmp_path):
    write_results("x", {"a": 1}, "# one", tmp_path)
    write_results("x", {"a": 2}, "# two\n", tmp_path)
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 2}
    assert (tmp_path / "x.md").read_text() == "# two\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.md"]  # no temp files left


def test_the_fleet_benchmark_never_counts_more_runs_finished_than_due():
    """bench_fleet counted every run that ended in the window, whatever its epoch: a fleet catching up showed
    "3000 / 2000". Runs of earlier epochs are counted apart; the CPU per job-epoch still covers every run paid for."""
    from argparse import Namespace
    from datetime import UTC, datetime

    import bench_fleet

    t0, t1, interval = 1_800_000_000.0, 1_800_000_100.0, 10

    def run(epoch_end, ended):
        iso = lambda t: datetime.fromtimestamp(t, tz=UTC).isoformat()  # noqa: E731
        return {"dag_run_id": f"r{epoch_end}", "state": "success", "end_date": iso(ended), "data_interval_end": iso(epoch_end)}

    # 10 epochs due (ends t0 .. t0+90 after `first` = t0 - 1); 10 of them finished, and 5 of earlier epochs.
    runs = [run(t0 - 1 + interval * (k + 1), t0 + interval * (k + 1) - 1) for k in range(10)]
    runs += [run(t0 - 1 - interval * k, t0 + k) for k in range(5)]

    class FakeStack:
        folder = Path("/nonexistent")

        def api(self, method, path, params=None):
            return {"dag_runs": runs} if path.endswith("/dagRuns") else {"task_instances": []}

    args = Namespace(interval=interval, epochs=10, batched=False)
    cpu = {"airflow": 30.0, "spark": 0.0, "postgres": 0.0}
    figures = bench_fleet.measure(FakeStack(), 1, args, t0, t1, cpu, (t0 - 1, t0 - 1 + 10 * interval))
    assert (figures["runs_finished"], figures["runs_due"], figures["runs_finished_from_before"]) == (10, 10, 5)
    assert figures["cpu_s_per_job_epoch"] == 2.0  # 30 CPU-s over the 15 runs the window paid for
