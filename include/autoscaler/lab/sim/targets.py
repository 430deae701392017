"""The default kind's targets against the Flink autoscaler's model, per scenario, from a sweep's runs.

Each target is one written rule (``docs/policy-lab.md`` names where it comes from); each scenario's
figures are the means over its seeds, every kind on the same seeds:

- **dominates**: the kind costs at most ``1 - CHEAPER`` of a baseline's instance-seconds over the floor
  and is late no longer, against ``utilization`` at the Flink autoscaler's defaults and at ours;
- **settled**: after settling it costs at most ``SETTLED`` times the floor;
- **under**: it runs under-provisioned no longer than ``utilization`` plus one interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

CHEAPER = 0.15  # at least 15 % fewer instance-seconds (issue 40's target)
SETTLED = 1.15  # at most 1.15 x the floor after settling
BASELINES = ("utilization", "utilization@ours")


def _mean(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return sum(r[key] for r in runs) / len(runs)


def figures(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """A scenario's figures for one variant: means per run, settled cost over all its settled epochs."""
    floor = sum(r["settled_floor"] for r in runs)
    settled = sum(r["settled_instance_seconds"] for r in runs) / floor if floor else math.nan
    return {"cost": _mean(runs, "cost"), "late_s": _mean(runs, "late_s"), "under_s": _mean(runs, "under_s"),
            "rescales": _mean(runs, "rescales"), "settled": settled}  # fmt: skip


def scenario_targets(records: Sequence[Mapping[str, Any]], kind: str, intervals: Mapping[str, float]) -> list[dict[str, Any]]:
    """Per scenario (``family/name``): the kind's and the baselines' figures and each target's verdict.

    ``intervals``: the policy interval of each scenario, seconds (the under-provisioned allowance).
    """
    by: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for r in records:
        if r["default"]:
            by.setdefault(f"{r['family']}/{r['scenario']}", {}).setdefault(r["variant"], []).append(r)
    out = []
    for scenario, variants in sorted(by.items()):
        own = figures(variants[kind])
        base = {b: figures(variants[b]) for b in BASELINES}
        dominates = all(own["cost"] <= (1 - CHEAPER) * f["cost"] and own["late_s"] <= f["late_s"] for f in base.values())
        under = own["under_s"] <= base["utilization"]["under_s"] + intervals[scenario]
        settled = not own["settled"] > SETTLED  # nan (never settled): no verdict against it
        out.append({"scenario": scenario, "own": own, "base": base, "dominates": dominates, "under": under,
                    "settled": settled})  # fmt: skip
    return out


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def targets_md(rows: Sequence[Mapping[str, Any]], kind: str, before: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """The targets as a Markdown table; ``before``: the kind's figures per scenario at an earlier commit."""
    head = ("| scenario | " + ("before: cost / late s / rescales | " if before else "")
            + f"{kind}: cost / late s / rescales | utilization | utilization@ours | dominates both | settled / floor "
            "| under s (utilization's) |")  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        own, base = row["own"], row["base"]
        cells = [row["scenario"]]
        if before:
            b = before.get(row["scenario"])
            cells.append(f"{b['cost']:.2f} / {b['late_s']:.0f} / {b['rescales']:.1f}" if b else "–")
        cells += [f"{own['cost']:.2f} / {own['late_s']:.0f} / {own['rescales']:.1f}",
                  *(f"{base[b]['cost']:.2f} / {base[b]['late_s']:.0f} / {base[b]['rescales']:.1f}" for b in BASELINES),
                  _mark(row["dominates"]), f"{own['settled']:.3f} {_mark(row['settled'])}",
                  f"{own['under_s']:.0f} ({base['utilization']['under_s']:.0f}) {_mark(row['under'])}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    for family in ("train", "check"):
        mine = [r for r in rows if r["scenario"].startswith(family + "/")]
        if mine:
            lines.append(f"\n{family}: dominates both in {sum(r['dominates'] for r in mine)} of {len(mine)}, settled within "
                         f"{SETTLED} in {sum(r['settled'] for r in mine)}, under-provisioned within one interval of "
                         f"utilization's in {sum(r['under'] for r in mine)}.")  # fmt: skip
    return "\n".join(lines) + "\n"
