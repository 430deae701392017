"""The real-Flink lab's results: one layout, ``benchmarks/lab/runs/<scenario>/<kind>/<attempt>[-<round>]/``.

Each run's folder holds ``result.json``, ``report.md``, ``chart.png`` (and, since issue 39,
``epochs.json``, what the collector measured per epoch). An *attempt* (a sweep, a revision's runs, a
confirmation) is a label, not a folder: ``index.json`` names each run's attempt and commit, and each
attempt's title; ``attempts.md`` holds each attempt's own account of what it was for and how it ran.
So every run of a scenario under a kind sits in one folder whatever attempt made it, and a result
stays findable and replayable (``scripts/ds2_sim.py fidelity``) by its attempt, its commit or its place.
``README.md`` is the table :func:`index_md` writes from them (``scripts/ds2_lab.py index``; a test holds
it to the folders).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoscaler.config.options import POLICY_KINDS
from autoscaler.errors import InputError

INDEX = "index.json"
RUNS = "runs"
ATTEMPTS = "attempts.md"
# An attempt's label names folders: letters, digits, dots and dashes, as the existing ones (2026-11-25-honest).
ATTEMPT = re.compile(r"[a-z0-9][a-z0-9.-]{0,79}")
# A run's label within a sweep (its job's name, its result's policy): the kind, then its round from the second on.
RUN_LABEL = re.compile(r"(?P<kind>[a-z0-9_]+)(?:-(?P<run>[1-9][0-9]*))?")
HEADER = """# Real-Flink lab results

Every run is `runs/<scenario>/<kind>/<attempt>[-<round>]/`: `result.json`, `report.md`, `chart.png` (and, since
issue 39, `epochs.json`, what the collector measured per epoch). An attempt (a sweep, a revision's runs, a
confirmation) is a label: `index.json` names each run's attempt and commit, [`attempts.md`](attempts.md) says what
each attempt was for, `confirmations/` holds the real runs set against the simulator's predictions.
`scripts/ds2_lab.py sweep --attempt <label>` adds runs; `scripts/ds2_lab.py index` writes this table again (a test
holds it to the folders). The lab's commands take an attempt's label or a folder (`compare confirm-8d046aa`,
`compare runs/noise`). Runs whose inputs were the test job's own rate gauge say `oracle`; they are never compared
with honest ones.
"""


def validate_attempt(label: str) -> str:
    if not ATTEMPT.fullmatch(label):
        raise InputError("attempt", f"{label!r} is not an attempt label (lower-case letters, digits, '.', '-'; 1-80)")
    return label


def run_label(kind: str, run: int) -> str:
    """The label of a kind's ``run``-th run of a scenario: ``ds2_plus``, then ``ds2_plus-2``, ..."""
    return kind if run == 1 else f"{kind}-{run}"


def parse_run_label(label: str) -> tuple[str, int]:
    """(kind, run number) of a label made by :func:`run_label`; anything else is refused naming the label."""
    match = RUN_LABEL.fullmatch(label)
    if match is None or match["kind"] not in POLICY_KINDS:
        raise InputError("--policy", f"{label!r} is not a policy kind ({', '.join(POLICY_KINDS)}), optionally with -<run>")
    return match["kind"], int(match["run"] or 1)


def run_dir(root: Path, scenario: str, kind: str, attempt: str, round_: int = 1) -> Path:
    """Where the run of ``kind`` on ``scenario`` in round ``round_`` of ``attempt`` goes."""
    return root / RUNS / scenario / kind / (validate_attempt(attempt) + (f"-{round_}" if round_ > 1 else ""))


def read_index(root: Path) -> dict[str, Any]:
    """``{"attempts": {label: title}, "runs": {path under root: {"attempt", "commit"}}}`` (empty when none)."""
    path = root / INDEX
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return {"attempts": data.get("attempts", {}), "runs": data.get("runs", {})}


def _write(root: Path, index: Mapping[str, Any]) -> None:
    tmp = root / f".{INDEX}.tmp"  # atomically: a reader never sees half a file
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(root / INDEX)


