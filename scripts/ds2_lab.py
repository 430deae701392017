"""The policy lab: the same workloads, several policies, measured against ground truth.

    .venv/bin/python scripts/ds2_lab.py run SCENARIO.yaml --policy KIND[-RUN][,...] --out DIR [--inputs oracle]
    .venv/bin/python scripts/ds2_lab.py sweep [SCENARIO.yaml ...] [--attempt LABEL --why TEXT] [--inputs oracle]
                                              [--policies ds2_plus --runs 3]
    .venv/bin/python scripts/ds2_lab.py compare ATTEMPT|DIR ...
    .venv/bin/python scripts/ds2_lab.py index    # benchmarks/lab/README.md: every attempt and run
    .venv/bin/python scripts/ds2_lab.py replay data/lab/<scenario>-<kind> ...   # what a policy change moves
    .venv/bin/python scripts/ds2_lab.py ground-truth SCENARIO.yaml ... [--remeasure]

``run`` is a closed loop on this machine: its own Flink, the warm Spark engine, PostgreSQL and
Airflow (scheduler, triggerer, ...) with one registered job per policy, all on the scenario's
load; the real DAG collects, validates, decides and rescales every interval. Several policies run
side by side on one cluster (one job each) unless an operator is CPU-bound (then one after the
other: they would compete for the cores). Each policy's ``DIR/<policy>/`` (``DIR`` itself for one
policy) gets ``result.json``, ``report.md`` and ``chart.png``; a finished result is kept and
skipped, so an interrupted sweep resumes. ``sweep`` runs every scenario under
benchmarks/scenarios/ with every kind (or ``--policies``), ``--runs`` rounds of every kind on every
scenario, one round after the other (run labels ``kind``, ``kind-2``, ...; ``compare`` adds their
median and range), each run into ``benchmarks/lab/runs/<scenario>/<kind>/<attempt>[-<round>]/`` (``--attempt``;
it records each run's attempt and commit in the lab's ``index.json``, :mod:`autoscaler.lab.index`), and ends
with ``compare``. Ground truth curves that
a scenario needs and the cache lacks are measured first on the same cluster.

Inputs are **honest** by default: the policies see what production sees, each source's records
out plus the growth of its FLIP-33 ``pendingRecords``. ``--inputs oracle`` feeds them the test
job's own ``scheduledRate`` gauge instead (the exact offered load, which no real source has):
an upper bound, recorded as ``"inputs": "oracle"`` in each result and never mixed with honest ones.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

# This folder (ds2_local's stack) and benchmarks/ (the conditions every results file records).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ds2_lab_measure import ensure_ground_truth, interference
from ds2_lab_results import LAB, OPERATORS, SCENARIOS, rejudge, run_epochs, write_result
from ds2_local import JAR, PARALLELISM_ARGS, ROOT, Stack, free_port, log
from harness import machine

from autoscaler.config.options import MAX_LATE_EPOCHS, POLICY_KINDS
from autoscaler.errors import InputError
from autoscaler.lab import ground_truth as gt
from autoscaler.lab.bounds import floors_table
from autoscaler.lab.index import (
    attempt_results,
    index_md,
    parse_run_label,
    record_attempt,
    results_of,
    run_dir,
    run_label,
    validate_attempt,
)
from autoscaler.lab.replay import replay
from autoscaler.lab.report import compare_table, runs_table
from autoscaler.lab.scenario import Scenario, job_settings, load_scenario
from autoscaler.lab.targets import BASELINES, tally_table, targets_table

GROUND_TRUTH = ROOT / "benchmarks" / "ground-truth.json"
INPUTS = ("honest", "oracle")
STARTUP_S = 90  # Spark and Airflow start before the first epoch (a loaded machine needs margin)
BASELINE_RUNS = "2026-11-25-honest"  # the attempt of the baselines' last runs on real Flink
WORK = ROOT / "data" / "lab"  # the stacks' folders (Flink, Airflow, the store), kept after a run


def job_entry(scenario: Scenario, policy: str, job: str, start: datetime, base: list[str], savepoints: Path,
              inputs: str) -> dict:  # fmt: skip
    return {
        "name": job,
        "flink_job_name": job,
        "jar": str(JAR),
        "base_args": base,
        "parallelism_args": PARALLELISM_ARGS,
        "savepoint_dir": f"file://{savepoints}",
        **job_settings(scenario, parse_run_label(policy)[0], inputs),
        "start_date": start.isoformat(),
    }


def lab_job(scenario: Scenario, policy: str) -> str:
    """The registered job (and Flink job name) of ``policy``'s run of ``scenario``."""
    return f"lab-{scenario.name}-{policy}"


