"""How long validating metrics takes: one live epoch, and a 10^6-row backfill range with pandas vs Spark.

- one epoch: 40 rows (10 operators x 4 instances) and 400 rows (10 x 40), pandas engine, the
  suites only (``validate_rows``, no store) and end to end (``validate_epoch``: read the epoch and
  its predecessor from the store, validate, write the record), with and without Data Docs;
- a backfill range of N rows (25,000 epochs x 40 rows at 10^6) stored once under ``data/bench/``:
  ``validate_range`` with ``engine="pandas"`` and ``engine="spark"`` (a warm local session), no
  Data Docs; every epoch is good, so the time is the validation (and the records), not quarantining.

Results: ``benchmarks/results/validation.json`` and ``validation.md``.

    PATH=.venv/bin:$PATH SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python benchmarks/bench_validation.py \
        [--rows 1e6] [--repeat 3] [--skip-spark]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "include", ROOT, Path(__file__).resolve().parent):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from harness import machine, write_results  # noqa: E402

from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, read_epochs, write_epochs  # noqa: E402
from autoscaler.store.schemas import METRICS, VALIDATIONS  # noqa: E402
from autoscaler.topology import Operator, Topology  # noqa: E402
from autoscaler.validate import ValidationConfig  # noqa: E402

DATA = ROOT / "data" / "bench" / "validation"
RESULTS = ROOT / "benchmarks" / "results"
JOB = "bench-validation"
GENERATOR_VERSION = 1
OPERATORS = 10
WINDOW_S = 60
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def topology(instances: int) -> Topology:
    """10 operators: 2 sources -> a fan-in/fan-out DAG -> 2 sinks."""
    ops = [Operator(f"op{i}", f"Operator {i}", instances) for i in range(OPERATORS)]
    edges = [("op0", "op2"), ("op1", "op2"), ("op2", "op3"), ("op2", "op4"), ("op3", "op5"), ("op4", "op5")]
    edges += [("op5", "op6"), ("op6", "op7"), ("op7", "op8"), ("op7", "op9")]
    return Topology.from_edges(ops, edges)


def rows_for(topo: Topology, first_epoch: int, n_epochs: int) -> pa.Table:
    """Consistent metrics rows for ``n_epochs`` epochs (busy + idle + back-pressured = window, observed <= true)."""
    slots = [(op, i) for op in topo.order for i in range(1, topo.operators[op].parallelism + 1)]
    n = len(slots) * n_epochs
    epochs = np.repeat(np.arange(first_epoch, first_epoch + n_epochs, dtype=np.int64), len(slots))
    op_ids = np.array([s[0] for s in slots] * n_epochs, dtype=object)
    instances = np.array([s[1] for s in slots] * n_epochs, dtype=np.int32)
    is_source = np.array([topo.operators[s[0]].is_source for s in slots] * n_epochs)
    start_us = (int(T0.timestamp()) + epochs * WINDOW_S) * 1_000_000
    window_ms = WINDOW_S * 1000.0
    busy = np.where(is_source, 3000.0, 30000.0)
    bp = np.where(is_source, window_ms - 3000.0, 0.0)
    idle = window_ms - busy - bp
    records = np.full(n, 6000, dtype=np.int64)
    true_in = np.where(is_source, 0.0, records / (busy / 1000.0))
    obs_in = np.where(is_source, 0.0, records / WINDOW_S)
    true_out = np.where(is_source, 150.0, records / (busy / 1000.0))
    names = {op: topo.operators[op].name for op in topo.order}
    columns = {
        "job": pa.array([JOB] * n),
        "epoch": pa.array(epochs),
        "epoch_block": pa.array(epochs // EPOCH_BLOCK_SIZE),
        "operator_id": pa.array(op_ids, pa.string()),
        "operator_name": pa.array([names[o] for o in op_ids], pa.string()),
        "instance": pa.array(instances),
        "parallelism": pa.array(np.full(n, topo.operators["op0"].parallelism, dtype=np.int32)),
        "max_parallelism": pa.array(np.full(n, 128, dtype=np.int32)),
        "is_source": pa.array(is_source),
        "window_start": pa.array(start_us, pa.timestamp("us", tz="UTC")),
        "window_end": pa.array(start_us + WINDOW_S * 1_000_000, pa.timestamp("us", tz="UTC")),
        "records_in": pa.array(np.where(is_source, 0, records)),
        "records_out": pa.array(records),
        "busy_ms": pa.array(busy),
        "idle_ms": pa.array(idle),
        "backpressured_ms": pa.array(bp),
        "true_processing_rate": pa.array(true_in),
        "true_output_rate": pa.array(true_out),
        "observed_processing_rate": pa.array(obs_in),
        "observed_output_rate": pa.array(records / WINDOW_S),
        "warmup": pa.array(np.zeros(n, dtype=bool)),
        "pending_records": pa.nulls(n, pa.float64()),
        "source_format": pa.array(["bench"] * n),
        "source_rate_basis": pa.nulls(n, pa.string()),
    }
    return pa.table(columns, schema=METRICS.arrow_schema())


def interval(epoch: int) -> tuple[datetime, datetime]:
    start = T0 + timedelta(seconds=WINDOW_S * epoch)
    return start, start + timedelta(seconds=WINDOW_S)


def config(topo: Topology, epoch: int | None = None) -> ValidationConfig:
    return ValidationConfig(topology=topo, window_s=WINDOW_S, data_interval=interval(epoch) if epoch is not None else None)


def range_store(rows: int) -> Path:
    """A store with ``rows`` metrics rows (40 per epoch), generated once per size and generator version."""
    folder = DATA / f"rows={rows}-v{GENERATOR_VERSION}"
    if (folder / ".complete").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    topo = topology(4)
    epochs = rows // 40
    for first in range(0, epochs, EPOCH_BLOCK_SIZE):
        write_epochs(folder, METRICS, JOB, rows_for(topo, first, min(EPOCH_BLOCK_SIZE, epochs - first)))
    (folder / ".complete").write_text("ok\n")
    return folder


def timed(fn, repeat: int) -> dict:
    """Best and median wall time, and the peak RSS of this process (plus the JVM's, if any) while running."""
    times, peaks = [], []
    for _ in range(repeat):
        proc = psutil.Process()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        peaks.append(sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20)
    return {"best_s": min(times), "median_s": statistics.median(times), "runs": len(times), "rss_mb_after": max(peaks)}


def bench_one_epoch(repeat: int) -> list[dict]:
    from autoscaler.validate import validate_epoch, validate_rows
    from autoscaler.validate.gxrun import _CONTEXTS

    out = []
    for instances in (4, 40):
        topo = topology(instances)
        rows = rows_for(topo, 100, 1)
        before = rows_for(topo, 99, 1)
        cfg = config(topo, 100)
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "store"
            write_epochs(store, METRICS, JOB, pa.concat_tables([before, rows]))
            validate_rows(JOB, rows, cfg, previous=before)  # warm: GX import, context, first metrics
            docs = Path(tmp) / "docs"
            cases = {
                "suites only (validate_rows)": (validate_rows, (JOB, rows, cfg), {"previous": before}),
                "end to end (validate_epoch), no Data Docs": (validate_epoch, (store, JOB, 100, cfg), {"docs": False}),
                "end to end (validate_epoch), with Data Docs": (validate_epoch, (store, JOB, 100, cfg), {"docs_dir": docs}),
            }
            for name, (fn, args, kwargs) in cases.items():
                stats = timed(lambda fn=fn, args=args, kwargs=kwargs: fn(*args, **kwargs), repeat)
                out.append({"rows": rows.num_rows, "engine": "pandas", "case": name, **stats})
                best, median = stats["best_s"], stats["median_s"]
                print(f"one epoch, {rows.num_rows:>4} rows, {name:<45} best {best:.3f} s  median {median:.3f} s")
            assert read_epochs(store, VALIDATIONS, JOB, [100]).column("status").to_pylist() == ["passed"]
        _CONTEXTS.clear()
    return out


def bench_range(rows: int, repeat: int, engines: list[str]) -> list[dict]:
    from autoscaler.validate import validate_range

    src = range_store(rows)
    epochs = rows // 40
    topo = topology(4)
    intervals = {e: interval(e) for e in range(epochs)}
    spark = None
    out = []
    for engine in engines:
        if engine == "spark" and spark is None:
            os.environ.setdefault("SPARK_CONF_DIR", str(ROOT / "conf" / "spark"))
            from autoscaler.engine.spark.session import policy_session

            spark = policy_session("bench-validation", master="local[*]")
        times = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                store = Path(tmp) / "store"
                shutil.copytree(src / METRICS.name, store / METRICS.name)
                start = time.perf_counter()
                results = validate_range(
                    store, JOB, 0, epochs - 1, config(topo), intervals=intervals, engine=engine, spark=spark, docs=False
                )
                times.append(time.perf_counter() - start)
                assert len(results) == epochs and all(r.success for r in results.values())
        proc = psutil.Process()
        rss = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20
        stats = {"best_s": min(times), "median_s": statistics.median(times), "runs": len(times), "rss_mb_after": rss}
        out.append({"rows": rows, "epochs": epochs, "engine": engine, "case": "validate_range (read, validate, record)", **stats})
        print(
            f"range {rows:,} rows / {epochs:,} epochs, {engine:<6} best {stats['best_s']:.1f} s  median {stats['median_s']:.1f} s"
        )
    if spark is not None:
        spark.stop()
    return out


def conditions() -> dict:
    import great_expectations
    import pandas
    import pyspark

    base = machine()
    return {
        **base,
        "measured_at": base["date"],
        "machine": f"{base['cores']} cores, {base['ram_gb']} GB RAM, {base['platform']}",
        "great_expectations": great_expectations.__version__,
        "pandas": pandas.__version__,
        "pyspark": pyspark.__version__,
        "spark_master": "local[*], one warm session (policy_session), GX spark datasource with persist=True",
        "suite": _suite_sizes(),
        "load_average_at_start": base["load_avg_at_start"],
    }


def _suite_sizes() -> str:
    from autoscaler.validate.suite import build_suites

    metrics, slots = build_suites(config(topology(4), 0), JOB, (0, 0))
    return (
        f"metrics ({len(metrics.expectations)} expectations, whatever the number of operators) + "
        f"slots ({len(slots.expectations)}); result_format COMPLETE with (epoch, operator_id, instance) as index columns"
    )


def write_report(results: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    c = results["conditions"]
    lines = [
        "# Metrics validation (Great Expectations): time per epoch and per backfill range",
        "",
        f"Measured {c['measured_at']} by `benchmarks/bench_validation.py {' '.join(results['argv'])}`.",
        "",
        f"- machine: {c['machine']}",
        f"- Python {c['python']}, great-expectations {c['great_expectations']}, pandas {c['pandas']}, "
        f"PySpark {c['pyspark']}, Java: {c['java']}",
        f"- Spark: {c['spark_master']}",
        f"- suites: {c['suite']}",
        f"- load average (1, 5, 15 min) when the run started: {c['load_average_at_start']} -- the machine is shared,"
        " so absolute times vary; the pandas/Spark ratio is what decides the engine",
        "- data: 10 operators (2 sources, fan-in and fan-out), 4 instances each (40 rows per epoch) or 40 each"
        " (400 rows); 60 s windows; every epoch valid",
        "- times exclude the GX import (~2.5 s, once per process) and, for Spark, the session start",
        "",
        "| case | rows | engine | best s | median s | runs | RSS after MB |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in results["one_epoch"] + results["range"]:
        rows = f"{r['rows']:,}" + (f" ({r['epochs']:,} epochs)" if "epochs" in r else "")
        times = f"{r['best_s']:.3f} | {r['median_s']:.3f}"
        lines.append(f"| {r['case']} | {rows} | {r['engine']} | {times} | {r['runs']} | {r['rss_mb_after']:,.0f} |")
    if results.get("faster_for_ranges"):
        lines += ["", f"Faster for backfill ranges: **{results['faster_for_ranges']}** (the default of `validate_range`)."]
    write_results("validation", results, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e6, help="rows of the backfill range (multiple of 40)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per one-epoch case (ranges run once unless --range-repeat)")
    parser.add_argument("--range-repeat", type=int, default=1)
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-range", action="store_true")
    args = parser.parse_args(argv)
    rows = int(args.rows) // 40 * 40
    results = {"argv": argv if argv is not None else sys.argv[1:], "conditions": conditions()}
    results["one_epoch"] = bench_one_epoch(args.repeat)
    results["range"] = []
    if not args.skip_range:
        engines = ["pandas"] + ([] if args.skip_spark else ["spark"])
        results["range"] = bench_range(rows, args.range_repeat, engines)
        if len(results["range"]) == 2:
            results["faster_for_ranges"] = min(results["range"], key=lambda r: r["best_s"])["engine"]
    write_report(results)
    print(f"wrote {RESULTS / 'validation.json'} and {RESULTS / 'validation.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
