"""Throughput and memory of the Spark DS2 policy job at 10^5-10^7 metrics rows.

Generates synthetic metrics (N epochs x a 10-operator DAG with fan-in and fan-out x 4
instances) once per size under ``data/bench/`` -- as a metrics Parquet store and as the
equivalent DS2 rates log -- then times, in one warm SparkSession, the read, the policy and the
end-to-end run (with the store write) for both inputs, sampling the RSS of the driver JVM and
of this Python process every 50 ms. Optionally also times a cold ``bin/ds2-policy`` run for
one live epoch. Results: ``benchmarks/results/policy.json`` and ``policy.md``.

    PATH=.venv/bin:$PATH SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python benchmarks/bench_policy.py
        [--sizes 1e5,1e6,1e7] [--repeat N] [--skip-cold] [--results DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "include") not in sys.path:
    sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import machine, write_results  # noqa: E402

from autoscaler.collect.ds2_files import RATE_COLUMNS  # noqa: E402
from autoscaler.config.policy_options import PolicyOptions  # noqa: E402
from autoscaler.engine.spark.blocks import BlockRun  # noqa: E402
from autoscaler.engine.spark.rates_log import decide_rates_log  # noqa: E402
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs  # noqa: E402
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, block_dir, read_epochs  # noqa: E402
from autoscaler.store.schemas import DECISIONS, METRICS  # noqa: E402
from autoscaler.topology import Operator, Topology, write_topology_csv  # noqa: E402

DATA = ROOT / "data" / "bench"
RESULTS = ROOT / "benchmarks" / "results"
JOB = "bench"
GENERATOR_VERSION = 1  # bump when the generated data changes: cached data of another version is regenerated
INSTANCES = 4
INTERVAL_S = 10  # window length of an epoch
T0_NS = 115_000_000_000_000  # a monotonic clock, like the DS2 reference logs
CHUNK_BLOCKS = 24  # epoch blocks generated at once: 24 x 1024 epochs x 40 rows ~ 10^6 rows
WARMUP_ROWS = 4_000  # 100 epochs
# What is measured per input: Spark's read of it (for reference: the general path's first step), and
# the whole run as production decides it, which reads, decides and writes each block in one task
# (engine.spark.blocks; a rates log is first parsed by byte range into blocks, engine.spark.rates_log).
PHASES = {"store": ("read", "end-to-end"), "rates-log": ("read", "end-to-end")}
SAMPLE_S = 0.05
PEAKS = ("peak_jvm_mb", "peak_python_mb", "peak_other_mb", "peak_total_mb")

# The DAG: 2 sources, fan-out (parse_clicks, enrich, win_long), fan-in (join, sink_store, sink_audit).
# id: (name, selectivity, capacity per instance in r/s of useful time; sources: mean output rate)
OPERATORS = {
    "src_orders": ("Source: Orders", None, 40_000.0),
    "src_clicks": ("Source: Clicks", None, 120_000.0),
    "parse_orders": ("Parse Orders", 1.0, 25_000.0),
    "parse_clicks": ("Parse Clicks", 0.9, 40_000.0),
    "join": ("Join Orders-Clicks", 0.3, 50_000.0),
    "enrich": ("Enrich", 1.0, 15_000.0),
    "win_short": ("Window 1m", 0.2, 10_000.0),
    "win_long": ("Window 1h", 0.05, 20_000.0),
    "sink_store": ("Sink: Store", 0.0, 8_000.0),
    "sink_audit": ("Sink: Audit", 0.0, 60_000.0),
}
EDGES = (
    ("src_orders", "parse_orders"),
    ("src_clicks", "parse_clicks"),
    ("parse_orders", "join"),
    ("parse_clicks", "join"),
    ("join", "enrich"),
    ("enrich", "win_short"),
    ("enrich", "win_long"),
    ("win_short", "sink_store"),
    ("win_long", "sink_store"),
    ("parse_clicks", "sink_audit"),
    ("win_long", "sink_audit"),
)


def topology() -> Topology:
    ops = [Operator(op_id, name, INSTANCES) for op_id, (name, _, _) in OPERATORS.items()]
    return Topology.from_edges(ops, EDGES, source="bench topology")


# ---------------------------------------------------------------------------------------------
# Data generation: numpy per chunk of epochs, no Python per row.


def _noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: float) -> np.ndarray:
    return np.clip(1.0 + sigma * rng.standard_normal(shape), 0.5, 1.5)


def _chunk(topo: Topology, first_epoch: int, n_epochs: int, seed: int) -> tuple[pa.Table, pa.Table]:
    """Rows of epochs [first_epoch, first_epoch + n_epochs): (store rows, rates-log rows)."""
    rng = np.random.default_rng([seed, first_epoch])
    order = list(OPERATORS)  # row order inside an epoch: operators as declared, then instances
    index = {op: k for k, op in enumerate(order)}
    n_ops = len(order)
    epochs = np.arange(first_epoch, first_epoch + n_epochs, dtype=np.int64)
    daily = 1.0 + 0.4 * np.sin(2 * np.pi * epochs / 1440.0)  # a daily cycle at one epoch per minute

    # Operator totals per epoch (observed, r/s of wall time), propagated in topological order.
    obs_in = np.zeros((n_epochs, n_ops))
    obs_out = np.zeros((n_epochs, n_ops))
    for op in topo.order:
        k = index[op]
        _, selectivity, mean = OPERATORS[op]
        if topo.operators[op].is_source:
            obs_out[:, k] = mean * daily * _noise(rng, (n_epochs,), 0.03)
        else:
            obs_in[:, k] = sum(obs_out[:, index[up]] for up in topo.upstream(op))
            obs_out[:, k] = obs_in[:, k] * selectivity * _noise(rng, (n_epochs,), 0.02)

    # Per instance: skewed shares, a busy fraction from the capacity, true rates = observed / busy.
    shape = (n_epochs, n_ops, INSTANCES)
    share = _noise(rng, shape, 0.1)
    share /= share.sum(axis=2, keepdims=True)
    capacity = np.array([OPERATORS[op][2] for op in order])[None, :, None] * _noise(rng, shape, 0.05)
    is_source = np.array([topo.operators[op].is_source for op in order])
    i_in = obs_in[:, :, None] * share
    i_out = obs_out[:, :, None] * share
    busy = np.clip(i_in / capacity, 0.02, 1.0)
    busy = np.where(is_source[None, :, None], rng.uniform(0.6, 0.95, shape), busy)
    opr = np.round(i_in, 3).reshape(-1)
    oor = np.round(i_out, 3).reshape(-1)
    tpr = np.round(i_in / busy, 3).reshape(-1)
    tor = np.round(i_out / busy, 3).reshape(-1)
    busy = busy.reshape(-1)
    del i_in, i_out, share, capacity

    n = n_epochs * n_ops * INSTANCES
    epoch = np.repeat(epochs, n_ops * INSTANCES)
    op_k = np.tile(np.repeat(np.arange(n_ops, dtype=np.int32), INSTANCES), n_epochs)
    instance = np.tile(np.arange(1, INSTANCES + 1, dtype=np.int32), n_epochs * n_ops)
    ts_ns = T0_NS + epoch * (INTERVAL_S * 1_000_000_000) + op_k.astype(np.int64) * 1_000_000 + instance * 100_000
    take = pa.array(op_k)
    op_ids = pa.array(order, pa.string()).take(take)
    parallelism = np.full(n, INSTANCES, dtype=np.int32)
    window_start = pa.array(ts_ns // 1000, pa.timestamp("us", tz="UTC"))
    window_end = pa.array(ts_ns // 1000 + INTERVAL_S * 1_000_000, pa.timestamp("us", tz="UTC"))
    busy_ms = np.round(busy * INTERVAL_S * 1000, 3)

    store = pa.table(
        {
            "epoch": epoch,
            "operator_id": op_ids,
            "operator_name": pa.array([OPERATORS[op][0] for op in order], pa.string()).take(take),
            "instance": instance,
            "parallelism": parallelism,
            "max_parallelism": np.full(n, 128, dtype=np.int32),
            "is_source": pa.array(is_source).take(take),
            "window_start": window_start,
            "window_end": window_end,
            "records_in": np.rint(opr * INTERVAL_S).astype(np.int64),
            "records_out": np.rint(oor * INTERVAL_S).astype(np.int64),
            "busy_ms": busy_ms,
            "idle_ms": INTERVAL_S * 1000 - busy_ms,
            "backpressured_ms": np.zeros(n),
            "true_processing_rate": tpr,
            "true_output_rate": tor,
            "observed_processing_rate": opr,
            "observed_output_rate": oor,
            "warmup": np.zeros(n, dtype=bool),
            "pending_records": pa.nulls(n, pa.float64()),
            "source_format": pa.array(["flink-rest"], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32))),
            "source_rate_basis": pa.nulls(n, pa.string()),
        },
        schema=METRICS.arrow_schema(with_partitions=False),
    )
    log = pa.table(
        [op_ids, instance, parallelism, ts_ns, tpr, tor, opr, oor],
        names=list(RATE_COLUMNS),
    )
    return store, log


def dataset_dir(rows: int) -> Path:
    return DATA / f"rows-{rows}"


def generate(rows: int, seed: int = 42) -> dict:
    """The cached data set of ``rows`` metrics rows (generated when missing). Returns its facts."""
    per_epoch = len(OPERATORS) * INSTANCES
    if rows % per_epoch:
        raise SystemExit(f"bench: {rows} rows is not a multiple of {per_epoch} (operators x instances)")
    final = dataset_dir(rows)
    meta_path = final / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("generator_version") == GENERATOR_VERSION and meta.get("rows") == rows:
            meta["cached"] = True
            return meta
    if final.exists():  # another generator version, or an incomplete copy
        shutil.rmtree(final)
    for stale in DATA.glob(f".staging-rows-{rows}-*"):  # left by an interrupted run
        shutil.rmtree(stale, ignore_errors=True)
    n_epochs = rows // per_epoch
    topo = topology()
    staging = DATA / f".staging-rows-{rows}-{uuid.uuid4().hex}"
    store_root = staging / "store"
    staging.mkdir(parents=True)
    write_topology_csv(topo, staging / "topology.csv")
    started = time.perf_counter()
    log_options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    step = CHUNK_BLOCKS * EPOCH_BLOCK_SIZE
    with open(staging / "rates.log", "wb") as log_file:
        log_file.write(("# " + ",".join(RATE_COLUMNS) + "\n").encode())
        writer = None
        for first in range(0, n_epochs, step):
            count = min(step, n_epochs - first)
            store_rows, log_rows = _chunk(topo, first, count, seed)
            for offset in range(0, count, EPOCH_BLOCK_SIZE):
                epoch0 = first + offset
                folder = block_dir(store_root, METRICS, JOB, epoch0 // EPOCH_BLOCK_SIZE)
                folder.mkdir(parents=True)
                block_rows = min(EPOCH_BLOCK_SIZE, count - offset) * per_epoch
                pq.write_table(store_rows.slice(offset * per_epoch, block_rows), folder / "part-0.parquet")
            if writer is None:
                writer = pacsv.CSVWriter(log_file, log_rows.schema, write_options=log_options)
            writer.write_table(log_rows)
            del store_rows, log_rows
        if writer is not None:
            writer.close()
    seconds = time.perf_counter() - started
    _check_store(store_root, n_epochs)
    meta = {
        "generator_version": GENERATOR_VERSION,
        "rows": rows,
        "epochs": n_epochs,
        "operators": len(OPERATORS),
        "instances": INSTANCES,
        "job": JOB,
        "seed": seed,
        "generate_s": round(seconds, 3),
        "store_bytes": sum(f.stat().st_size for f in store_root.rglob("*.parquet")),
        "store_files": sum(1 for _ in store_root.rglob("*.parquet")),
        "rates_log_bytes": (staging / "rates.log").stat().st_size,
    }
    (staging / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    os.rename(staging, final)
    meta["cached"] = False
    return meta


def _check_store(store_root: Path, n_epochs: int) -> None:
    """The directly written blocks read back through autoscaler.store.parquet like any other store."""
    expected = METRICS.arrow_schema(with_partitions=False)
    first = next(store_root.rglob("*.parquet"))
    if not pq.read_schema(first).equals(expected, check_metadata=False):
        raise SystemExit(f"bench: {first} does not have the metrics file schema")
    rows = read_epochs(store_root, METRICS, JOB, [0, n_epochs - 1])
    want = 2 * len(OPERATORS) * INSTANCES if n_epochs > 1 else len(OPERATORS) * INSTANCES
    if rows.num_rows != want:
        raise SystemExit(f"bench: read back {rows.num_rows} rows for the first and last epoch, expected {want}")


# ---------------------------------------------------------------------------------------------
# Memory sampling.


class RssSampler:
    """Peak RSS of the driver JVM and of this Python process, sampled in a background thread,
    and the CPU time used meanwhile by them and by everything else on the machine.

    ``root`` is the process whose descendants are sampled (this process for the warm session,
    the ``bin/ds2-policy`` process for the cold run). Java processes count as JVM, this process
    and Python processes (the cold run's driver) as Python, anything else (short-lived processes
    forked by the JVM, such as Hadoop's ``chmod``) as other; "total" is JVM + Python.
    Other CPU = machine busy time - the sampled processes' CPU time: the load the measurement
    competed with.
    """

    def __init__(self, root: psutil.Process | None = None):
        self.me = psutil.Process()
        self.root = root or self.me
        self.peak = {"jvm": 0, "python": 0, "other": 0, "total": 0}
        self.start = None
        self.other_names: set[str] = set()
        self._known: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _procs(self) -> list[psutil.Process]:
        try:
            found = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            found = []
        for proc in found:  # keep Process objects: their cpu_times survive between samples
            self._known.setdefault(proc.pid, proc)
        return [self._known[p.pid] for p in found]

    def _sample(self) -> dict[str, int]:
        out = {"jvm": 0, "python": 0, "other": 0}
        for proc in self._procs():
            try:
                rss = proc.memory_info().rss
                name = proc.name()
            except psutil.Error:
                continue
            if proc.pid == self.me.pid or name.startswith("python"):  # cold run: spark-submit's Python driver
                out["python"] += rss
            elif name == "java":
                out["jvm"] += rss
            else:
                out["other"] += rss
                self.other_names.add(name)
        out["total"] = out["jvm"] + out["python"]
        return out

    def _own_cpu(self) -> float:
        if self.root.pid != self.me.pid:  # a subprocess, waited for before the measurement ends
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        total = 0.0
        for proc in self._procs():
            try:
                t = proc.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system  # + children that exited
        return total

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return (
            sum(t)
            - t.idle
            - getattr(t, "iowait", 0.0)
            - getattr(t, "steal", 0.0)
            - getattr(t, "guest", 0.0)
            - getattr(t, "guest_nice", 0.0)
        )

    def _run(self) -> None:
        while True:
            sample = self._sample()
            if self.start is None:
                self.start = sample
            for key, value in sample.items():
                self.peak[key] = max(self.peak[key], value)
            if self._stop.wait(SAMPLE_S):
                break

    def __enter__(self) -> RssSampler:
        self._cpu0, self._busy0, self._wall0 = self._own_cpu(), self._busy(), time.perf_counter()
        self._thread.start()
        while self.start is None:
            time.sleep(0.001)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        final = self._sample()  # one last sample after the action finished
        for key, value in final.items():
            self.peak[key] = max(self.peak[key], value)
        self.wall_s = time.perf_counter() - self._wall0
        self.own_cpu_s = self._own_cpu() - self._cpu0
        self.other_cpu_s = max(0.0, self._busy() - self._busy0 - self.own_cpu_s)

    def figures(self) -> dict:
        mb = 1024 * 1024
        return {
            "peak_jvm_mb": round(self.peak["jvm"] / mb, 1),
            "peak_python_mb": round(self.peak["python"] / mb, 1),
            "peak_other_mb": round(self.peak["other"] / mb, 1),
            "peak_total_mb": round(self.peak["total"] / mb, 1),
            "start_jvm_mb": round(self.start["jvm"] / mb, 1),
            "cpu_s": round(self.own_cpu_s, 2),
            "other_cpu_s": round(self.other_cpu_s, 2),
            "other_processes": sorted(self.other_names),
        }


def others_load(seconds: float = 1.0) -> float:
    """Cores kept busy by other processes (not this process and its children) over ``seconds``."""
    with RssSampler() as sampler:
        time.sleep(seconds)
    return sampler.other_cpu_s / sampler.wall_s


def wait_quiet(max_load: float, max_wait_s: float) -> tuple[float, float]:
    """Wait (at most ``max_wait_s``) until other processes use at most ``max_load`` cores.

    The machine may be shared (other sessions' Flink clusters, Spark jobs); measuring while they
    run mostly measures them. Returns (the last load seen, seconds waited)."""
    started = time.perf_counter()
    while True:
        load = others_load()
        waited = time.perf_counter() - started
        if load <= max_load or waited >= max_wait_s:
            return round(load, 2), round(waited, 1)
        time.sleep(2.0)


# ---------------------------------------------------------------------------------------------
# The measurements.


class Bench:
    def __init__(self, spark, topo: Topology, quiet_load: float = 0.5, quiet_wait_s: float = 0.0):
        from autoscaler.engine.spark import decisions, inputs
        from autoscaler.store import spark as store

        self.quiet_load, self.quiet_wait_s = quiet_load, quiet_wait_s

        self.spark = spark
        self.topo = topo
        self.inputs, self.decisions, self.store = inputs, decisions, store
        self.options = PolicyOptions()
        self.out = DATA / "out"
        shutil.rmtree(self.out, ignore_errors=True)  # outputs left by an interrupted run

    def _run_info(self):
        return self.decisions.RunInfo(uuid.uuid4().hex, "backfill", datetime.now(UTC).replace(microsecond=0))

    def _input(self, path_kind: str, rows: int):
        """(metrics DataFrame, check to run before the commit)."""
        folder = dataset_dir(rows)
        if path_kind == "store":
            root = str(folder / "store")
            metrics = self.inputs.metrics_store(self.spark, root, JOB)
            metrics, observation = self.inputs.guard_operators(metrics, self.topo)
            return metrics, lambda: self.inputs.raise_for_unknown_operators(observation, root, JOB, self.topo)
        log = str(folder / "rates.log")
        metrics, observation = self.inputs.rates_log(self.spark, log, self.topo, JOB)
        return metrics, lambda: self.inputs.raise_for_bad_lines(observation, log, self.topo)

    @staticmethod
    def _noop(df) -> None:
        df.write.format("noop").mode("overwrite").save()

    def _backfill(self, rows: int, out_root: Path) -> None:
        """A backfill of the whole store as production runs it (engine.spark.run): block by block where the
        blocks are stored, no shuffle (engine.spark.blocks), the decisions committed into ``out_root``."""
        folder = dataset_dir(rows)
        run = StoreRun(str(folder / "store"), JOB, None, None, "backfill", uuid.uuid4().hex,
                       str(folder / "topology.csv"), self.options, decisions_store=str(out_root))  # fmt: skip
        decide_stored_epochs(self.spark, run, self.topo)

    def _rates_log(self, rows: int, out_root: Path) -> None:
        """A rates log decided as ds2_policy decides one in timestamp order (engine.spark.rates_log): its byte
        ranges parsed in parallel into a scratch store, then block by block."""
        folder = dataset_dir(rows)
        run = BlockRun("", str(out_root), JOB, self.topo, self.options.resolved(self.topo), self._run_info(), {},
                       None, None)  # fmt: skip
        if decide_rates_log(self.spark, run, str(folder / "rates.log")) is None:
            raise SystemExit(f"bench: {folder / 'rates.log'} did not take the block path")

    def _spark_sql(self, path_kind: str, rows: int, phase: str, out_root: Path | None) -> None:
        """A phase through Spark's reader, aggregation and shuffle: as ds2_policy decides a rates log."""
        metrics, check = self._input(path_kind, rows)
        if phase == "read":
            self._noop(metrics)
            check()
            return
        # The bound of the parallelism that lets the operator windows take one aggregation, from the topology.
        bound = self.decisions.topology_parallelism(self.topo)
        decisions = self.decisions.policy_decisions(metrics, self.topo, self.options, self._run_info(), max_parallelism=bound)
        if phase == "policy":
            self._noop(decisions)
            check()
        else:
            self.store.write_epochs(decisions.drop("op_index"), str(out_root), DECISIONS, JOB, before_commit=check)

    def phase(self, path_kind: str, rows: int, phase: str) -> tuple[float, dict]:
        """One timed run of a phase, from building the plan to the end of the action."""
        self.spark._jvm.java.lang.System.gc()  # start every measurement from a collected heap
        load, waited = wait_quiet(self.quiet_load, self.quiet_wait_s) if self.quiet_wait_s > 0 else (None, 0.0)
        out_root = None
        if phase == "end-to-end":
            out_root = self.out / f"rows-{rows}-{path_kind}-{uuid.uuid4().hex[:8]}"
        with RssSampler() as sampler:
            started = time.perf_counter()
            if path_kind == "store" and phase == "end-to-end":
                self._backfill(rows, out_root)
            elif phase == "end-to-end":
                self._rates_log(rows, out_root)
            else:
                self._spark_sql(path_kind, rows, phase, out_root)
            seconds = time.perf_counter() - started
        if out_root is not None:
            shutil.rmtree(out_root, ignore_errors=True)
        return seconds, {**sampler.figures(), "others_load_before": load, "waited_s": waited}

    def equivalence(self, rows: int) -> int:
        """Both inputs of one data set give the same decisions (checks the generator). Returns rows compared."""
        keys = ["epoch", "operator_id"]
        frames = []
        for path_kind in ("store", "rates-log"):
            metrics, check = self._input(path_kind, rows)
            decisions = self.decisions.policy_decisions(metrics, self.topo, self.options, self._run_info())
            frames.append(
                decisions.select(*keys, "status", "target_parallelism", "optimal_parallelism")
                .toPandas()
                .sort_values(keys)
                .reset_index(drop=True)
            )
            check()
        a, b = frames
        same = [*keys, "status", "target_parallelism"]
        if len(a) != len(b) or not a[same].equals(b[same]):
            raise SystemExit("bench: the store and the rates log of the same data set give different decisions")
        if not np.allclose(a["optimal_parallelism"], b["optimal_parallelism"], equal_nan=True):
            raise SystemExit("bench: the store and the rates log give different optimal parallelisms")
        if (a["status"] != "ok").any():
            raise SystemExit(f"bench: generated epochs are not all complete: {a['status'].value_counts().to_dict()}")
        return len(a)


def cold_run(rows: int, repeat: int, quiet_load: float, quiet_wait_s: float) -> dict:
    """Wall time of ``bin/ds2-policy`` (a new JVM) deciding the last epoch of the ``rows`` store."""
    folder = dataset_dir(rows)
    meta = json.loads((folder / "meta.json").read_text())
    epoch = meta["epochs"] - 1
    runs = []
    for _ in range(repeat):
        # A fresh store root whose metrics are the cached store's (symlink): decisions land here.
        root = DATA / "out" / f"cold-{uuid.uuid4().hex[:8]}"
        root.mkdir(parents=True)
        (root / METRICS.name).symlink_to(folder / "store" / METRICS.name, target_is_directory=True)
        argv = [
            str(ROOT / "bin" / "ds2-policy"), "--topology", str(folder / "topology.csv"), "--metrics-store",
            "--store", str(root), "--job", JOB, "--from-epoch", str(epoch), "--to-epoch", str(epoch), "--run-type", "live",
        ]  # fmt: skip
        load, waited = wait_quiet(quiet_load, quiet_wait_s) if quiet_wait_s > 0 else (None, 0.0)
        started = time.perf_counter()
        proc = psutil.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with RssSampler(root=proc) as sampler:
            stdout, stderr = proc.communicate()
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"bench: bin/ds2-policy failed ({proc.returncode}):\n{stdout}\n{stderr}")
        written = read_epochs(root, DECISIONS, JOB, [epoch]).num_rows
        if written != len(OPERATORS):
            raise SystemExit(f"bench: the cold run wrote {written} decision rows for epoch {epoch}, expected {len(OPERATORS)}")
        shutil.rmtree(root, ignore_errors=True)
        runs.append((seconds, {**sampler.figures(), "others_load_before": load, "waited_s": waited}))
    record = summarise(rows, "cold bin/ds2-policy", f"1 live epoch ({epoch}) from the store", runs)
    record.update(rows=len(OPERATORS) * INSTANCES, rows_per_s=None)
    return record


def summarise(size: int, path_kind: str, phase: str, runs: list[tuple[float, dict]]) -> dict:
    """One table row from the repeats of a measurement: times, best and median, CPU, peak memory."""
    times = [t for t, _ in runs]
    best = min(range(len(runs)), key=times.__getitem__)
    figures = [f for _, f in runs]
    return {
        "size": size,
        "path": path_kind,
        "phase": phase,
        "rows": size,
        "seconds": [round(t, 3) for t in times],
        "best_s": round(times[best], 3),
        "median_s": round(statistics.median(times), 3),
        "rows_per_s": round(size / times[best]),
        "cpu_s": figures[best]["cpu_s"],  # of the best run
        "other_cpu_s": figures[best]["other_cpu_s"],
        "other_cpu_s_max": max(f["other_cpu_s"] for f in figures),
        **{k: max(f[k] for f in figures) for k in PEAKS},
        "start_jvm_mb": min(f["start_jvm_mb"] for f in figures),
        "other_processes": sorted({n for f in figures for n in f["other_processes"]}),
        "others_load_before": [f.get("others_load_before") for f in figures],
        "waited_s": [f.get("waited_s", 0.0) for f in figures],
    }


# ---------------------------------------------------------------------------------------------
# Conditions and reports.


def _java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "unknown"


CODE_UNDER_TEST = (
    "include/autoscaler/engine/spark",
    "spark_jobs",
    "include/autoscaler/store/parquet.py",
    "include/autoscaler/store/schemas.py",
)


def code_version() -> dict:
    """The commit, and whether (and how) the measured code differs from it: the repository moves."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        return out.stdout

    digest = hashlib.sha256()
    for rel in CODE_UNDER_TEST:
        path = ROOT / rel
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes())
    dirty = git("status", "--porcelain", "--", *CODE_UNDER_TEST)
    return {
        "commit": git("rev-parse", "--short=12", "HEAD").strip() or "unknown",
        "modified": [line[3:] for line in dirty.splitlines() if line.strip()],
        "sha256": digest.hexdigest()[:16],
    }


def conditions(spark) -> dict:
    jvm = spark._jvm
    system = jvm.java.lang.System
    java_procs = [p for p in psutil.Process().children(recursive=True) if p.name() == "java"]
    xmx = []
    for proc in java_procs:
        xmx += [a for a in proc.cmdline() if a.startswith("-Xmx")]
    conf = spark.sparkContext.getConf()
    base = machine()
    return {
        **base,
        "code": code_version(),
        "host": platform.node(),
        "cpu_count": base["cores"],
        "spark_version": spark.version,
        "java_version": f"{system.getProperty('java.version')} ({system.getProperty('java.vm.name')})",
        "java": _java_version(),
        "master": spark.sparkContext.master,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "adaptive": spark.conf.get("spark.sql.adaptive.enabled"),
        "driver_memory": conf.get("spark.driver.memory", "(default 1g)"),
        "jvm_xmx": " ".join(xmx) or "(none on the command line)",
        "jvm_max_heap_mb": round(jvm.java.lang.Runtime.getRuntime().maxMemory() / 1024**2),
        "spark_conf_dir": os.environ.get("SPARK_CONF_DIR"),
        "sample_interval_s": SAMPLE_S,
        "operators": len(OPERATORS),
        "instances_per_operator": INSTANCES,
        "edges": len(EDGES),
    }


def _fmt(value, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def write_reports(report: dict, results: Path = RESULTS) -> None:

    c = report["conditions"]
    lines = [
        "# DS2 policy job: throughput and memory",
        "",
        f"Measured {c['date']} by `benchmarks/bench_policy.py {' '.join(report['argv'])}`.",
        "",
        f"- code: commit {c['code']['commit']}"
        + (f", with uncommitted changes to {', '.join(c['code']['modified'])}" if c["code"]["modified"] else "")
        + f" (sha256 of the measured sources {c['code']['sha256']})",
        f"- machine: {c['cpu_count']} cores (os.cpu_count), {c['ram_gb']} GB RAM, {c['platform']}",
        f"- Spark {c['spark_version']}, master `{c['master']}`, spark.sql.shuffle.partitions={c['shuffle_partitions']}, "
        f"AQE={c['adaptive']}, driver memory {c['driver_memory']} ({c['jvm_xmx']}, JVM max heap {c['jvm_max_heap_mb']} MB)",
        f"- Java: {c['java']}; Python {c['python']}",
        f"- data: N epochs x {c['operators']} operators ({c['edges']} edges, 2 sources, fan-in and fan-out) "
        f"x {c['instances_per_operator']} instances; one warm SparkSession for all sizes; repeat={report['repeat']} "
        "(best and median of the repeats; rows/s from the best)",
        "- phases: `read` = input DataFrame to the noop sink; `policy` = decisions (read + DS2) to the noop sink; "
        "`end-to-end`: the run as production makes it, into a fresh store: from the store, "
        "`engine.spark.run.decide_stored_epochs` (each block read, decided and staged in one task, "
        "`engine.spark.blocks`, then committed); from a rates log, `engine.spark.rates_log.decide_rates_log` "
        "(its byte ranges parsed and numbered in parallel into blocks, then the same). Both check the inputs "
        "before the commit. "
        "`decide` and `write` rows are differences of medians (derived, not measured).",
        f"- memory: RSS sampled every {int(c['sample_interval_s'] * 1000)} ms; peak JVM / Python / JVM + Python over the "
        "measurement (the JVM heap is garbage-collected before each one; a JVM keeps committed heap, so peaks "
        "within one session also reflect earlier runs). Cold run: the spark-submit JVM(s).",
        f"- shared machine: before each measurement the benchmark waited (at most {report['quiet']['max_wait_s']:g} s) "
        f"until other processes used <= {report['quiet']['max_others_load_cores']:g} cores",
        "- CPU s: CPU time of the measured processes (JVM + Python) in the best run; others' CPU s: busy CPU time "
        "of everything else on the machine meanwhile (competing load; the wall times are only comparable when it is ~0)",
        "",
        "| size (rows) | path | phase | best s | median s | rows/s | CPU s | others' CPU s "
        "| peak JVM MB | peak Python MB | peak sum MB |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in report["measurements"]:
        lines.append(
            f"| {m['size']:,} | {m['path']} | {m['phase']} | {m['best_s']:.3f} | {m['median_s']:.3f} | "
            f"{_fmt(m['rows_per_s'])} | {_fmt(m['cpu_s'], '.1f')} | {_fmt(m['other_cpu_s'], '.1f')} | "
            f"{_fmt(m['peak_jvm_mb'])} | {_fmt(m['peak_python_mb'])} | {_fmt(m['peak_total_mb'])} |"
        )
    lines += ["", "Derived (differences of medians):", "", "| size (rows) | path | step | seconds |", "|---:|---|---|---:|"]
    for d in report["derived"]:
        lines.append(f"| {d['size']:,} | {d['path']} | {d['step']} | {d['seconds']:.3f} |")
    lines += [
        "",
        "Data sets (cached under data/bench/):",
        "",
        "| rows | epochs | store files | store MB | rates log MB | generated in s |",
    ]
    lines.append("|---:|---:|---:|---:|---:|---:|")
    for g in report["datasets"]:
        lines.append(
            f"| {g['rows']:,} | {g['epochs']:,} | {g['store_files']} | {g['store_bytes'] / 1e6:.1f} | "
            f"{g['rates_log_bytes'] / 1e6:.1f} | {g['generate_s']:.1f}{' (cached)' if g['cached'] else ''} |"
        )
    sizes = sorted({m["size"] for m in report["measurements"] if m["path"] in ("store", "rates-log")})
    if sizes:
        lines += ["", "Peak memory per size (max over the phases, MB; JVM + Python):", ""]
        lines.append("| path | " + " | ".join(f"{n:,} rows" for n in sizes) + " |")
        lines.append("|---|" + "---:|" * len(sizes))
        for path_kind in ("store", "rates-log"):
            peaks = [
                max(
                    (m["peak_total_mb"] for m in report["measurements"] if m["size"] == n and m["path"] == path_kind),
                    default=None,
                )
                for n in sizes
            ]
            lines.append(f"| {path_kind} | " + " | ".join(_fmt(v) for v in peaks) + " |")
    if report.get("targets"):
        lines += ["", "Targets (warm session, end-to-end, best):", ""]
        for t in report["targets"]:
            lines.append(f"- {t['what']}: {t['seconds']:.2f} s vs target {t['target_s']} s: {'met' if t['met'] else 'NOT met'}")
    write_results("policy", report, "\n".join(lines), results)


# ---------------------------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for item in text.split(","):
        value = float(item)
        if value != int(value) or value < 1:
            raise argparse.ArgumentTypeError(f"bad size {item!r}")
        sizes.append(int(value))
    return sizes


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1e5,1e6,1e7"), help="rows, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (best and median reported)")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold bin/ds2-policy run")
    parser.add_argument(
        "--quiet-load", type=float, default=0.5, help="before each measurement, wait until other processes use <= this many cores"
    )
    parser.add_argument("--quiet-wait", type=float, default=60.0, help="... but at most this many seconds (0: never wait)")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="folder for policy.json and policy.md (default: %(default)s)"
    )
    parser.add_argument("--driver-memory", help="spark.driver.memory for the warm session (default: conf/spark, 2g)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    # The same environment bin/ds2-policy gives spark-submit (conf/spark: driver memory, logging).
    os.environ.setdefault("SPARK_CONF_DIR", str(ROOT / "conf" / "spark"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:  # no progress bars on stderr; nothing else differs from the job's session
        submit = ["--conf", "spark.ui.showConsoleProgress=false"]
        if args.driver_memory:
            submit += ["--driver-memory", args.driver_memory]
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join([*submit, "pyspark-shell"])
    elif args.driver_memory:
        parser.error("--driver-memory cannot be combined with PYSPARK_SUBMIT_ARGS in the environment")

    topo = topology()
    datasets = []
    for rows in [WARMUP_ROWS, *args.sizes]:
        print(f"bench: data set of {rows:,} rows ...", flush=True)
        meta = generate(rows)
        how = "cached" if meta["cached"] else f"generated in {meta['generate_s']:.1f} s"
        print(
            f"bench:   {meta['epochs']:,} epochs, store {meta['store_bytes'] / 1e6:.1f} MB in {meta['store_files']} files, "
            f"rates log {meta['rates_log_bytes'] / 1e6:.1f} MB, {how}",
            flush=True,
        )
        if rows != WARMUP_ROWS:
            datasets.append(meta)

    from autoscaler.engine.spark.session import policy_session

    started = time.perf_counter()
    spark = policy_session(app_name="ds2-policy-bench", master="local[*]")
    session_s = time.perf_counter() - started
    cond = conditions(spark)
    cond["session_start_s"] = round(session_s, 3)
    print(f"bench: session up in {session_s:.1f} s: {json.dumps(cond)}", flush=True)
    bench = Bench(spark, topo, args.quiet_load, args.quiet_wait)

    started = time.perf_counter()
    bench.quiet_wait_s, quiet_wait_s = 0.0, bench.quiet_wait_s  # no waiting for the warm-up
    for path_kind in ("store", "rates-log"):
        for phase in PHASES[path_kind]:
            bench.phase(path_kind, WARMUP_ROWS, phase)
    compared = bench.equivalence(WARMUP_ROWS)
    # The JIT needs more than 100 epochs: also run the policy once over the smallest measured size.
    for path_kind in ("store", "rates-log"):
        bench.phase(path_kind, min(args.sizes), PHASES[path_kind][-1])
    bench.quiet_wait_s = quiet_wait_s
    print(f"bench: warm-up done in {time.perf_counter() - started:.1f} s (both inputs agree on {compared} decisions)", flush=True)

    measurements, derived, targets = [], [], []
    for rows in args.sizes:
        for path_kind in ("store", "rates-log"):
            medians = {}
            for phase in PHASES[path_kind]:
                runs = []
                for _ in range(args.repeat):
                    seconds, figures = bench.phase(path_kind, rows, phase)
                    runs.append((seconds, figures))
                    print(
                        f"bench: {rows:>12,} {path_kind:<9} {phase:<10} {seconds:8.3f} s {rows / seconds:>12,.0f} rows/s  "
                        f"CPU {figures['cpu_s']:.1f} s (others {figures['other_cpu_s']:.1f} s)  "
                        f"peak JVM {figures['peak_jvm_mb']:,.0f} MB (start {figures['start_jvm_mb']:,.0f}) "
                        f"Python {figures['peak_python_mb']:,.0f} MB",
                        flush=True,
                    )
                record = summarise(rows, path_kind, phase, runs)
                medians[phase] = record["median_s"]
                measurements.append(record)
            if "policy" not in medians:
                continue  # a backfill from the store is one run: read, decide and write per block
            for step, seconds in (
                ("decide = policy - read", medians["policy"] - medians["read"]),
                ("write = end-to-end - policy", medians["end-to-end"] - medians["policy"]),
            ):
                derived.append({"size": rows, "path": path_kind, "step": step, "seconds": round(seconds, 3)})
        if rows == 10**7:
            best = {(m["path"], m["phase"]): m["best_s"] for m in measurements if m["size"] == rows}
            for path_kind, target in (("store", 6), ("rates-log", 12)):  # issue 22
                seconds = best[(path_kind, "end-to-end")]
                what = f"10^7 rows, {path_kind} path"
                targets.append({"what": what, "seconds": seconds, "target_s": target, "met": seconds <= target})

    spark.stop()
    if not args.skip_cold:
        print("bench: cold bin/ds2-policy for one live epoch ...", flush=True)
        cold = cold_run(min(args.sizes), args.repeat, args.quiet_load, args.quiet_wait)
        print(
            f"bench: cold run {cold['best_s']:.2f} s (best), CPU {cold['cpu_s']:.1f} s, peak JVM {cold['peak_jvm_mb']:,.0f} MB",
            flush=True,
        )
        measurements.append(cold)

    report = {
        "argv": argv,
        "repeat": args.repeat,
        "quiet": {"max_others_load_cores": args.quiet_load, "max_wait_s": args.quiet_wait},
        "conditions": cond,
        "datasets": datasets,
        "measurements": measurements,
        "derived": derived,
        "targets": targets,
    }
    write_reports(report, args.results)
    print(f"bench: wrote {args.results / 'policy.json'} and {args.results / 'policy.md'}", flush=True)
    print((args.results / "policy.md").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
