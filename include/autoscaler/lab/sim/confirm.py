"""The real lab as the judge of last resort: does real Flink show the differences the simulator predicts?

A confirmation attempt (a label in ``benchmarks/lab/index.json``) runs every kind on a few scenarios, each several times,
from one commit under one set of conditions. For each scenario and each kind against the default, the simulator
predicts, with the same commit's code and ten seeds, which of the two costs more instance-seconds and which is
under-provisioned longer. The real runs confirm a prediction when their medians differ the same way.

A difference within what the simulator is held to against a real run (instance-seconds within 5 %,
under-provisioned time within one interval: :mod:`autoscaler.lab.sim.fidelity`) is a tie: neither side can tell
it apart from noise, so a predicted tie is confirmed by a real tie, and a real tie against a predicted difference
is a miss, as is the opposite sign.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

IS_TOLERANCE = 0.05  # fidelity's instance-seconds check
FIGURES = ("instance_seconds", "under_provisioned_s")


@dataclass(frozen=True)
class Figures:
    """One kind on one scenario: the middle of its runs (real: median; simulated: mean over seeds)."""

    instance_seconds: float
    under_provisioned_s: float
    runs: int


def real_figures(results: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Figures]:
    """(scenario, kind) -> the median of its real runs' totals."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        kind = r.get("kind") or r["policy"].split("-")[0]
        groups.setdefault((r["scenario"], kind), []).append(r["totals"])
    return {key: Figures(statistics.median(t["instance_seconds"] for t in runs),
                         statistics.median(t["under_provisioned_s"] for t in runs), len(runs))
            for key, runs in groups.items()}  # fmt: skip


def sim_figures(totals: Sequence[Mapping[str, Any]]) -> Figures:
    """The mean of simulated runs' totals (one per seed)."""
    return Figures(statistics.fmean(t["instance_seconds"] for t in totals),
                   statistics.fmean(t["under_provisioned_s"] for t in totals), len(totals))  # fmt: skip


def direction(a: float, b: float, figure: str, interval_s: float) -> int:
    """+1 when ``a`` is more than ``b`` beyond the tolerance, -1 when less, 0 for a tie."""
    tolerance = IS_TOLERANCE * max(a, b) if figure == "instance_seconds" else interval_s
    return 0 if abs(a - b) <= tolerance else (1 if a > b else -1)


WORDS = {1: "more", -1: "less", 0: "tie"}


def confirmation_md(real: Mapping[tuple[str, str], Figures], sim: Mapping[tuple[str, str], Figures], default: str,
                    intervals: Mapping[str, float]) -> str:  # fmt: skip
    """The table of every (scenario, kind) the real runs hold against ``default``: predicted and real direction."""
    lines = ["| scenario | kind | figure | simulated: default / kind | real (median): default / kind | predicted | "
             "real | confirmed |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    confirmed = total = 0
    for scenario in sorted({s for s, _ in real}):
        if (scenario, default) not in real:
            continue
        for kind in sorted(k for s, k in real if s == scenario and k != default):
            for figure in FIGURES:
                rd, rk = getattr(real[scenario, default], figure), getattr(real[scenario, kind], figure)
                sd, sk = getattr(sim[scenario, default], figure), getattr(sim[scenario, kind], figure)
                predicted = direction(sd, sk, figure, intervals[scenario])
                seen = direction(rd, rk, figure, intervals[scenario])
                ok = predicted == seen
                confirmed += ok
                total += 1
                runs = f"{real[scenario, default].runs} / {real[scenario, kind].runs} runs"
                lines.append(f"| {scenario} | {kind} | {figure} | {sd:,.0f} / {sk:,.0f} | {rd:,.0f} / {rk:,.0f} ({runs}) | "
                             f"{WORDS[predicted]} | {WORDS[seen]} | {'✓' if ok else '✗'} |")  # fmt: skip
    head = (
        f"{confirmed} of {total} predicted differences confirmed ({default} against each other kind; 'more' means "
        f"{default} has more).\n\n"
    )
    return head + "\n".join(lines) + "\n"