def run_side_by_side(
    scenario: Scenario,
    policies: list[str],
    outs: dict[str, Path],
    truth: gt.GroundTruth,
    work: Path,
    startup_s: float,
    inputs: str,
    attempt: str | None = None,
) -> None:
    """One closed loop with one job per policy on one cluster; results into ``outs[policy]`` (indexed under
    ``attempt`` when given)."""
    from autoscaler.record import loop_report

    folder = work / f"{scenario.name}-{'-'.join(policies)}"
    if folder.exists():
        Stack(folder, 0, 0, {}).down()
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    env = {"DS2_DATA_DIR": str(folder), "DS2_JOBS_CONFIG": str(folder / "jobs.yaml"),
           "FLINK_SLOTS": str(8 * (len(policies) + 1))}  # fmt: skip
    stack = Stack(folder, free_port(8081), free_port(8080), env)
    t0 = time.monotonic()
    try:
        log(f"{scenario.name}: starting Flink ({stack.flink_url}) for {', '.join(policies)}")
        stack.flink_up()
        ensure_ground_truth(stack, [scenario], truth)
        first = math.ceil((time.time() + startup_s) / scenario.interval_s) * scenario.interval_s
        start = datetime.fromtimestamp(first, tz=UTC)
        jobs, entries = {}, []
        for policy in policies:
            job = lab_job(scenario, policy)
            base = scenario.job_args(job, int(first * 1000))
            stack.submit([*base, *scenario.parallelism_args()])
            jobs[policy] = job
            entries.append(job_entry(scenario, policy, job, start, base, folder / "flink" / "savepoints", inputs))
        (folder / "jobs.yaml").write_text(yaml.safe_dump({"version": 1, "jobs": entries}, sort_keys=False))
        log(f"{scenario.name}: jobs submitted; the load starts at {start:%H:%M:%S}; starting Spark and Airflow")
        stack.spark_up()
        stack.airflow_up()
        end = first + scenario.duration_s
        epochs = run_epochs(scenario, first)
        seen: set[tuple[str, int]] = set()
        # The last epochs' runs may come late (up to max_late_epochs intervals, in order): wait for them.
        while time.time() < end + (3 + MAX_LATE_EPOCHS.default) * scenario.interval_s:
            time.sleep(3)
            done = True
            for policy, job in jobs.items():
                for row in loop_report.epoch_rows(folder / "store", job, epochs, scenario.interval_s):
                    finished = row.outcome or row.verdict == "quarantined"
                    if finished and (policy, row.epoch) not in seen:
                        seen.add((policy, row.epoch))
                        done_of = f"[{len(seen)}/{len(epochs) * len(jobs)}]"  # how far the scenario is
                        print(f"{done_of:>9} {policy:<12}" + loop_report.table([row], OPERATORS).splitlines()[-1], flush=True)
                done = done and all((policy, e) in seen for e in epochs)
            if time.time() >= end and done:
                break
        for policy, job in jobs.items():
            rows = loop_report.epoch_rows(folder / "store", job, epochs, scenario.interval_s)
            conditions = {**machine(), "wall_s": round(time.monotonic() - t0), "store": str(folder / "store"), "job": job}
            write_result(scenario, policy, inputs, rows, truth, start, outs[policy], conditions, attempt)
    finally:
        log(f"{scenario.name}: stopping Airflow, Spark, PostgreSQL and Flink (data stays in {folder})")
        stop(stack)


def run_scenario(
    path: Path,
    policies: list[str],
    outs: dict[str, Path],
    truth: gt.GroundTruth,
    work: Path = WORK,
    startup_s: float = STARTUP_S,
    inputs: str = "honest",
    one_at_a_time: bool = False,
    attempt: str | None = None,
) -> None:
    """Each of ``policies`` on the scenario at ``path``, its results into ``outs[policy]``; a finished one is kept."""
    scenario = load_scenario(path)
    todo = [p for p in policies if not (outs[p] / "result.json").exists()]
    if not todo:
        log(f"{scenario.name}: every result exists, skipped ({', '.join(policies)})")
        return
    cpu_bound = any(c.mode == "cpu" for c in scenario.operators.values())
    groups = [[p] for p in todo] if cpu_bound or one_at_a_time else [todo]
    for group in groups:
        run_side_by_side(scenario, group, outs, truth, work, startup_s, inputs, attempt)


