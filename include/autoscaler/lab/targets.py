"""The targets a policy kind is held to in the lab (issue 21), checked from result.json, ✓ or ✗ per scenario.

Each target compares a run with the measured ground truth or with the baselines' runs of the same
scenario and inputs:

- **under**: under-provisioned time no higher than the best baseline's;
- **cost**: instance-seconds at most 1.10 × the ground truth's;
- **rescales**: at most 1 per load change where scaling is linear, 2 where it is not
  (:data:`NONLINEAR`); in ``noise`` none after the first change; at most 1 in ``spike``; no
  reversal (oscillation) in ``diurnal-sine``;
- **drain**: every backlog a load change or a restart built drained within 90 s;
- **end**: where scaling is sublinear or skewed (:data:`AT_TRUTH_OR_ONE_ABOVE`), the run ends at the
  ground truth or one above, never below.

A target that does not apply to a scenario is None (shown "–").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BASELINES = ("ds2", "utilization", "rules")
COST_FACTOR = 1.10
DRAIN_S = 90.0
NONLINEAR = frozenset({"skew", "backlog-restarts", "cpu-bound"})  # hot key, sublinear Count, CPU-bound Count
AT_TRUTH_OR_ONE_ABOVE = frozenset({"skew", "backlog-restarts"})
TARGETS = ("under", "cost", "rescales", "drain", "end")


NO_REVERSAL = frozenset({"diurnal-sine"})  # scenarios whose rescale target is no reversal, in place of a count


def rescale_limit(scenario: str, change: int) -> tuple[bool, int | None]:
    """The rescale target for load change ``change`` of ``scenario``: (whether the limit counts the whole run
    rather than the change, the rescales allowed; None: no limit). The one statement of the rule, read by
    :func:`check` and by the floor of cost (:mod:`autoscaler.lab.bounds`)."""
    if scenario == "spike":
        return True, 1
    if scenario == "noise":
        return False, None if change == 0 else 0
    if scenario in NO_REVERSAL:
        return False, None
    return False, 2 if scenario in NONLINEAR else 1


def _drains(result: dict[str, Any]) -> list[float | None]:
    return [e["backlog_drain_s"] for e in result["load_changes"] if e["backlog_peak_records"]]


def check(result: dict[str, Any], baselines: Sequence[dict[str, Any]]) -> dict[str, tuple[bool | None, str]]:
    """Each target's verdict for one run, with the figures behind it."""
    t, scenario = result["totals"], result["scenario"]
    out: dict[str, tuple[bool | None, str]] = {}
    best = min((b["totals"]["under_provisioned_s"] for b in baselines), default=None)
    under = t["under_provisioned_s"]
    if best is None:
        out["under"] = (None, f"{under:.0f} s, no baseline")
    else:
        out["under"] = (under <= best, f"{under:.0f} s (best baseline {best:.0f})")
    ratio = t["instance_seconds"] / t["ground_truth_instance_seconds"]
    out["cost"] = (ratio <= COST_FACTOR, f"{ratio:.2f}×")
    per_change = [e["rescales"] for e in result["load_changes"]]
    whole_run, limit = rescale_limit(scenario, 0)
    within = all(n <= lim for k, n in enumerate(per_change) if (lim := rescale_limit(scenario, k)[1]) is not None)
    if whole_run:
        out["rescales"] = (limit is None or t["rescales"] <= limit, f"{t['rescales']} in all")
    elif scenario in NO_REVERSAL:
        out["rescales"] = (t["oscillations"] == 0, f"{t['rescales']} rescales, {t['oscillations']} reversals")
    elif limit is None:
        out["rescales"] = (within, f"{sum(per_change[1:])} after the first change")
    else:
        out["rescales"] = (within, f"{'/'.join(map(str, per_change))} per change (≤ {limit})")
    drains = _drains(result)
    if not drains:
        out["drain"] = (None, "no backlog")
    else:
        worst = None if any(d is None for d in drains) else max(drains)
        out["drain"] = (worst is not None and worst <= DRAIN_S, "never" if worst is None else f"{worst:.0f} s")
    if scenario in AT_TRUTH_OR_ONE_ABOVE:
        over, short = t["over_instances_end"], t["under_instances_end"]
        out["end"] = (short == 0 and over <= 1, f"+{over} / -{short}")
    else:
        out["end"] = (None, "")
    return out


