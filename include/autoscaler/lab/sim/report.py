"""The simulator's tables in Markdown: fidelity against the real runs, and the frontier sweep."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.lab.sim.fidelity import why

CHECKS = ("sequence", "instance_seconds", "under_provisioned", "drain")
WORDS = {
    "sequence": "rescale sequence (op, from → to, epoch ± 1)",
    "instance_seconds": "instance-seconds within ± 5 %",
    "under_provisioned": "under-provisioned time within ± 1 interval",
    "drain": "longest drain within 1 interval",
}


def _seq(rescales: Sequence[Sequence[Any]]) -> str:
    return ", ".join(f"{op[:5]} {a}→{b}@{i}" for i, op, a, b in rescales) or "none"


def _s(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "never" if math.isinf(value) else f"{value:,.0f}"


def fidelity_md(results: Sequence[dict[str, Any]]) -> str:
    ok = [r for r in results if "error" not in r]
    lines = ["# The simulator against every honest real run", ""]
    summary = [f"{len(results)} real runs replayed ({len(results) - len(ok)} could not be):"]
    for check in CHECKS:
        n = sum(1 for r in ok if r[check])
        summary.append(f"- {WORDS[check]}: **{n} of {len(ok)}** ({100 * n / max(len(ok), 1):.0f} %)")
    seeds = max((r.get("seeds", 1) for r in ok), default=1)
    some = sum(1 for r in ok if r.get("sequence_seeds", r["sequence"]))
    summary.append(f"- the real rescale sequence is one the simulator makes in at least one of {seeds} seeds: "
                   f"**{some} of {len(ok)}** ({100 * some / max(len(ok), 1):.0f} %)")  # fmt: skip
    near = sum(1 for r in ok if r.get("instance_seconds_seeds", r["instance_seconds"]))
    summary.append(f"- instance-seconds within ± 5 % in at least one of {seeds} seeds: "
                   f"**{near} of {len(ok)}** ({100 * near / max(len(ok), 1):.0f} %)")  # fmt: skip
    opened = [r["open_loop"] for r in ok if r.get("open_loop", {}).get("epochs")]
    if opened:
        mean = lambda key: sum(o[key] for o in opened) / len(opened)  # noqa: E731
        summary.append(f"- open loop (the real rescales imposed), mean per run over {sum(o['epochs'] for o in opened)} epochs: "
                       f"arrival {100 * mean('arrival_err'):.1f} %, output {100 * mean('achieved_err'):.1f} %, "
                       f"source back-pressure {100 * mean('bp_err'):.1f} points")  # fmt: skip
    lines += ["\n".join(summary), ""]
    head = (
        "| run | code | seq | IS | under | drain | seeds with the real sequence | real rescales | simulated (seed 1) "
        "| IS real / sim | under (s) real / sim | drain (s) real / sim | open loop: output err |"
    )
    lines += [head, "|" + "---|" * 13]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['run']} | {r.get('commit', '')} | not replayed: {r['error'][:120]} |" + " |" * 11)
            continue
        marks = ["✓" if r[c] else "✗" for c in CHECKS]
        real, sim = r["real"], r["sim"]
        lines.append(
            f"| {r['run']} | {r.get('commit', '')} | {' | '.join(marks)} | "
            f"{r.get('sequence_seeds', '')} of {r.get('seeds', '')} | "
            f"{_seq(real['rescales'])} | {_seq(sim['rescales'])} | "
            f"{_s(real['instance_seconds'])} / {_s(sim['instance_seconds'])} | {_s(real['under_s'])} / {_s(sim['under_s'])} | "
            f"{_s(real['drain_s'])} / {_s(sim['drain_s'])} | {100 * r['open_loop']['achieved_err']:.1f} % | {why(r)} |"
        )
    return "\n".join(lines) + "\n"


def sweep_md(title: str, families: Mapping[str, Mapping[str, Mapping[str, Any]]], lines: Sequence[str]) -> str:
    """A sweep's points per family (train, check, all): one row per variant."""
    out = [f"# {title}", "", *lines, ""]
    for family, points in families.items():
        head = (
            "| variant | runs | cost / floor | settled cost / floor | late (% of time) | under-provisioned (% of time) "
            "| rescales per hour | restart debt (s per hour) |"
        )
        out += [f"## {family}", "", head, "|---|---|---|---|---|---|---|---|"]
        for label, p in sorted(points.items(), key=lambda kv: (kv[1]["kind"], kv[0])):
            name = f"**{label}**" if p["default"] else label
            out.append(f"| {name} | {p['runs']} | {p['cost']:.3f} | {p['settled_cost']:.3f} | {p['late_pct']:.2f} "
                       f"| {p['under_pct']:.2f} "
                       f"| {p['rescales_per_h']:.2f} | {p['restart_debt_s_per_h']:.1f} |")  # fmt: skip
        out.append("")
    return "\n".join(out)


def scenario_md(table: Mapping[str, Mapping[str, tuple[float, float]]]) -> str:
    """Each kind's default point per scenario: cost over the floor / per cent of the time late."""
    labels = sorted({label for row in table.values() for label in row})
    out = ["## Per scenario: cost over the floor / time late (%), each kind at its defaults", "",
           "| scenario | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]  # fmt: skip
    for scenario, row in table.items():
        cells = [f"{row[label][0]:.2f} / {row[label][1]:.1f}" if label in row else "–" for label in labels]
        out.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
