"""What every benchmark shares: the machine's conditions, summary statistics, and the results writer.

Figures are only comparable with their conditions, so each results file starts from
:func:`machine` (plus the benchmark's own settings) and is written by :func:`write_results`:
``benchmarks/results/<name>.json`` and ``<name>.md``, each replaced atomically.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _java() -> str:
    try:
        lines = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    except OSError:
        return "none"
    return lines[0] if lines else "unknown"


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?"
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")


def _ram_gb() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    return round(pages * size / 2**30, 1)


def load_script(name: str, path: Path) -> Any:
    """A Python file that is not in a package (``scripts/``, another benchmark) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commit() -> str:
    """The checkout's commit, ``+changes`` when tracked files other than results differ from it: what code a result
    came from (a sweep's own results, benchmarks/lab/ and benchmarks/results/, change as it runs)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/lab", ":!benchmarks/results")
    return head + ("+changes" if changed else "")


def machine() -> dict[str, Any]:
    """When, on what and from which commit a benchmark ran: date, commit, cores, CPU, RAM, OS, Python, Java, load."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gb": _ram_gb(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": _java(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def machine_line(conditions: dict[str, Any]) -> str:
    """The machine part of the conditions in one Markdown line."""
    c = conditions
    return (
        f"- machine: {c['cores']} cores ({c['cpu']}), {c['ram_gb']} GB RAM, {c['platform']}; Python {c['python']}, "
        f"Java: {c['java']}; load average (1, 5, 15 min) at the start {c['load_avg_at_start']}"
    )


def stats(values: list[float], digits: int = 3) -> dict[str, float] | None:
    """n, min, median and max of ``values`` (None when there are none)."""
    if not values:
        return None
    return {
        "n": len(values),
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
    }


def write_results(name: str, report: dict[str, Any], markdown: str, results: Path = RESULTS) -> None:
    """``results/<name>.json`` and ``<name>.md``, each written to a temp file and renamed over the old one."""
    results.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (results / f"{name}.json", json.dumps(report, indent=2, default=str) + "\n"),
        (results / f"{name}.md", markdown),
    ):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text if text.endswith("\n") else text + "\n")
        os.replace(tmp, path)
