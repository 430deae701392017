"""Installs the provider's runtime dependencies (pyproject.toml's [project] dependencies and the named extras)
at the exact versions of requirements.txt, the constraints of the project's own runs: the compose image's
dependency layer, built before the code is copied so that it survives code changes. The dev extra (ruff,
pytest, playwright, hypothesis) never goes into an image.

    python deploy/install-deps.py [EXTRA ...]     (from the folder holding pyproject.toml and requirements.txt)
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path.cwd()


def main(extras: list[str]) -> int:
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    known = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in known]
    if unknown or "dev" in extras:
        sys.exit(f"install-deps: extras must be among {sorted(set(known) - {'dev'})}, got {extras}")
    wanted = list(project["dependencies"]) + [d for e in extras for d in known[e]]
    command = [sys.executable, "-m", "pip", "install", "--no-cache-dir", "-c", str(HERE / "requirements.txt"), *wanted]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
