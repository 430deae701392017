"""Spark's operator windows, and Arrow's, sum instance rows exactly as the rule written out in Python here does.

The aggregation is written for speed (no DISTINCT, no set: two plain group-bys, or, given a bound
of the parallelism, one with each instance a bit of a mask); this pins the meaning of both on random
rows that include every kind of bad input the policies must see. The Arrow version
(:mod:`autoscaler.engine.windows`, a backfill block's windows where it is stored) is pinned to the
same meaning on the same rows.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pyarrow as pa
import pytest

from autoscaler.engine import windows as arrow_windows
from autoscaler.engine.spark.decisions import operator_windows

pytestmark = pytest.mark.spark

BASES = ["emitted+lag", "emitted-unblocked", "emitted", "gauge (oracle)", None, None, "zz-other", "aa-other"]


def _rows(seed: int) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for epoch in range(1, 7):
        for op in ("src", "map", "sink", "wide"):
            p = rnd.randint(1, 4) if op != "wide" else rnd.randint(120, 140)  # more instances than one mask word
            for instance in range(0, p + 2):  # 0 and p+1 are out of range; some instances are missing
                for _ in range(rnd.choice([0, 1, 1, 1, 2] if p < 100 else [1] * 60 + [0, 2])):  # missing, once, or twice
                    busy, idle, bp = (rnd.choice([0.0, rnd.uniform(0, 1000)]) for _ in range(3))
                    rows.append({
                        "job": rnd.choice(["a", "b"]), "epoch": epoch, "operator_id": op, "instance": instance,
                        "parallelism": p, "max_parallelism": rnd.choice([None, 128]), "warmup": rnd.random() < 0.2,
                        "busy_ms": busy, "idle_ms": idle, "backpressured_ms": bp,
                        "true_processing_rate": rnd.uniform(0, 100), "true_output_rate": rnd.uniform(0, 100),
                        "observed_processing_rate": rnd.uniform(0, 100), "observed_output_rate": rnd.uniform(0, 100),
                        "pending_records": rnd.choice([None, rnd.uniform(0, 1e4)]), "source_rate_basis": rnd.choice(BASES),
                    })  # fmt: skip
    return rows


def _ratios(rows: list[dict], part: str) -> list[float]:
    """``part`` over the window, of each row whose window is known."""
    return [r[part] / w for r in rows if (w := r["busy_ms"] + r["idle_ms"] + r["backpressured_ms"]) > 0]


def _expected(rows: list[dict]) -> dict[tuple, dict]:
    """The meaning: sums and maxima over the rows; an instance counts once and only within 1..parallelism."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["job"], r["epoch"], r["operator_id"])].append(r)
    out = {}
    for key, rs in groups.items():
        pending = [r["pending_records"] for r in rs if r["pending_records"] is not None]
        max_par = [r["max_parallelism"] for r in rs if r["max_parallelism"] is not None]
        out[key] = {
            "parallelism": max(r["parallelism"] for r in rs),
            "instances_observed": len({r["instance"] for r in rs if 1 <= r["instance"] <= r["parallelism"]}),
            # Rows beyond one per instance within 1..parallelism: a repeat, an instance out of range.
            "duplicated_instances": len(rs) - len({r["instance"] for r in rs if 1 <= r["instance"] <= r["parallelism"]}),
            "warmup_instances": sum(r["warmup"] for r in rs),
            "max_parallelism": max(max_par) if max_par else None,
            "observed_processing_rate_max": max(r["observed_processing_rate"] for r in rs),
            "busy_ratio_max": max(_ratios(rs, "busy_ms"), default=0.0),
            "backpressure_ratio_max": max(_ratios(rs, "backpressured_ms"), default=0.0),
            "pending_records": sum(pending) if pending else None,
            "rate_basis": "/".join(sorted({r["source_rate_basis"] for r in rs} - {None})),
            **{c: sum(r[c] for r in rs) for c in ("true_processing_rate", "true_output_rate",
                                                   "observed_output_rate", "observed_processing_rate")},
        }  # fmt: skip
    return out


@pytest.mark.parametrize(("seed", "bounded"), [(1, False), (2, False), (1, True), (2, True)])
def test_operator_windows_match_their_meaning_on_bad_and_good_rows(spark, seed, bounded):
    rows = _rows(seed)
    expected = _expected(rows)
    bound = max(r["parallelism"] for r in rows) if bounded else None
    windows = operator_windows(spark.createDataFrame(rows), bound)
    _assert_meaning({(r["job"], r["epoch"], r["operator_id"]): r.asDict() for r in windows.collect()}, expected)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_arrow_operator_windows_match_the_same_meaning(seed):
    rows = _rows(seed)
    windows = arrow_windows.operator_windows(pa.Table.from_pylist(rows))
    _assert_meaning({(r["job"], r["epoch"], r["operator_id"]): r for r in windows.to_pylist()}, _expected(rows))


def test_arrow_operator_windows_join_more_than_two_rate_bases():
    rows = [r | {"job": "a", "epoch": 1, "operator_id": "src", "instance": k + 1, "parallelism": 3, "source_rate_basis": b}
            for k, (r, b) in enumerate(zip(_rows(1)[:3], ["zz", "aa", "mm"], strict=True))]  # fmt: skip
    (window,) = arrow_windows.operator_windows(pa.Table.from_pylist(rows)).to_pylist()
    assert window["rate_basis"] == "aa/mm/zz"
    assert window["instances_observed"] == 3 and window["duplicated_instances"] == 0


def _assert_meaning(got: dict[tuple, dict], expected: dict[tuple, dict]) -> None:
    assert got.keys() == expected.keys()
    assert any(e["duplicated_instances"] for e in expected.values())  # the rows do hold bad input
    assert any("/" in e["rate_basis"] and "other" in e["rate_basis"] for e in expected.values())
    for key, want in expected.items():
        for name, value in want.items():
            have = got[key][name]
            if isinstance(value, float):
                assert have is not None and math.isclose(have, value, rel_tol=1e-9, abs_tol=1e-12), (key, name, have, value)
            else:
                assert have == value, (key, name, have, value)
