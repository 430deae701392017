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
