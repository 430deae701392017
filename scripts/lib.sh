# Shell helpers shared by scripts/flink.sh, airflow.sh, postgres.sh and spark.sh. Sourced, never run.
# The sourcing script sets SCRIPT_NAME (the prefix of its messages) and PYTHON (the venv's python)
# before it sources this file.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${PYTHON:=$ROOT/.venv/bin/python}"
: "${SCRIPT_NAME:=$(basename "$0")}"

log() { echo "$SCRIPT_NAME: $*" >&2; }
die() {
  echo "$SCRIPT_NAME: error: $*" >&2
  exit 1
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# Dies unless every named variable holds an unsigned integer.
check_uints() {
  local v
  for v in "$@"; do
    is_uint "${!v}" || die "$v must be a number, got '${!v}'"
  done
}

now_ms() { date +%s%3N; }
secs_since() { # $1 = start in ms -> "12.3"
  local d=$(($(now_ms) - $1))
  printf '%d.%d' $((d / 1000)) $((d % 1000 / 100))
}

need_python() {
  [ -x "$PYTHON" ] || die "$PYTHON is missing: run 'make setup' first"
}

# The start time of a live process (clock ticks since boot: a recycled pid differs); fails for a
# process that is gone or a zombie.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  [ "$1" != Z ] || return 1
  echo "${20}"
}

# The pid recorded in pid file $1 ("<pid> <start ticks>") when that process still runs as the one
# that was started; nothing otherwise, so a recycled pid is never signalled.
live_pid() {
  local pid start now
  [ -f "$1" ] || return 0
  read -r pid start <"$1" || true
  is_uint "${pid:-}" && is_uint "${start:-}" || return 0
  now=$(proc_start "$pid") || return 0
  [ "$now" = "$start" ] && echo "$pid"
  return 0
}

# Something listens on 127.0.0.1:$1 (a TCP connect succeeds).
port_taken() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The first port from $1 on (at most $2 tries, default 100) that nothing listens on.
first_free_port() {
  local p=$1 end=$(($1 + ${2:-100}))
  while [ "$p" -lt "$end" ]; do
    port_taken "$p" || {
      echo "$p"
      return 0
    }
    p=$((p + 1))
  done
  die "no free port in $1..$((end - 1))"
}

