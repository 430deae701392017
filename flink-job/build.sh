#!/usr/bin/env bash
# Builds build/ds2-testjob.jar, the DS2 test job, with plain javac + jar against the Flink 2.3
# distribution in build/flink-2.3.0 (scripts/flink.sh install); no Maven. Idempotent: does nothing
# while the jar is newer than every source, the manifest and this script.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FLINK_HOME=${FLINK_HOME:-$ROOT/build/flink-2.3.0}
SRC=$ROOT/flink-job/src/main/java
MANIFEST=$ROOT/flink-job/MANIFEST.MF
JAR=$ROOT/build/ds2-testjob.jar
CLASSES=$ROOT/build/ds2-testjob-classes

die() {
  echo "flink-job/build.sh: error: $*" >&2
  exit 1
}

if [ -f "$JAR" ] && [ -z "$(find "$SRC" "$MANIFEST" "${BASH_SOURCE[0]}" -newer "$JAR" -print -quit)" ]; then
  echo "flink-job/build.sh: $JAR is up to date" >&2
  exit 0
fi

if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
  die "javac and jar (a JDK 17+) are required"
fi
dist=("$FLINK_HOME"/lib/flink-dist-*.jar)
[ -f "${dist[0]}" ] || die "no Flink distribution in $FLINK_HOME: run 'scripts/flink.sh install'"

mapfile -t sources < <(find "$SRC" -name '*.java' | sort)
[ ${#sources[@]} -gt 0 ] || die "no Java sources under $SRC"

rm -rf "$CLASSES"
mkdir -p "$CLASSES"
javac --release 17 -encoding UTF-8 -Xlint:deprecation,unchecked,rawtypes \
  -cp "$FLINK_HOME/lib/*" -d "$CLASSES" "${sources[@]}"
jar cfm "$JAR.tmp" "$MANIFEST" -C "$CLASSES" .
mv "$JAR.tmp" "$JAR"
echo "flink-job/build.sh: built $JAR (${#sources[@]} sources)" >&2
