"""The frontier plot: each kind's cost over the floor against the share of time its job was late, one line per kind."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoscaler.lab.sim.sweep import knob_lines

COLORS = {"ds2": "tab:blue", "utilization": "tab:orange", "rules": "tab:green", "ds2_plus": "tab:red",
          "utilization@ours": "tab:purple"}  # fmt: skip


def frontier_png(points: Mapping[str, Mapping[str, Any]], title: str, path: Path) -> None:
    """One marker per variant, joined per kind and knob in the knob's order (a kind's second knob dashed); a kind's
    default is the filled, labelled one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    styles: dict[str, int] = {}
    for name, members in knob_lines(points).items():
        owner = name.split(" ")[0]
        color = COLORS.get(owner, "black")
        style = ("-", "--", ":")[styles.setdefault(owner, 0) % 3]
        styles[owner] += 1
        xs, ys = [points[label]["late_pct"] for _, label in members], [points[label]["cost"] for _, label in members]
        ax.plot(xs, ys, style + "o", color=color, alpha=0.5, markersize=4, label=name)
        if owner in points and styles[owner] == 1:
            x, y = points[owner]["late_pct"], points[owner]["cost"]
            ax.plot([x], [y], "o", color=color, markersize=10)
            ax.annotate(owner, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8, color=color)
    ax.set_xlabel("time late (% of the run: sources owe > 1 s of input at an epoch's end)")
    ax.set_ylabel("instance-seconds / floor (oracle sizing, no restarts)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