def record_attempt(root: Path, attempt: str, title: str | None) -> None:
    """Name ``attempt`` in the index (with ``title``; an attempt already named keeps its title when ``title`` is None),
    and give it a section in attempts.md if it has none."""
    index = read_index(root)
    title = (title or index["attempts"].get(validate_attempt(attempt)) or attempt).replace("|", "/")
    index["attempts"][attempt] = title
    _write(root, index)
    notes = root / ATTEMPTS
    text = notes.read_text(encoding="utf-8") if notes.exists() else "# What each attempt was for\n"
    if f"\n## {attempt}\n" not in text:
        notes.write_text(text.rstrip("\n") + f"\n\n## {attempt}\n\n**{title}**\n", encoding="utf-8")


def record_run(root: Path, run: Path, attempt: str, commit: str) -> None:
    """Name ``run``'s attempt and commit in the index (``run`` under ``root/runs``)."""
    index = read_index(root)
    if validate_attempt(attempt) not in index["attempts"]:
        raise InputError("attempt", f"{attempt!r} is not in {root / INDEX}: record it first")
    index["runs"][run.relative_to(root).as_posix()] = {"attempt": attempt, "commit": commit}
    _write(root, index)


def commit_of(root: Path, run: Path) -> str | None:
    """The commit the index names for the run in folder ``run``."""
    entry = read_index(root)["runs"].get(run.resolve().relative_to(root.resolve()).as_posix())
    return entry["commit"] if entry else None


def attempt_results(root: Path, attempt: str) -> list[Path]:
    """The result.json of every run of ``attempt``, in path order."""
    index = read_index(root)
    if attempt not in index["attempts"]:
        raise InputError("attempt", f"{attempt!r} is not an attempt of {root / INDEX}")
    return sorted(root / p / "result.json" for p, e in index["runs"].items() if e["attempt"] == attempt)


def results_of(root: Path, items: list[str]) -> list[Path]:
    """The result.json of every run named: an attempt's label (its runs, from ``root``'s index) or a folder (every
    run under it)."""
    out = []
    for item in items:
        folder = Path(item)
        if folder.is_dir():
            found = sorted(folder.rglob("result.json"))
        else:
            try:
                found = attempt_results(root, item)
            except InputError as exc:
                raise InputError(item, f"neither a folder nor an attempt of the lab ({exc})") from None
        if not found:
            raise InputError(item, "no result.json in it")
        out += found
    return out


def _kind(result: Mapping[str, Any]) -> str:
    return result.get("kind") or result["policy"].split("-")[0]


def index_md(root: Path) -> str:
    """The attempts (what each was, its runs, kinds, scenarios, inputs, commits), then the runs per scenario and kind."""
    index = read_index(root)
    by_attempt: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    cells: dict[tuple[str, str], int] = {}
    for path in sorted(index["runs"]):
        entry = index["runs"][path]
        result = json.loads((root / path / "result.json").read_text(encoding="utf-8"))
        by_attempt.setdefault(entry["attempt"], []).append((entry["commit"], result))
        key = (result["scenario"], _kind(result))
        cells[key] = cells.get(key, 0) + 1
    lines = [HEADER, "| attempt | what it was | runs | kinds | scenarios | inputs | commits |", "|---|---|---|---|---|---|---|"]
    for attempt in sorted(index["attempts"]):
        runs = by_attempt.get(attempt, [])
        kinds = sorted({_kind(r) for _, r in runs})
        inputs = sorted({r.get("inputs", "oracle") for _, r in runs})
        shas = sorted({c[:7] for c, _ in runs})
        scenarios = len({r["scenario"] for _, r in runs})
        lines.append(f"| [{attempt}](attempts.md#{attempt.replace('.', '')}) | {index['attempts'][attempt]} | {len(runs)} | "
                     f"{', '.join(kinds)} | {scenarios} | {', '.join(inputs)} | {', '.join(shas)} |")  # fmt: skip
    kinds = sorted({k for _, k in cells})
    lines += ["", "Runs per scenario and kind (each cell a folder of `runs/`):", "",
              "| scenario | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]  # fmt: skip
    for scenario in sorted({s for s, _ in cells}):
        row = [f"[{cells[scenario, k]}](runs/{scenario}/{k}/)" if (scenario, k) in cells else "" for k in kinds]
        lines.append(f"| {scenario} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
