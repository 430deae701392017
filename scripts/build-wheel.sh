#!/usr/bin/env bash
# Builds the provider's wheel into dist/ (or $1): the core (include/autoscaler), the Airflow provider
# (plugins/ds2_airflow), the policy's Spark job (spark_jobs) and, as package data, the observe templates and the
# test job's and SQL runner's jars (flink-job/build.sh, against the Flink that scripts/flink.sh installs).
# The sources are staged in a temporary folder first, so the build writes nothing into the checkout (setuptools
# would otherwise put build/lib and *.egg-info here). Prints the wheel's path.
#
#   scripts/build-wheel.sh [OUT_DIR]
set -euo pipefail

SCRIPT_NAME=build-wheel.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_python
OUT=$(realpath -m "${1:-$ROOT/dist}")

"$ROOT/scripts/flink.sh" install >&2
"$ROOT/flink-job/build.sh" >&2
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
for path in pyproject.toml README.md include/autoscaler plugins/ds2_airflow spark_jobs; do
  mkdir -p "$STAGE/$(dirname "$path")"
  cp -r "$ROOT/$path" "$STAGE/$path"
done
mkdir -p "$STAGE/include/autoscaler/jars"
cp "$ROOT/build/ds2-testjob.jar" "$ROOT/build/ds2-sql-runner.jar" "$STAGE/include/autoscaler/jars/"
find "$STAGE" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$OUT"
log "building the wheel (setuptools, pinned in pyproject.toml) into $OUT"
# pip's output only when it fails; the local index's "Location ... is ignored" lines never.
if ! "$PYTHON" -m pip wheel --no-deps --wheel-dir "$STAGE/dist" "$STAGE" >"$STAGE/pip.log" 2>&1; then
  grep -v "^WARNING: Location 'file://.*' is ignored" "$STAGE/pip.log" >&2
  die "pip wheel failed"
fi
wheel=$(find "$STAGE/dist" -name 'ds2_autoscaler-*.whl' | head -n1)
[ -n "$wheel" ] || die "pip wheel made no ds2_autoscaler wheel"
cp "$wheel" "$OUT/"
echo "$OUT/$(basename "$wheel")"
