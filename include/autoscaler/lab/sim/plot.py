"""The frontier plot: each kind's cost over the floor against the share of time its job was late, one line per kind."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

COLORS = {"ds2": "tab:blue", "utilization": "tab:orange", "rules": "tab:green", "ds2_plus": "tab:red",
          "utilization@ours": "tab:purple"}  # fmt: skip


def _line(label: str, kind: str) -> str:
    return "utilization@ours" if label.startswith("utilization@ours") else kind


def frontier_png(points: Mapping[str, Mapping[str, Any]], title: str, path: Path) -> None:
    """One marker per variant, joined per kind in the knob's order; a kind's default is the filled, labelled one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    lines: dict[str, list[tuple[float, float, bool, str]]] = {}
    for label, p in points.items():
        lines.setdefault(_line(label, p["kind"]), []).append((p["late_pct"], p["cost"], p["default"], label))
    for name, pts in sorted(lines.items()):
        color = COLORS.get(name, "black")
        xs, ys = [x for x, _, _, _ in pts], [y for _, y, _, _ in pts]
        ax.plot(xs, ys, "-o", color=color, alpha=0.5, markersize=4, label=name)
        for x, y, default, _ in pts:
            if default:
                ax.plot([x], [y], "o", color=color, markersize=10)
                ax.annotate(name, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8, color=color)
    ax.set_xlabel("time late (% of the run: sources owe > 1 s of input at an epoch's end)")
    ax.set_ylabel("instance-seconds / floor (oracle sizing, no restarts)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
