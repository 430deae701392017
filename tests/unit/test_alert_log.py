"""The alerts file is rotated: bounded on disk and per page load, nothing of the last day hidden, no line lost."""

from __future__ import annotations

import json
import multiprocessing
from datetime import UTC, datetime, timedelta

from autoscaler.observe import alert_log
from autoscaler.observe.views import recent_alerts

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)


def alert(i, age_s=0.0, dag="ds2_a"):
    return {"at": (NOW - timedelta(seconds=age_s)).isoformat(), "dag_id": dag, "job": "a", "kind": "k", "n": i, "pad": "x" * 200}


def test_the_file_rotates_and_a_reader_still_sees_both_generations(tmp_path):
    path = tmp_path / "alerts.jsonl"
    for i in range(40):
        alert_log.append(path, [alert(i)], max_bytes=2_000)
    assert path.stat().st_size < 2_000 + 300 and alert_log.previous(path).stat().st_size >= 2_000
    seen = [json.loads(line)["n"] for line in alert_log.lines(path)]
    assert seen == sorted(seen) and seen[-1] == 39  # the newest last, in order
    assert len(seen) < 40  # the generation before the previous one is gone: the files are bounded
    assert [a["n"] for a in recent_alerts(path, since_s=60, now=NOW)["ds2_a"]] == seen


def _writer(path, k):
    for i in range(50):
        alert_log.append(path, [alert(k * 1000 + i)], max_bytes=1 << 30)


def test_writers_in_several_processes_lose_no_line(tmp_path):
    path = tmp_path / "alerts.jsonl"
    procs = [multiprocessing.get_context("fork").Process(target=_writer, args=(path, k)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    numbers = sorted(json.loads(line)["n"] for line in alert_log.lines(path))
    assert numbers == sorted(k * 1000 + i for k in range(4) for i in range(50))
