"""How often does the real lab agree with itself? The ceiling of any simulator's fidelity.

The fidelity checks (``fidelity.agreement``) ask a simulated run to reproduce one real run. Real Flink
is not deterministic: the same scenario under the same kind, commit and machine, run again, can make
a knife-edge decision the other way. So the same checks are put here to pairs of real runs that share
scenario, kind and policy code (the confirmation's rounds, and runs of commits whose policy, decide
and config code is the same): for every ordered pair (A, B), does B reproduce
A as a simulated run would have to? A simulator cannot be expected to reproduce one real run more
often, seed for seed, than the real lab reproduces itself; "in some seed" against "in some other
round" is the like-for-like comparison of the distribution.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autoscaler.lab.sim.fidelity import RealRun, checks, longest_drain, read_real_run

CHECKS = ("sequence", "instance_seconds", "under_provisioned", "drain")


def figures(run: RealRun) -> dict[str, Any]:
    """A real run's figures as the fidelity checks read them."""
    totals = run.result["totals"]
    return {"rescales": run.rescales(), "instance_seconds": totals["instance_seconds"],
            "under_s": totals["under_provisioned_s"], "drain_s": longest_drain(run.result)}  # fmt: skip


def reproduces(a: RealRun, b: RealRun) -> dict[str, bool]:
    """Does real run ``b`` reproduce real run ``a`` by the fidelity checks (``a`` the reference)?"""
    return checks(figures(a), figures(b), a.result["interval_s"])


def groups(results: Sequence[Path], code_of: Callable[[Path], str]) -> dict[tuple[str, str, str], list[RealRun]]:
    """The real runs by (scenario, kind, policy code), only the groups with two runs or more."""
    out: dict[tuple[str, str, str], list[RealRun]] = defaultdict(list)
    for path in results:
        run = read_real_run(path)
        out[run.scenario, run.kind, code_of(path)].append(run)
    return {k: sorted(v, key=lambda r: str(r.path)) for k, v in sorted(out.items()) if len(v) >= 2}


def repeatability(results: Sequence[Path], code_of: Callable[[Path], str]) -> dict[str, Any]:
    """Pairwise agreement of repeated real runs (``code_of``: a run's policy code): per check, over
    ordered pairs and per run."""
    rows = []
    pairs = {c: 0 for c in CHECKS}
    some = {c: 0 for c in CHECKS}
    n_pairs = n_runs = 0
    for (scenario, kind, code), runs in groups(results, code_of).items():
        for a in runs:
            others = [reproduces(a, b) for b in runs if b is not a]
            n_runs += 1
            n_pairs += len(others)
            for c in CHECKS:
                pairs[c] += sum(o[c] for o in others)
                some[c] += any(o[c] for o in others)
            rows.append({"run": str(a.path), "scenario": scenario, "kind": kind, "code": code, **figures(a),
                         "reproduced_by": {c: sum(o[c] for o in others) for c in CHECKS}, "others": len(others)})  # fmt: skip
    return {"runs": n_runs, "pairs": n_pairs, "pairwise": pairs, "in_some_other": some, "rows": rows}


def _seq(rescales: Sequence[Sequence[Any]]) -> str:
    return ", ".join(f"{op} {a}→{b}@{e}" for e, op, a, b in rescales) or "none"


def _pct(n: int, d: int) -> str:
    return f"{n} of {d} ({100 * n / d:.0f} %)" if d else "–"


def simulator_on(rep: dict[str, Any], fidelity: Sequence[dict[str, Any]], root: Path) -> dict[str, dict[str, int]]:
    """The simulator's fidelity figures on the same runs (seed 1, and in some seed where counted)."""
    runs = {str(Path(r["run"]).relative_to(root)) for r in rep["rows"]}
    mine = [f for f in fidelity if f["run"] in runs and "error" not in f]
    some = {"sequence": "sequence_seeds", "instance_seconds": "instance_seconds_seeds"}
    return {
        "seed_1": {c: sum(bool(f[c]) for f in mine) for c in CHECKS},
        "some_seed": {c: sum(bool(f.get(some[c])) for f in mine) for c in some},
        "runs": {"n": len(mine)},
    }


def repeatability_md(rep: dict[str, Any], root: Path, sim: dict[str, dict[str, int]] | None = None) -> str:
    names = {"sequence": "the same rescale sequence (operator, from → to, epoch ± 1)",
             "instance_seconds": "instance-seconds within ± 5 %",
             "under_provisioned": "under-provisioned time within ± 1 interval",
             "drain": "the longest drain within one interval"}  # fmt: skip
    lines = [
        f"{rep['runs']} real runs in groups of the same scenario, kind and policy code, {rep['pairs']} ordered pairs "
        "(run A the reference, run B in the simulator's place).",
        "",
        "| check (the fidelity checks, a real run in the simulator's place) | pairs that agree "
        "| runs reproduced by some other round "
        "| the simulator on the same runs, seed 1 | ... in some of its seeds |",
        "|---|---|---|---|---|",
    ]
    n = sim["runs"]["n"] if sim else 0
    for c in CHECKS:
        seed1 = _pct(sim["seed_1"][c], n) if sim else "–"
        some = _pct(sim["some_seed"][c], n) if sim and c in sim["some_seed"] else "–"
        lines.append(f"| {names[c]} | {_pct(rep['pairwise'][c], rep['pairs'])} | {_pct(rep['in_some_other'][c], rep['runs'])} "
                     f"| {seed1} | {some} |")  # fmt: skip
    lines += ["", "| run | rescales | instance-s | under (s) | drain (s) "
              "| reproduced by the other rounds: seq / IS / under / drain |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rep["rows"]:
        got = " / ".join(f"{r['reproduced_by'][c]} of {r['others']}" for c in CHECKS)
        drain = "never" if r["drain_s"] == math.inf else f"{r['drain_s']:.0f}"
        run = Path(r["run"]).relative_to(root) if Path(r["run"]).is_relative_to(root) else r["run"]
        lines.append(f"| {run} | {_seq(r['rescales'])} | {r['instance_seconds']:,.0f} | {r['under_s']:.0f} | {drain} | {got} |")
    return "\n".join(lines) + "\n"
