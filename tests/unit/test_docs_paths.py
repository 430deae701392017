"""Every project path the docs, scripts and code name exists (a renamed module must not leave a dead pointer)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPS = "dags|plugins|spark_jobs|include|tests|scripts|benchmarks|docs|conf|examples|deploy|flink-job|autoscaler|ds2_airflow"
PATH = re.compile(rf"(?<![\w./-])((?:{TOPS})/[A-Za-z0-9_.\-/]*[A-Za-z0-9_])")
# Named but made at run time: results prefixes, the Prometheus plugin folder inside Flink's home, the jars
# scripts/build-wheel.sh puts into the wheel, and the modules of an older commit's tree that fidelity's replay
# rebuilds (ds2_sim.hybrid_tree).
MADE_AT_RUN_TIME = {
    "include/autoscaler/policy/spark/decisions.py",
    "include/autoscaler/policy/windows.py",
    "autoscaler/jars/ds2-testjob.jar",
    "autoscaler/jars/ds2-sql-runner.jar",
    "benchmarks/results/backfill",
    "benchmarks/results/dag",
    "benchmarks/results/fleet",
    "plugins/metrics-prometheus",
}


def test_every_named_path_exists():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = [f for f in files if f.endswith((".md", ".py", ".sh", ".yaml", ".toml")) or f in ("Makefile", ".ci/run")]
    missing = []
    for name in texts:
        if name.startswith("benchmarks/results/") or name == "benchmarks/lab/attempts.md":
            continue  # measured records and the lab attempts' own accounts: they name what existed when they were written
        for match in PATH.finditer((ROOT / name).read_text(errors="replace")):
            path = match.group(1)
            if "*" in path or path in MADE_AT_RUN_TIME:
                continue
            bases = (ROOT, ROOT / "include", ROOT / "plugins", (ROOT / name).parent)
            if not any((base / path).exists() for base in bases):
                missing.append(f"{name}: {path}")
    assert not missing, "paths named but missing:\n" + "\n".join(missing)