def judge(result: dict[str, Any], others: Sequence[dict[str, Any]]) -> dict[str, tuple[bool | None, str]]:
    """:func:`check` against the baseline kinds' runs among ``others`` of the same scenario and inputs."""
    same = [b for b in others if b["scenario"] == result["scenario"] and b.get("inputs") == result.get("inputs")
            and b.get("kind", b["policy"]) in BASELINES]  # fmt: skip
    return check(result, same)


def targets_table(results: Sequence[dict[str, Any]], kind: str) -> str:
    """One row per scenario for the runs of ``kind``: each target ✓ or ✗ with its figure."""
    lines = ["| scenario | run | " + " | ".join(TARGETS) + " |", "|---|---|" + "---|" * len(TARGETS)]
    for r in sorted((r for r in results if r.get("kind", r["policy"]) == kind), key=lambda r: (r["scenario"], r["policy"])):
        verdicts = judge(r, results)
        cells = ["–" if ok is None and not why else f"{'–' if ok is None else '✓' if ok else '✗'} {why}".strip()
                 for ok, why in (verdicts[k] for k in TARGETS)]  # fmt: skip
        lines.append(f"| {r['scenario']} | {r['policy']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tally(runs: Sequence[dict[str, Any]], baselines: Sequence[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Per scenario: each target's verdict for ``kind`` over its runs in ``runs``, by majority (met when more
    than half the runs meet it; None when it does not apply), with the runs' count of ✓.

    Each run is judged against the baseline kinds' runs in ``baselines`` of its scenario and inputs. A baseline kind is judged
    the same way, over its own runs in ``runs``.
    """
    out: dict[str, dict[str, Any]] = {}
    mine = [r for r in runs if r.get("kind", r["policy"]) == kind]
    for scenario in sorted({r["scenario"] for r in mine}):
        theirs = [r for r in mine if r["scenario"] == scenario]
        verdicts = [judge(r, baselines) for r in theirs]
        row: dict[str, Any] = {"runs": len(theirs)}
        for target in TARGETS:
            oks = [v[target][0] for v in verdicts if v[target][0] is not None]
            row[target] = None if not oks else (sum(oks) * 2 > len(oks), f"{sum(oks)}/{len(oks)}")
        out[scenario] = row
    return out


def tally_table(runs: Sequence[dict[str, Any]], baselines: Sequence[dict[str, Any]], kinds: Sequence[str]) -> str:
    """The lab's score: per scenario and kind, each target by majority over the kind's runs, and the totals."""
    lines = ["| scenario | kind | runs | met | " + " | ".join(TARGETS) + " |", "|---|---|---|---|" + "---|" * len(TARGETS)]
    totals = {}
    per_kind = {kind: tally(runs, baselines, kind) for kind in kinds}
    for scenario in sorted({s for rows in per_kind.values() for s in rows}):
        for kind, rows in per_kind.items():
            if scenario not in rows:
                continue
            row = rows[scenario]
            judged = [row[t] for t in TARGETS if row[t] is not None]
            met = sum(ok for ok, _ in judged)
            done = totals.setdefault(kind, [0, 0])
            done[0], done[1] = done[0] + met, done[1] + len(judged)
            cells = ["–" if row[t] is None else f"{'✓' if row[t][0] else '✗'} {row[t][1]}" for t in TARGETS]
            lines.append(f"| {scenario} | {kind} | {row['runs']} | {met}/{len(judged)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Targets met: " + ", ".join(f"{kind} {met} of {n}" for kind, (met, n) in totals.items()))
    return "\n".join(lines)