def stop(stack: Stack) -> None:
    """``stack.down()`` with SIGTERM held until it is done: a second signal must not leave half a stack running."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        stack.down()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _stop_on_term(signum: int, _frame: object) -> None:
    # A sweep runs for hours in the background, where SIGINT is ignored: SIGTERM unwinds like Ctrl-C,
    # so the running scenario's stack (Flink, Spark, Airflow, PostgreSQL) is stopped by its pids.
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    signal.signal(signal.SIGTERM, _stop_on_term)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="one scenario in a closed loop under one or more policies")
    r.add_argument("scenario", type=Path)
    r.add_argument("--policy", default="ds2", help="a kind (or kind-<run>), or several joined by commas")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--work", type=Path, default=WORK, help=f"where the stack's folders go (default {WORK})")
    r.add_argument("--startup", type=float, default=STARTUP_S, help="seconds allowed for Spark and Airflow to start")
    s = sub.add_parser("sweep", help="every scenario under all three policies (resumable), then compare")
    for p in (r, s):
        p.add_argument(
            "--inputs",
            choices=INPUTS,
            default="honest",
            help="honest (records out + pendingRecords growth, default) or oracle (the test job's rate gauge)",
        )
    s.add_argument("scenarios", type=Path, nargs="*")
    s.add_argument("--attempt", default=None,
                   help="the attempt's label, its runs in benchmarks/lab/runs/<scenario>/<kind>/<attempt>[-<round>] "
                        "(default sweep-<commit>: a rerun resumes)")  # fmt: skip
    s.add_argument("--why", default=None, help="what the attempt is for, a line (its title in the lab's index)")
    s.add_argument("--policies", help="kinds to run, joined by commas (default: every kind)")
    s.add_argument("--runs", type=int, default=1, help="rounds: runs of each kind per scenario (labels kind, kind-2, ...)")
    s.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="every run on its own stack, one after the other (jobs that drain a backlog at full speed side by side "
        "saturate 2 cores: their epochs' runs come too late and are lost)",
    )
    c = sub.add_parser("compare", help="results side by side: scenario x policy")
    c.add_argument("dirs", nargs="+", help="attempts' labels or folders")
    t = sub.add_parser("targets", help="a kind's runs against the lab's targets, per scenario (✓ or ✗)")
    t.add_argument("kind")
    t.add_argument("dirs", nargs="+", help="attempts' labels or folders")
    y = sub.add_parser("tally", help="the score: every kind's targets by majority over its runs, per scenario")
    y.add_argument("kind", help="the kind under test, read from dirs (the baselines are read from --baselines)")
    y.add_argument("dirs", nargs="+", help="attempts' labels or folders")
    y.add_argument("--baselines", default=BASELINE_RUNS, help="the baselines' runs: an attempt's label or a folder")
    f = sub.add_parser("floors", help="per scenario, the cheapest any policy can be while it meets the other targets")
    f.add_argument("scenarios", type=Path, nargs="*")
    f.add_argument("--baselines", default=BASELINE_RUNS, help="the baselines' runs (their under): an attempt or a folder")
    f.add_argument("--no-drain", action="store_true", help="leave out the backlog and the drain target (a lower floor)")
    f.add_argument(
        "--scale-down-wait",
        type=float,
        default=0.0,
        help="seconds of the lower load seen before a scale-down (a policy's scale-down wait)",
    )
    sub.add_parser("index", help=f"write {LAB / 'README.md'}: every attempt, what it was, its runs and commits")
    sub.add_parser("interference", help="measure whether side-by-side jobs disturb each other")
    j = sub.add_parser("rejudge", help="recompute finished runs' figures from their stores")
    j.add_argument("dirs", nargs="+", help="attempts' labels or folders")
    rp = sub.add_parser("replay", help="decide stored runs again: the epochs whose proposals a policy change moves")
    rp.add_argument("runs", type=Path, nargs="+", help=f"runs' stack folders (default place: {WORK}/<scenario>-<kind>)")
    g = sub.add_parser("ground-truth", help="measure the ground-truth curves these scenarios need")
    g.add_argument("scenarios", type=Path, nargs="+")
    g.add_argument("--remeasure", action="store_true", help=f"measure every curve they need anew, {gt.SAMPLES} samples a point")
    for p in (r, s, g, j, f):
        p.add_argument("--ground-truth", type=Path, default=GROUND_TRUTH, help="the curves' cache (JSON)")
    args = parser.parse_args()
    try:
        return command(args)
    except InputError as exc:  # a bad label, attempt or folder: named, never a traceback
        raise SystemExit(str(exc)) from None


def command(args: argparse.Namespace) -> int:
    """Carry out the parsed command."""
    if args.command == "index":
        (LAB / "README.md").write_text(index_md(LAB), encoding="utf-8")
        print(LAB / "README.md")
        return 0
    if args.command == "compare":
        results = [json.loads(p.read_text()) for p in results_of(LAB, args.dirs)]
        print(compare_table(results))
        print("\n" + runs_table(results) if runs_table(results) else "", end="")
        return 0
    if args.command == "targets":
        print(targets_table([json.loads(p.read_text()) for p in results_of(LAB, args.dirs)], args.kind))
        return 0
    if args.command == "tally":
        runs = [json.loads(p.read_text()) for p in results_of(LAB, args.dirs)]
        base = [r for p in results_of(LAB, [args.baselines]) if (r := json.loads(p.read_text()))["policy"] in BASELINES]
        if not base:
            raise SystemExit(f"{args.baselines}: none of its runs is a baseline's ({', '.join(BASELINES)})")
        honest = [r for r in runs if r.get("inputs") == "honest"]
        print(tally_table(honest + [b for b in base if b.get("inputs") == "honest"], base, [args.kind, *BASELINES]))
        return 0
    if args.command == "replay":
        moved = 0
        for folder in args.runs:
            run = replay(folder / "store")
            print(f"{folder.name}: {run.epochs} epochs decided, proposals moved in {len(run.moved)}")
            print("".join(f"  {m.words()}\n" for m in run.moved), end="")
            moved += len(run.moved)
        return 1 if moved else 0
    if args.command == "interference":
        stack = Stack(WORK / "interference", free_port(8081), 0, {"FLINK_SLOTS": "32"})
        interference(ROOT / "benchmarks" / "results" / "lab-interference", stack,
                     load_scenario(SCENARIOS / "step-up-down.yaml"), stop)  # fmt: skip
        return 0
    truth = gt.GroundTruth(args.ground_truth)
    if args.command == "run":
        policies = args.policy.split(",")
        for label in policies:
            parse_run_label(label)
        if args.out.resolve().is_relative_to(LAB.resolve()):
            raise SystemExit(f"--out {args.out}: the lab's runs are made by 'sweep --attempt', which indexes them")
        outs = {p: args.out / p if len(policies) > 1 else args.out for p in policies}
        run_scenario(args.scenario, policies, outs, truth, args.work, args.startup, args.inputs)
        return 0
    if args.command == "rejudge":
        for path in results_of(LAB, args.dirs):
            rejudge(path, truth)
        return 0
    if args.command == "floors":
        scenarios = [load_scenario(p) for p in args.scenarios or sorted(SCENARIOS.glob("*.yaml"))]
        results = [json.loads(p.read_text()) for p in results_of(LAB, [args.baselines])]
        print(floors_table(scenarios, truth, results, drain=not args.no_drain, scale_down_wait_s=args.scale_down_wait))
        return 0
    if args.command == "ground-truth":
        scenarios = [load_scenario(p) for p in args.scenarios]
        stack = Stack(WORK / "ground-truth", free_port(8081), 0, {"FLINK_SLOTS": "16"})
        try:
            stack.flink_up()
            ensure_ground_truth(stack, scenarios, truth, again=args.remeasure)
        finally:
            stop(stack)
        for scenario in scenarios:
            print(f"{scenario.name}: knife edges: {'; '.join(gt.knife_edges(scenario, truth)) or 'none'}")
        return 0
    paths = args.scenarios or sorted(SCENARIOS.glob("*.yaml"))
    attempt = args.attempt or f"sweep-{machine()['commit'][:7]}"  # a run from changed files is not resumable as one
    try:
        validate_attempt(attempt)
    except InputError as exc:
        raise SystemExit(f"--attempt: {exc}") from None
    record_attempt(LAB, attempt, args.why)
    kinds = args.policies.split(",") if args.policies else list(POLICY_KINDS)
    for kind in kinds:
        parse_run_label(kind)
    # Round by round (every kind on every scenario once, then again): an interrupted sweep holds whole rounds.
    for n in range(1, args.runs + 1):
        labels = [run_label(kind, n) for kind in kinds]
        for path in paths:
            scenario = load_scenario(path)
            outs = {label: run_dir(LAB, scenario.name, kind, attempt, n) for kind, label in zip(kinds, labels, strict=True)}
            run_scenario(path, labels, outs, truth, inputs=args.inputs, one_at_a_time=args.one_at_a_time, attempt=attempt)
    print(compare_table([json.loads(p.read_text()) for p in attempt_results(LAB, attempt)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
