#!/usr/bin/env bash
# Sets up everything the project needs on a fresh machine; idempotent (a stamp skips done work).
#  - Java 17+ and curl: installed from Debian packages when missing;
#  - a virtual environment in .venv with requirements.txt (exact pins) and the project's core.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

need_java() {
  command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || return 0
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ "${major:-0}" -lt 17 ]
}
have_deb() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# Debian packages: a JDK (Spark and Flink run on it; the Flink test job is compiled with javac),
# curl (scripts/flink.sh and scripts/airflow.sh poll REST APIs with it), chromium and a font
# (scripts/screenshot.py: headless screenshots of the Airflow UI), PostgreSQL's server binaries
# (scripts/postgres.sh runs the project's own cluster for the local Airflow's metadata DB; the
# package's own cluster is never started or touched by the project), Prometheus (scripts/prometheus.sh
# runs its own on loopback for the autoscaler's metrics; the package's service is never started), Redis
# (scripts/redis.sh runs its own as the cluster mode's Celery broker; the package's service is never used).
packages=()
need_java && packages+=(openjdk-17-jdk-headless)
command -v curl >/dev/null 2>&1 || packages+=(curl)
[ -x /usr/bin/chromium ] || packages+=(chromium)
have_deb fonts-dejavu-core || packages+=(fonts-dejavu-core)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || packages+=(postgresql)
bare=() # without their recommends: prometheus would pull in node-exporter, ipmitool and a dozen more
command -v prometheus >/dev/null 2>&1 || bare+=(prometheus)
command -v redis-server >/dev/null 2>&1 || bare+=(redis-server)
if [ ${#packages[@]} -gt 0 ] || [ ${#bare[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages (a few minutes the first time): ${packages[*]} ${bare[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); else SUDO=(); fi
  "${SUDO[@]}" apt-get update -q
  [ ${#packages[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q "${packages[@]}"
  [ ${#bare[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${bare[@]}"
fi

"$PYTHON" - <<'PY'
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit(f"bootstrap: Python 3.11 is required, found {sys.version.split()[0]}")
PY

stamp=.venv/.bootstrap-stamp
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
  exit 0
fi
# pip's own output, less the one warning per package a machine's unused local index gives ("Location
# 'file:///opt/pypi/simple/x/' is ignored"): hundreds of lines that hid every line of ours.
quiet_pip() {
  .venv/bin/python -m pip "$@" 2>&1 | { grep -v "^WARNING: Location 'file://.*' is ignored" || true; } >&2
}
t0=$SECONDS
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
echo "bootstrap: [1/3] upgrading pip in .venv" >&2
quiet_pip install -q --upgrade pip
echo "bootstrap: [2/3] installing $(grep -c '==' requirements.txt) pinned packages from requirements.txt (about 4 min the first time)" >&2
quiet_pip install -q -r requirements.txt
echo "bootstrap: [3/3] installing the project's core (include/) in development mode" >&2
quiet_pip install -q --no-deps -e .
# setuptools also leaves the project's metadata in ./ds2_autoscaler.egg-info: a process with the repository on
# its path (pytest, python -c) would see the provider's entry points twice, and Airflow would report each
# plugin as "already registered". The editable install's own metadata is in .venv.
rm -rf ds2_autoscaler.egg-info
echo "$want" > "$stamp"
echo "bootstrap: environment ready in .venv in $((SECONDS - t0)) s" >&2
