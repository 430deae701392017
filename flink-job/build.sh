#!/usr/bin/env bash
# Builds, with plain javac + jar against the Flink 2.3 distribution in build/flink-2.3.0
# (scripts/flink.sh install), no Maven:
#   build/ds2-testjob.jar     the DS2 test job (flink-job/src);
#   build/ds2-sql-runner.jar  a generic runner that submits a Flink SQL script as one job
#                             (flink-job/sql-runner; see SqlRunner.java for why);
#   build/ds2-prometheus-loopback.jar
#                             Flink's Prometheus reporter bound to one address (flink-job/prometheus-loopback;
#                             scripts/flink.sh --prometheus installs it beside Flink's reporter).
# Idempotent: a jar is rebuilt only when a source, its manifest or this script is newer.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FLINK_HOME=${FLINK_HOME:-$ROOT/build/flink-2.3.0}

die() {
  echo "flink-job/build.sh: error: $*" >&2
  exit 1
}

# build_jar SOURCES MANIFEST JAR: javac + jar, unless JAR is newer than every source, the manifest
# and this script.
build_jar() {
  local src=$1 manifest=$2 jar=$3 classpath=${4:-} resources=${5:-} classes
  classes=${jar%.jar}-classes
  local inputs=("$src" "$manifest" "${BASH_SOURCE[0]}")
  [ -z "$resources" ] || inputs+=("$resources")
  if [ -f "$jar" ] && [ -z "$(find "${inputs[@]}" -newer "$jar" -print -quit)" ]; then
    echo "flink-job/build.sh: $jar is up to date" >&2
    return 0
  fi
  local sources
  mapfile -t sources < <(find "$src" -name '*.java' | sort)
  [ ${#sources[@]} -gt 0 ] || die "no Java sources under $src"
  rm -rf "$classes"
  mkdir -p "$classes"
  javac --release 17 -encoding UTF-8 -Xlint:deprecation,unchecked,rawtypes \
    -cp "$FLINK_HOME/lib/*${classpath:+:$classpath}" -d "$classes" "${sources[@]}"
  [ -z "$resources" ] || cp -r "$resources"/. "$classes"/
  jar cfm "$jar.tmp" "$manifest" -C "$classes" .
  mv "$jar.tmp" "$jar"
  echo "flink-job/build.sh: built $jar (${#sources[@]} sources)" >&2
}

if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
  die "javac and jar (a JDK 17+) are required"
fi
dist=("$FLINK_HOME"/lib/flink-dist-*.jar)
[ -f "${dist[0]}" ] || die "no Flink distribution in $FLINK_HOME: run 'scripts/flink.sh install'"
mkdir -p "$ROOT/build"
build_jar "$ROOT/flink-job/src/main/java" "$ROOT/flink-job/MANIFEST.MF" "$ROOT/build/ds2-testjob.jar"
build_jar "$ROOT/flink-job/sql-runner/src/main/java" "$ROOT/flink-job/sql-runner/MANIFEST.MF" "$ROOT/build/ds2-sql-runner.jar"
reporter=("$FLINK_HOME"/plugins/metrics-prometheus/flink-metrics-prometheus-*.jar)
[ -f "${reporter[0]}" ] || die "no Prometheus reporter plugin in $FLINK_HOME/plugins/metrics-prometheus"
build_jar "$ROOT/flink-job/prometheus-loopback/src/main/java" "$ROOT/flink-job/prometheus-loopback/MANIFEST.MF" \
  "$ROOT/build/ds2-prometheus-loopback.jar" "${reporter[0]}" "$ROOT/flink-job/prometheus-loopback/src/main/resources"
