"""The index of the real-Flink lab's results: one folder per attempt under ``benchmarks/lab/``.

Every attempt (a sweep, a revision's runs, a confirmation) is a folder of ``<scenario>/<run>/`` with a
``README.md`` that says what it was for. ``commits.json`` beside them names the commit each run ran
(written by ``scripts/ds2_lab.py`` for new runs, which also record it in their ``conditions``), so a
result stays findable and replayable (``scripts/ds2_sim.py fidelity``) whatever folder it sits in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

COMMITS = "commits.json"
HEADER = """# Real-Flink lab results

One folder per attempt, each `<scenario>/<run>/` with `result.json`, `report.md`, `chart.png` (and, since
issue 39, `epochs.json`, what the collector measured per epoch), and a `README.md` saying what the attempt
was for. `commits.json` names the commit every run ran. `scripts/ds2_lab.py sweep --out
benchmarks/lab/<attempt>` adds an attempt; `scripts/ds2_lab.py index` writes this table again (a test
holds it to the folders). Runs whose inputs were the test job's own rate gauge say `oracle`; they are
never compared with honest ones.

| attempt | what it was | runs | kinds | scenarios | inputs | commits |
|---|---|---|---|---|---|---|
"""


def read_commits(root: Path) -> dict[str, str]:
    path = root / COMMITS
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def record_commit(root: Path, run: Path, commit: str) -> None:
    """Name ``run``'s commit in ``root``'s commits.json (atomically: a reader never sees half a file)."""
    commits = read_commits(root) | {str(run.relative_to(root)): commit}
    tmp = root / f".{COMMITS}.tmp"
    tmp.write_text(json.dumps(dict(sorted(commits.items())), indent=1) + "\n", encoding="utf-8")
    tmp.replace(root / COMMITS)


def _title(folder: Path) -> str:
    readme = folder / "README.md"
    if not readme.exists():
        return "(no README)"
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip().replace("|", "/")
    return "(no title)"


def index_md(root: Path, commits: Mapping[str, str] | None = None) -> str:
    """The table of every attempt folder under ``root``, in name order."""
    commits = read_commits(root) if commits is None else commits
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        results = sorted(folder.rglob("result.json"))
        if not results:
            continue
        data = [json.loads(p.read_text(encoding="utf-8")) for p in results]
        kinds = sorted({d.get("kind") or d["policy"].split("-")[0] for d in data})
        scenarios = {d["scenario"] for d in data}
        inputs = sorted({d.get("inputs", "oracle") for d in data})
        shas = sorted({commits.get(str(p.parent.relative_to(root)), "?")[:7] for p in results})
        rows.append(f"| [{folder.name}]({folder.name}/) | {_title(folder)} | {len(results)} | {', '.join(kinds)} | "
                    f"{len(scenarios)} | {', '.join(inputs)} | {', '.join(shas)} |")  # fmt: skip
    return HEADER + "\n".join(rows) + "\n"