# A random secret of $1 (default 32) letters and digits: safe in URLs, YAML and shell words.
random_secret() {
  local n=${1:-32} s=""
  while [ ${#s} -lt "$n" ]; do
    s+=$(head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  done
  echo "${s:0:$n}"
}

squote() { # a value in single quotes, for bash
  local q="'\\''"
  printf "'%s'" "${1//\'/$q}"
}

# Sends SIGTERM to the given pids, waits up to STOP_TIMEOUT s for them to exit, then SIGKILLs what
# is left. Fails when a pid survives SIGKILL.
# "<pid> <component>" for each of COMPONENTS running (pid files in PID_DIR, checked by live_pid).
component_pids() {
  local c pid
  for c in "${COMPONENTS[@]}"; do
    pid=$(live_pid "$PID_DIR/$c.pid")
    [ -n "$pid" ] && echo "$pid $c"
  done
  return 0
}

stop_pids() {
  local deadline pid left
  kill -TERM "$@" 2>/dev/null || true
  deadline=$(($(date +%s) + ${STOP_TIMEOUT:-30}))
  while :; do
    left=()
    for pid in "$@"; do
      proc_start "$pid" >/dev/null && left+=("$pid")
    done
    [ ${#left[@]} -eq 0 ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "still running after ${STOP_TIMEOUT:-30} s, killing: ${left[*]}"
      kill -KILL "${left[@]}" 2>/dev/null || true
      sleep 1
      for pid in "${left[@]}"; do
        proc_start "$pid" >/dev/null && {
          log "could not stop pid $pid"
          return 1
        }
      done
      return 0
    fi
    sleep 0.2
  done
}

# Stops the process recorded in pid file $1 (SIGTERM, then SIGKILL after STOP_TIMEOUT) and removes the file:
# the 'down' of a service of one process.
stop_recorded() {
  local pid t0
  pid=$(live_pid "$1")
  if [ -z "$pid" ]; then
    rm -f "$1"
    log "not running"
    return 0
  fi
  t0=$(now_ms)
  stop_pids "$pid" || die "could not stop pid $pid"
  rm -f "$1"
  log "stopped (pid $pid) in $(secs_since "$t0") s"
}

# Waits until "$@" (a readiness check) succeeds; dies, with the log's tail, when the process recorded in the
# pid file $2 exits first or START_TIMEOUT s pass. $1 names the process, $3 is its log.
wait_answering() { # $1 what, $2 pid file, $3 log, then the check
  local what=$1 pid_file=$2 log_file=$3 deadline=$(($(date +%s) + START_TIMEOUT))
  shift 3
  until "$@"; do
    if [ -z "$(live_pid "$pid_file")" ]; then
      tail -n 30 "$log_file" >&2 || true
      die "$what exited during start-up (log: $log_file)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 30 "$log_file" >&2 || true
      die "$what is not answering within $START_TIMEOUT s (log: $log_file); 'scripts/$SCRIPT_NAME down' stops it"
    fi
    sleep 0.2
  done
}

# The status line of a one-process service; exit 3 stopped, 1 running but not answering, 0 serving.
service_status() { # $1 name, $2 pid (empty: stopped), $3 address, $4 data dir, $5 log, then the readiness check
  local name=$1 pid=$2 address=$3 data=$4 log_file=$5
  shift 5
  if [ -z "$pid" ]; then
    echo "$name: stopped (data $data)"
    return 3
  fi
  if ! "$@"; then
    echo "$name: running (pid $pid) but not answering on $address (log: $log_file)"
    return 1
  fi
  echo "$name: running on $address (pid $pid, data $data)"
}

# The java to run (JAVA_HOME's, else the PATH's); an error when there is none.
java_cmd() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"; else command -v java || die "java (17+) is missing"; fi
}

# mvn dependency:copy-dependencies of profile $2 of pom $1 into folder $3 (replaced atomically); Maven's
# output is shown only when it fails.
maven_resolve() { # $1 pom, $2 profile, $3 folder
  command -v mvn >/dev/null 2>&1 || die "Maven (mvn) is missing: it resolves the $2 jars from Maven Central"
  local tmp=$3.tmp pom_name=${1#"$ROOT"/}
  mkdir -p "$(dirname "$3")"
  rm -rf "$tmp"
  log "resolving the $2 jars from Maven Central ($pom_name) into $3"
  if ! mvn -q -B -f "$1" -P "$2" dependency:copy-dependencies -DoutputDirectory="$tmp" \
    -Dmaven.repo.local="${MAVEN_REPO:-$HOME/.m2/repository}" >"$tmp.log" 2>&1; then
    cat "$tmp.log" >&2
    die "mvn could not resolve the $2 jars ($pom_name)"
  fi
  rm -f "$tmp.log"
  rm -rf "$(dirname "$1")/target" "$3"
  mv "$tmp" "$3"
}

# The header comment of the sourcing script (from line 2 to 'set -euo'), as its usage text.
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
}

# Runs cmd_<command> of the sourcing script ('-' in the command becomes '_') with the other
# arguments; the usage text for none, -h, --help or help; an error for an unknown command.
dispatch() {
  [ $# -ge 1 ] || {
    usage
    exit 2
  }
  local cmd=$1
  shift
  case $cmd in -h | --help | help)
    usage
    return 0
    ;;
  esac
  if [[ $cmd =~ ^[a-z][a-z-]*$ ]] && declare -F "cmd_${cmd//-/_}" >/dev/null; then
    "cmd_${cmd//-/_}" "$@"
  else
    usage
    die "unknown command '$cmd'"
  fi
}
