"""The simulated lab: the production policy and decide code in a closed loop against a model of the job.

    .venv/bin/python scripts/ds2_sim.py calibrate      # benchmarks/sim/calibration.json from the real runs
    .venv/bin/python scripts/ds2_sim.py fidelity       # every honest real run replayed: benchmarks/sim/fidelity.md (and .json)
    .venv/bin/python scripts/ds2_sim.py run SCENARIO.yaml --kind KIND [--seed N] [--set key=value ...]
    .venv/bin/python scripts/ds2_sim.py sweep [--frontier] [--seeds N]  # benchmarks/sim/sweep.md or frontier.md, .json, PNGs
    .venv/bin/python scripts/ds2_sim.py targets [--before frontier]  # the default's targets: benchmarks/sim/targets.md
    .venv/bin/python scripts/ds2_sim.py guard [--record]   # the small sweep make test holds each kind's point to
    .venv/bin/python scripts/ds2_sim.py confirm <attempt>   # its real runs against the predictions

``fidelity`` replays each real run with the policy it ran: the run's commit is the one it recorded
(its ``conditions``), else the one the lab's index names for it (``benchmarks/lab/index.json``). Runs are
grouped by the content of that commit's policy, decide and config code; each group runs in a tree that is
today's ``include/`` with those three folders as they were (model, collector and judge stay today's).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from autoscaler.errors import InputError  # noqa: E402
from autoscaler.lab.index import attempt_results, commit_of  # noqa: E402
from autoscaler.lab.sim import fidelity as F  # noqa: E402
from autoscaler.lab.sim import sweep as S  # noqa: E402
from autoscaler.lab.sim.calibration import calibrate  # noqa: E402
from autoscaler.lab.sim.plot import frontier_png  # noqa: E402
from autoscaler.lab.sim.repeatability import repeatability, repeatability_md, simulator_on  # noqa: E402
from autoscaler.lab.sim.report import fidelity_md, scenario_md, sweep_md  # noqa: E402

BENCH = ROOT / "benchmarks"
SIM = BENCH / "sim"
LAB = BENCH / "lab"
CACHE = ROOT / ".cache" / "sim-code"
POLICY_CODE = ("include/autoscaler/policy", "include/autoscaler/decide", "include/autoscaler/config")
HEX = re.compile(r"[0-9a-f]{7,40}")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def code_commit(short: bool = False) -> str:
    """HEAD, with ``+changes`` when the code under test differs from it (a sweep run before its commit)."""
    head = git("rev-parse", *(["--short"] if short else []), "HEAD")
    return head + "+changes" if git("status", "--porcelain", "--", "include", "scripts") else head


def run_commit(result: Path) -> str:
    """The commit whose code a real run ran (see the module's doc)."""
    data = json.loads(result.read_text())
    recorded = data.get("conditions", {}).get("commit") or commit_of(LAB, result.parent)
    if not recorded:
        raise SystemExit(f"{result.parent}: no commit recorded for this run, in its conditions or in {LAB / 'index.json'}")
    return git("rev-parse", recorded.removesuffix("+changes"))


def code_key(commit: str) -> str:
    trees = [git("rev-parse", f"{commit}:{path}") for path in POLICY_CODE]
    return hashlib.sha1(" ".join(trees).encode()).hexdigest()[:12]


# Modules split out of config/options.py since (PolicyOptions on 2026-11-27, Option on 2026-11-28): in a tree of a
# commit before the split, each re-exports the old options module, where today's other modules find those names.
SPLIT_FROM_OPTIONS = ("include/autoscaler/config/policy_options.py", "include/autoscaler/config/option.py")


def hybrid_tree(commit: str, key: str) -> Path:
    """Today's include/ with the policy, decide and config code of ``commit`` (today's modules it lacks stay, but
    those split out of its options module since re-export it: :data:`SPLIT_FROM_OPTIONS`)."""
    tree = CACHE / key
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(ROOT / "include", tree / "include", ignore=shutil.ignore_patterns("__pycache__"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, *POLICY_CODE],
                             check=True, capture_output=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        tar.extractall(tree, members=members, filter="data")
        old = {m.name for m in members}
    for split in SPLIT_FROM_OPTIONS:
        if split not in old:
            (tree / split).write_text("from autoscaler.config.options import *  # noqa: F403 (ds2_sim.hybrid_tree)\n")
    for module, names in CARRIED.items():
        carry(ROOT / module, tree / module, names)
    # A commit whose policy/ held the Spark engine (before 2026-11-27) ran with the Arrow windows then in policy/:
    # today's, which engine/ holds now.
    if "include/autoscaler/policy/spark/decisions.py" in old and "include/autoscaler/policy/windows.py" not in old:
        (tree / "include/autoscaler/policy/windows.py").write_text("from autoscaler.engine.windows import *  # noqa: F403\n")
    return tree


def replay_in_tree(tree: Path, paths: list[Path], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """The replay worker over ``paths`` with the ``autoscaler`` package of ``tree`` (one JSON line per run).

    The tree lies outside any checkout, where the config code (since b679e2a) finds no jobs file to take a
    simulated job's relative paths against: it is told the checkout's, as a deployment's setting would."""
    env = {"PYTHONPATH": str(tree / "include"), "PATH": "/usr/bin:/bin", "DS2_JOBS_CONFIG": str(ROOT / "include" / "jobs.yaml")}
    return subprocess.run([sys.executable, "-m", "autoscaler.lab.sim.replay_runs", str(BENCH), *map(str, paths)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)  # fmt: skip


# Names today's other stages import from the policy code that an older commit's lacked: their definitions are
# carried over as they are today (data, not policy).
CARRIED = {
    "include/autoscaler/policy/base.py": ("BASIS_WORDS", "columns_for", "sizes_for_measured_restarts"),
    "include/autoscaler/config/options.py": ("MIN_OWN_RESCALES",),
}


def _top_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []


def carry(today: Path, old: Path, names: tuple[str, ...]) -> None:
    """Append to ``old`` today's top-level definitions of those ``names`` it does not define."""
    text = old.read_text()
    defined = {name for node in ast.parse(text).body for name in _top_names(node)}
    source = today.read_text()
    for node in ast.parse(source).body:
        if any(n in names and n not in defined for n in _top_names(node)):
            text += "\n\n# carried by ds2_sim.hybrid_tree\n" + ast.get_source_segment(source, node) + "\n"
    old.write_text(text)


def cmd_calibrate(args: argparse.Namespace) -> int:
    reports = [p.with_name("report.md") for p in F.honest_runs(BENCH)]
    calibration = calibrate(reports, args.decision_latency, args.latency_source, 2.0)
    SIM.mkdir(parents=True, exist_ok=True)
    (SIM / "calibration.json").write_text(calibration.to_json())
    print(f"{SIM / 'calibration.json'}: {calibration.sources}")
    return 0


def cmd_fidelity(args: argparse.Namespace) -> int:
    runs = F.honest_runs(BENCH)
    groups: dict[str, tuple[str, list[Path]]] = {}
    for path in runs:
        commit = run_commit(path)
        key = code_key(commit)
        groups.setdefault(key, (commit, []))[1].append(path)
    print(f"{len(runs)} honest real runs, {len(groups)} policy versions", flush=True)

    def replay(item: tuple[str, tuple[str, list[Path]]]) -> list[dict]:
        key, (commit, paths) = item
        tree = hybrid_tree(commit, key)
        done = replay_in_tree(tree, paths)
        out = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if len(out) != len(paths):
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            seen = {o["run"] for o in out}
            out += [{"run": str(p.parent.relative_to(BENCH)), "error": tail} for p in paths
                    if str(p.parent.relative_to(BENCH)) not in seen]  # fmt: skip
        for o in out:
            o["commit"] = commit[:7]
        shutil.rmtree(tree, ignore_errors=True)
        return out

    with ThreadPoolExecutor(args.workers) as pool:
        results = [r for group in pool.map(replay, sorted(groups.items())) for r in group]
    results.sort(key=lambda r: r["run"])
    (SIM / "fidelity.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (SIM / "fidelity.md").write_text(fidelity_md(results))
    # The ceiling: how often repeated real runs of the same code agree with each other by the same checks.
    code = {p: key for key, (_, paths) in groups.items() for p in paths}
    rep = repeatability(runs, code.__getitem__)
    text = repeatability_md(rep, BENCH, simulator_on(rep, results, BENCH))
    (SIM / "repeatability.md").write_text("# The real lab against itself\n\n" + text)
    print((SIM / "fidelity.md").read_text().split("\n\n")[1])
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(BENCH))
    from harness import machine

    paths = sorted((SIM / "scenarios").glob("*/*.yaml"))
    if args.families:
        paths = [p for p in paths if p.parent.name in args.families.split(",")]
    chosen = S.variants(args.frontier)
    seeds = range(1, args.seeds + 1)
    t0 = time.time()
    records = S.sweep(paths, chosen, seeds, BENCH / "ground-truth.json", SIM / "calibration.json", args.workers)
    wall = time.time() - t0
    epochs = sum(r["epochs"] for r in records)
    cpu = sum(r["cpu_s"] for r in records)
    name = args.name or ("frontier" if args.frontier else "sweep")
    hours = sum(r["hours"] for r in records)
    lines = [f"{len(paths)} scenarios ({', '.join(sorted({p.parent.name for p in paths}))}) x {len(chosen)} variants x "
             f"{len(seeds)} seeds = {len(records)} runs, {hours:,.0f} simulated hours, {epochs:,} epochs;",
             f"wall {wall:.0f} s on {args.workers or os.cpu_count()} processes ({cpu:.0f} CPU-s in the runs, "
             f"{1000 * cpu / max(epochs, 1):.1f} ms per epoch); commit {code_commit(short=True)}; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             "Cost is instance-seconds over the floor (an oracle that runs the fewest sustaining instances every "
             "epoch, without restarts); late is the time the sources owed more than a second of input."]  # fmt: skip
    conditions = {**machine(), "wall_s": round(wall, 1), "runs": len(records), "epochs": epochs, "cpu_s": round(cpu, 1),
                  "commit": code_commit(), "seeds": len(seeds),
                  "scenarios": [str(p.relative_to(ROOT)) for p in paths], "lines": lines}  # fmt: skip
    write_sweep(name, records, conditions)
    print("\n".join(lines))
    print(sweep_md(name, {"all": S.points(records)}, []))
    return 0


def write_sweep(name: str, records: list[dict], conditions: dict) -> None:
    """A sweep's JSON (its runs and conditions), its Markdown tables and its frontier PNGs under benchmarks/sim/."""
    families = {"all": S.points(records), **{f: S.points(records, f) for f in ("train", "check")}}
    (SIM / f"{name}.json").write_text(json.dumps({"conditions": conditions, "points": families, "runs": records},
                                                 indent=1, default=str) + "\n")  # fmt: skip
    text = sweep_md(f"Simulated sweep: {name}", families, conditions["lines"]) + "\n" + scenario_md(S.by_scenario(records))
    (SIM / f"{name}.md").write_text(text)
    for family, points in families.items():
        frontier_png(points, f"{name}: {family} scenarios ({conditions['seeds']} seeds)", SIM / f"{name}-{family}.png")


def cmd_report(args: argparse.Namespace) -> int:
    """Write a sweep's tables and PNGs again from its JSON (after the report's form changed)."""
    data = json.loads((SIM / f"{args.name}.json").read_text())
    write_sweep(args.name, data["runs"], data["conditions"])
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    """The default kind's targets per scenario (benchmarks/sim/targets.md), from a sweep's JSON."""
    from autoscaler.lab.scenario import load_scenario
    from autoscaler.lab.sim.targets import figures, scenario_targets, targets_md

    runs = json.loads((SIM / f"{args.name}.json").read_text())["runs"]
    intervals = {f"{p.parent.name}/{p.stem}": load_scenario(p).interval_s for p in (SIM / "scenarios").glob("*/*.yaml")}
    rows = scenario_targets(runs, args.kind, intervals)
    before = None
    if args.before:
        earlier = [r for r in json.loads((SIM / f"{args.before}.json").read_text())["runs"]
                   if r["default"] and r["variant"] == args.kind]  # fmt: skip
        by: dict[str, list[dict]] = {}
        for r in earlier:
            by.setdefault(f"{r['family']}/{r['scenario']}", []).append(r)
        before = {scenario: figures(rs) for scenario, rs in by.items()}
    text = targets_md(rows, args.kind, before)
    (SIM / "targets.md").write_text(f"# {args.kind}'s targets, from {args.name}.json"
                                    + (f" (before: {args.before}.json)" if args.before else "") + "\n\n" + text)  # fmt: skip
    print(text)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """One simulated run: its epochs as the loop report prints them, then its figures."""
    from autoscaler.lab.ground_truth import GroundTruth
    from autoscaler.lab.scenario import load_scenario
    from autoscaler.lab.sim.calibration import Calibration
    from autoscaler.lab.sim.job import OPERATORS
    from autoscaler.lab.sim.loop import simulate
    from autoscaler.record.loop_report import table

    policy = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set: expected key=value, got {item!r}")
        policy[key] = yaml.safe_load(value)
    try:
        scenario = S.seeded(load_scenario(args.scenario), args.seed)
        truth = GroundTruth(BENCH / "ground-truth.json")
        run = simulate(scenario, args.kind, truth, Calibration.read(SIM / "calibration.json"), args.seed, policy,
                       judge=S.model_truth(truth, [scenario]))  # fmt: skip
    except InputError as exc:
        raise SystemExit(f"{exc.source}: {exc.problem}") from None
    print(table(run.rows, OPERATORS))
    print(json.dumps(S.figures(run), indent=1))
    return 0


def cmd_guard(args: argparse.Namespace) -> int:
    from autoscaler.lab.sim import guard

    now, before = guard.guard_points(), guard.read_record()
    for label, point in sorted(now.items()):
        old = before.get(label, {})
        moved = {k: (old.get(k), v) for k, v in point.items() if old.get(k) != v and k != "fingerprint"}
        print(f"{label}: cost {point['cost']:.3f}, late {point['late_pct']:.2f} %"
              + (f"; moved: {moved}" if moved else "; unmoved") + ("" if old.get("fingerprint") == point["fingerprint"]
                                                                 else " (its code changed)"))  # fmt: skip
    if args.record:
        guard.write_record(now)
        print(f"recorded in {guard.RECORD}")
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    """A real confirmation attempt against the simulator's predictions for the same scenarios and commit."""
    from autoscaler.lab.ground_truth import GroundTruth
    from autoscaler.lab.scenario import load_scenario
    from autoscaler.lab.sim import confirm
    from autoscaler.lab.sim.calibration import Calibration
    from autoscaler.lab.sim.loop import simulate

    try:
        paths = attempt_results(LAB, args.attempt)
    except InputError as exc:
        raise SystemExit(f"confirm: {exc}") from None
    results = [json.loads(p.read_text()) for p in paths]
    results = [r for r in results if r.get("inputs") == "honest"]
    if not results:
        raise SystemExit(f"{args.attempt}: none of its runs had honest inputs")
    commits = {r.get("conditions", {}).get("commit") for r in results}
    if len(commits) != 1 or None in commits or any(c.endswith("+changes") for c in commits):
        raise SystemExit(f"{args.attempt}: the runs must come from one clean commit, found {sorted(map(str, commits))}")
    head = git("rev-parse", "HEAD")
    if commits != {head} and git("diff", "--stat", commits.pop(), head, "--", *POLICY_CODE):
        raise SystemExit(f"{args.attempt}: the policy code changed since its runs: check out their commit first")
    truth, calibration = GroundTruth(BENCH / "ground-truth.json"), Calibration.read(SIM / "calibration.json")
    real = confirm.real_figures(results)
    sim, intervals = {}, {}
    for scenario_name, kind in sorted(real):
        scenario = load_scenario(BENCH / "scenarios" / f"{scenario_name}.yaml")
        intervals[scenario_name] = scenario.interval_s
        runs = [simulate(scenario, kind, truth, calibration, seed).result["totals"] for seed in range(1, args.seeds + 1)]
        sim[scenario_name, kind] = confirm.sim_figures(runs)
    text = confirm.confirmation_md(real, sim, args.kind, intervals)
    out = LAB / "confirmations" / f"{args.attempt}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(f"# Real runs against the simulator's predictions ({args.attempt})\n\n{text}")
    print(text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("calibrate", help="measure the simulator's timings off the real runs")
    c.add_argument("--decision-latency", type=float, required=True, help="epoch end -> the job stops for a rescale (s)")
    c.add_argument("--latency-source", required=True, help="where that figure was measured")
    c.set_defaults(func=cmd_calibrate)
    f = sub.add_parser("fidelity", help="replay every honest real run, closed and open loop")
    f.add_argument("--workers", type=int, default=2)
    f.set_defaults(func=cmd_fidelity)
    w = sub.add_parser("sweep", help="every kind on every simulated scenario with the same seeds")
    w.add_argument("--frontier", action="store_true", help="every value of each kind's headroom knob, not only its default")
    w.add_argument("--seeds", type=int, default=10)
    w.add_argument("--families", help="train, check or both (default: both)")
    w.add_argument("--workers", type=int)
    w.add_argument("--name", help="results file name under benchmarks/sim/ (default: sweep or frontier)")
    w.set_defaults(func=cmd_sweep)
    rep = sub.add_parser("report", help="a sweep's tables and PNGs written again from its JSON")
    rep.add_argument("name", help="sweep or frontier: the JSON of that name under benchmarks/sim/")
    rep.set_defaults(func=cmd_report)
    t = sub.add_parser("targets", help="the default kind's targets per scenario: benchmarks/sim/targets.md")
    t.add_argument("--name", default="sweep", help="the sweep's JSON under benchmarks/sim/ (default: sweep)")
    t.add_argument("--kind", default="ds2_plus")
    t.add_argument("--before", help="an earlier sweep's JSON name, whose figures of the kind are shown beside")
    t.set_defaults(func=cmd_targets)
    r = sub.add_parser("run", help="one scenario under one kind, its epochs and figures")
    r.add_argument("scenario", type=Path)
    r.add_argument("--kind", required=True, choices=S.KNOBS)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="a policy option of the job (e.g. factor=0.2)")
    r.set_defaults(func=cmd_run)
    k = sub.add_parser("confirm", help="a real confirmation attempt against the simulator: benchmarks/lab/confirmations/")
    k.add_argument("attempt", help="the attempt's label in benchmarks/lab/index.json: every kind's runs from one commit")
    k.add_argument("--kind", default="ds2_plus", help="the kind every other is held against")
    k.add_argument("--seeds", type=int, default=10)
    k.set_defaults(func=cmd_confirm)
    g = sub.add_parser("guard", help="the frontier guard's points (make test checks them): show, or --record")
    g.add_argument("--record", action="store_true")
    g.set_defaults(func=cmd_guard)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
