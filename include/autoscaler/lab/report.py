"""A lab run's report, and several runs side by side (scenario x policy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _ops(values: dict[str, int | None]) -> str:
    shown = [f"{op.split(':')[0]} {'∞' if v is None else v}" for op, v in values.items() if v != 0]
    return ", ".join(shown) or "0"


def load_change_table(result: dict[str, Any]) -> str:
    lines = ["| at | rate | rescales | time to sustain (s) | oscillations | ground truth | final | over | under "
             "| under-provisioned (s) | backlog peak | drain (s) | downtime (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for e in result["load_changes"]:
        peak = e["backlog_peak_records"]
        lines.append("| " + " | ".join([
            f"{e['at_s']:.0f} s", f"{e['rate']:,.0f}", str(e["rescales"]), _s(e["time_to_sustain_s"]), str(e["oscillations"]),
            _ops(e["ground_truth"]), _ops(e["final_parallelism"]), _ops(e["over_instances"]), _ops(e["under_instances"]),
            _s(e["under_provisioned_s"]), "–" if peak is None else f"{peak:,.0f}", _s(e["backlog_drain_s"]),
            f"{e['downtime_s']:.1f}",
        ]) + " |")  # fmt: skip
    return "\n".join(lines)


def report_md(result: dict[str, Any], epochs_table: str, conditions: str) -> str:
    t = result["totals"]
    return "\n\n".join([
        f"# Lab run: {result['scenario']} under {result['policy']}, {result.get('inputs', 'oracle')} inputs",
        conditions,
        load_change_table(result),
        f"Totals: {t['rescales']} rescales, {t['oscillations']} oscillations, "
        f"{t['under_provisioned_s']:.0f} s under-provisioned, "
        f"{t['downtime_s']:.1f} s downtime, backlog peak {t['backlog_peak_records']:,.0f} records; "
        f"{t['instance_seconds']:,.0f} instance-seconds against {t['ground_truth_instance_seconds']:,.0f} for the ground truth; "
        f"{t['sustained_epochs']} of {t['epochs']} epochs sustained the rate, {t['epochs_without_decision']} without a decision.",
        "Epoch by epoch:\n\n```\n" + epochs_table + "\n```",
        "Chart: `chart.png` (rates, backlog and parallelism over time; red lines: rescales).",
    ]) + "\n"  # fmt: skip


def compare_table(results: Sequence[dict[str, Any]]) -> str:
    """Scenario x policy x inputs, the figures of result.json side by side (time to sustain per load change).

    A result without ``inputs`` predates the field: every such run was fed the oracle gauge."""
    lines = ["| scenario | policy | inputs | rescales | oscillations | time to sustain per change (s) | over / under at end "
             "| under-provisioned (s) | backlog peak | drain (s) | downtime (s) | instance-s (truth) | epochs sustained |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(results, key=lambda r: (r["scenario"], r["policy"], r.get("inputs", "oracle"))):
        t, last = r["totals"], r["load_changes"][-1]
        drains = [e["backlog_drain_s"] for e in r["load_changes"] if e["backlog_peak_records"]]
        drain = "–" if not drains else ("never" if any(d is None for d in drains) else f"{max(drains):.0f}")
        lines.append("| " + " | ".join([
            r["scenario"], r["policy"], r.get("inputs", "oracle"), str(t["rescales"]), str(t["oscillations"]),
            " / ".join(_s(e["time_to_sustain_s"]) for e in r["load_changes"]),
            f"+{t['over_instances_end']} / -{t['under_instances_end']}"
            + (" (unsustainable)" if None in last["under_instances"].values() else ""),
            f"{t['under_provisioned_s']:.0f}", f"{t['backlog_peak_records']:,.0f}", drain, f"{t['downtime_s']:.1f}",
            f"{t['instance_seconds']:,.0f} ({t['ground_truth_instance_seconds']:,.0f})", f"{t['sustained_epochs']}/{t['epochs']}",
        ]) + " |")  # fmt: skip
    return "\n".join(lines)


def runs_table(results: Sequence[dict[str, Any]]) -> str:
    """Per scenario and kind run more than once: the median and range of each figure ('' when none is)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["scenario"], r.get("kind", r["policy"]), r.get("inputs", "oracle")), []).append(r)
    repeated = {k: v for k, v in sorted(groups.items()) if len(v) > 1}
    if not repeated:
        return ""

    def spread(values: list[float], fmt: str = "{:.0f}") -> str:
        values = sorted(values)
        mid = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        return f"{fmt.format(mid)} [{fmt.format(values[0])}–{fmt.format(values[-1])}]"

    def drain(r: dict[str, Any]) -> float:
        drains = [e["backlog_drain_s"] for e in r["load_changes"] if e["backlog_peak_records"]]
        return float("inf") if any(d is None for d in drains) else max(drains, default=0.0)

    lines = ["| scenario | kind | inputs | runs | rescales | under-provisioned (s) | instance-s / truth | longest drain (s) "
             "| over / under at end |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (scenario, kind, inputs), runs in repeated.items():
        totals = [r["totals"] for r in runs]
        lines.append("| " + " | ".join([
            scenario, kind, inputs, str(len(runs)), spread([t["rescales"] for t in totals]),
            spread([t["under_provisioned_s"] for t in totals]),
            spread([t["instance_seconds"] / t["ground_truth_instance_seconds"] for t in totals], "{:.2f}"),
            spread([drain(r) for r in runs]).replace("inf", "never"),
            ", ".join(f"+{t['over_instances_end']}/-{t['under_instances_end']}" for t in totals),
        ]) + " |")  # fmt: skip
    return "\n".join(lines)
