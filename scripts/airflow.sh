#!/usr/bin/env bash
# A local Apache Airflow 3.3 (PostgreSQL, loopback only) for development, the demo and integration
# tests: api-server, scheduler, dag-processor and triggerer as separate processes, with the
# LocalExecutor; or, with AIRFLOW_EXECUTOR=CeleryExecutor (the cluster mode), Celery workers as
# further processes on the project's Redis broker (scripts/redis.sh), with the settings of
# conf/airflow/celery.env, the file the compose deployment reads too.
#
#   scripts/airflow.sh up        start the project's PostgreSQL (scripts/postgres.sh up) and create
#                                this instance's database, migrate it, run ds2_airflow.bootstrap (when
#                                it exists), start the four processes, wait until
#                                /api/v2/monitor/health is all healthy
#   scripts/airflow.sh down      stop the processes this instance started (SIGTERM, then SIGKILL)
#   scripts/airflow.sh status    exit 0 running and healthy, 3 stopped, 1 running but not healthy
#   scripts/airflow.sh env       print the exports of this instance: eval "$(scripts/airflow.sh env)"
#                                then run 'airflow ...' CLI commands against the same home
#   scripts/airflow.sh token     print a JWT for the admin user (POST /auth/token)
#
# Environment: AIRFLOW_HOME (data/airflow: one instance's logs, pid files and settings; tests use
# their own), PG_DATA_DIR (data/postgres: the PostgreSQL server holding the metadata DB, one
# database per AIRFLOW_HOME; several instances may share a server; 'down' leaves it running,
# 'scripts/postgres.sh down' stops it), AIRFLOW_PORT (8080), AIRFLOW_DAGS_FOLDER (dags/), AIRFLOW_PLUGINS_FOLDER (plugins/),
# AIRFLOW_PARALLELISM (4), AIRFLOW_EXECUTOR (LocalExecutor or CeleryExecutor), AIRFLOW_CELERY_WORKERS (2:
# the Celery workers, celery-worker-1..N), REDIS_DATA_DIR (data/redis: the broker, started by 'up' with
# the CeleryExecutor, left running by 'down' as PostgreSQL is), AIRFLOW_ALL_ADMINS (0; 1: no login, everyone is admin, as headless
# screenshots need), AIRFLOW_START_TIMEOUT (120 s), AIRFLOW_STOP_TIMEOUT (30 s), FLINK_REST_PORT
# (8081, for the default flink_default connection). User: admin, its password generated per instance
# (kept in AIRFLOW_HOME/admin-password, never printed; AIRFLOW_ADMIN_PASSWORD sets it), and
# AIRFLOW_USERS ("name:role,...": more users, passwords generated into AIRFLOW_HOME/user-passwords/),
# AIRFLOW_WORKER_DATA_DIRS (0; 1: each Celery worker's DS2_DATA_DIR is hosts/<worker> under it, as on separate hosts).
# Passed through to every process and recorded for 'env': AIRFLOW__*, AIRFLOW_CONN_*, AIRFLOW_VAR_*
# and DS2_* from the caller (the settings that define the instance cannot be overridden).
# Defaults when unset: AIRFLOW_CONN_FLINK_DEFAULT (127.0.0.1:FLINK_REST_PORT), AIRFLOW_CONN_SPARK_DS2
# (local[*]). The virtual environment's bin comes first on PATH (SparkSubmitHook runs 'spark-submit').
set -euo pipefail

SCRIPT_NAME=airflow.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV_BIN=$ROOT/.venv/bin
AIRFLOW=$VENV_BIN/airflow
POSTGRES_SH=$ROOT/scripts/postgres.sh
REDIS_SH=$ROOT/scripts/redis.sh
CELERY_ENV=$ROOT/conf/airflow/celery.env

HOME_DIR=$(realpath -m "${AIRFLOW_HOME:-$ROOT/data/airflow}")
LOG_DIR=$HOME_DIR/logs
PID_DIR=$HOME_DIR/pids
INSTANCE_ENV=$HOME_DIR/ds2-airflow.env # the exports of the running instance (written by 'up')
SECRETS=$HOME_DIR/ds2-secrets.env      # JWT, API and Fernet keys: shared by all processes, kept
PASSWORDS=$HOME_DIR/simple_auth_manager_passwords.json
PG_DIR=$(realpath -m "${PG_DATA_DIR:-$ROOT/data/postgres}")
export PG_DATA_DIR=$PG_DIR
REDIS_DIR=$(realpath -m "${REDIS_DATA_DIR:-$ROOT/data/redis}")
export REDIS_DATA_DIR=$REDIS_DIR

PORT=${AIRFLOW_PORT:-8080}
DAGS_FOLDER=${AIRFLOW_DAGS_FOLDER:-$ROOT/dags}
PLUGINS_FOLDER=${AIRFLOW_PLUGINS_FOLDER:-$ROOT/plugins}
PARALLELISM=${AIRFLOW_PARALLELISM:-4}
ALL_ADMINS=${AIRFLOW_ALL_ADMINS:-0}
START_TIMEOUT=${AIRFLOW_START_TIMEOUT:-120}
STOP_TIMEOUT=${AIRFLOW_STOP_TIMEOUT:-30}
FLINK_PORT=${FLINK_REST_PORT:-8081}
ADMIN_USER=admin
# The admin's password: generated once per instance (AIRFLOW_HOME) and kept, readable by its owner
# only, in this file; AIRFLOW_ADMIN_PASSWORD sets it instead.
ADMIN_PASSWORD_FILE=$HOME_DIR/admin-password
# More users, "name:role,..." (roles of the SimpleAuthManager: viewer, user, op, admin), each with a
# generated password kept in USER_PASSWORDS_DIR/<name>: e.g. an approver and a colleague who is not.
EXTRA_USERS=${AIRFLOW_USERS:-}
USER_PASSWORDS_DIR=$HOME_DIR/user-passwords
EXECUTOR=${AIRFLOW_EXECUTOR:-LocalExecutor}
# The auth manager: simple (Airflow's SimpleAuthManager: roles viewer, user, op, admin for every DAG) or fab
# (the FAB provider's: roles with per-DAG permissions, users and roles made with 'airflow users|roles ...').
AUTH_MANAGER=${AIRFLOW_AUTH_MANAGER:-simple}
CELERY_WORKERS=${AIRFLOW_CELERY_WORKERS:-2}

check_uints PORT PARALLELISM START_TIMEOUT STOP_TIMEOUT FLINK_PORT
AIRFLOW_CELERY_WORKERS=$CELERY_WORKERS check_uints AIRFLOW_CELERY_WORKERS # by the name the user sets
case $EXECUTOR in LocalExecutor | CeleryExecutor) ;; *) die "AIRFLOW_EXECUTOR must be LocalExecutor or CeleryExecutor, got '$EXECUTOR'" ;; esac
[ "$CELERY_WORKERS" -ge 1 ] && [ "$CELERY_WORKERS" -le 16 ] || die "AIRFLOW_CELERY_WORKERS must be 1 to 16, got '$CELERY_WORKERS'"

# The processes of an instance: the four services, and the Celery workers with the CeleryExecutor.
set_components() { # $1 executor, $2 Celery workers
  COMPONENTS=(api-server scheduler dag-processor triggerer)
  if [ "$1" = CeleryExecutor ]; then
    local i
    for ((i = 1; i <= $2; i++)); do COMPONENTS+=("celery-worker-$i"); done
  fi
}
set_components "$EXECUTOR" "$CELERY_WORKERS"
case $ALL_ADMINS in 0 | 1) ;; *) die "AIRFLOW_ALL_ADMINS must be 0 or 1, got '$ALL_ADMINS'" ;; esac
case $AUTH_MANAGER in simple | fab) ;; *) die "AIRFLOW_AUTH_MANAGER must be simple or fab, got '$AUTH_MANAGER'" ;; esac
[ "$AUTH_MANAGER" = simple ] || [ "$ALL_ADMINS" = 0 ] || die "AIRFLOW_ALL_ADMINS=1 is the simple auth manager's: use AIRFLOW_AUTH_MANAGER=simple"
[ "$AUTH_MANAGER" = simple ] || [ -z "$EXTRA_USERS" ] || die "AIRFLOW_USERS are the simple auth manager's: with fab make users with 'airflow users create'"
[[ -z $EXTRA_USERS || $EXTRA_USERS =~ ^[a-z][a-z0-9_-]{0,31}:(viewer|user|op|admin)(,[a-z][a-z0-9_-]{0,31}:(viewer|user|op|admin))*$ ]] ||
  die "AIRFLOW_USERS must be name:role,... (names: lowercase letters, digits, _ or -; roles: viewer, user, op, admin), got '$EXTRA_USERS'"

# This instance's database on the project's PostgreSQL: one per AIRFLOW_HOME, named after its path.
DB_NAME=airflow_$(printf '%s' "$HOME_DIR" | sha256sum | cut -c1-12)

# The hint for running the CLI against this instance, exactly as it must be typed.
cli_hint() {
  local prefix=""
  [ "$HOME_DIR" = "$(realpath -m "$ROOT/data/airflow")" ] || prefix="AIRFLOW_HOME=$(printf '%q' "$HOME_DIR") "
  echo "eval \"\$(${prefix}scripts/airflow.sh env)\"; airflow dags list"
}

# ---------------------------------------------------------------------------------------------
# the instance's environment

# Generated once per AIRFLOW_HOME: every process must sign and check JWTs with the same key, and
# the Fernet key must outlive restarts (it encrypts connections stored in the DB).
ensure_secrets() {
  [ -s "$SECRETS" ] && return 0
  need_python
  (
    umask 077
    "$PYTHON" - >"$SECRETS.tmp" <<'PY'
import secrets

from cryptography.fernet import Fernet

print(f"AIRFLOW__API_AUTH__JWT_SECRET={secrets.token_urlsafe(48)}")
print(f"AIRFLOW__API__SECRET_KEY={secrets.token_urlsafe(32)}")
print(f"AIRFLOW__CORE__FERNET_KEY={Fernet.generate_key().decode()}")
PY
  )
  mv "$SECRETS.tmp" "$SECRETS"
}

# Writes INSTANCE_ENV: "export K=V" lines (quoted for bash) that 'up' sources and 'env' prints.
write_instance_env() {
  ensure_secrets
  ensure_admin_password
  ensure_user_passwords
  local -A vals=()
  local k line
  # The caller's settings first ...
  while IFS= read -r k; do
    vals[$k]=${!k}
  done < <(compgen -e | grep -E '^(AIRFLOW__|AIRFLOW_CONN_|AIRFLOW_VAR_|DS2_)' || true)
  # ... our defaults where the caller has none ...
  local admins=False
  [ "$ALL_ADMINS" = 1 ] && admins=True
  local -A defaults=(
    [AIRFLOW__CORE__PARALLELISM]=$PARALLELISM
    [AIRFLOW__CORE__LOAD_EXAMPLES]=False
    [AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION]=False
    [AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL]=10
    [AIRFLOW__API__WORKERS]=1
    [AIRFLOW_CONN_FLINK_DEFAULT]="{\"conn_type\":\"flink\",\"host\":\"127.0.0.1\",\"port\":$FLINK_PORT}"
    [AIRFLOW_CONN_SPARK_DS2]='{"conn_type":"spark","host":"local[*]"}'
  )
  if [ "$EXECUTOR" = CeleryExecutor ]; then
    # The deployment's Celery settings (the compose file reads the same file); a caller's value wins.
    while IFS= read -r line; do
      [[ $line =~ ^AIRFLOW__[A-Z0-9_]+= ]] && defaults[${line%%=*}]=${line#*=}
    done <"$CELERY_ENV"
  fi
  for k in "${!defaults[@]}"; do
    [ -n "${vals[$k]+set}" ] || vals[$k]=${defaults[$k]}
  done
  # ... and the settings that define the instance, always ours (a caller's value is ignored).
  local base=http://127.0.0.1:$PORT
  vals[AIRFLOW__CORE__EXECUTOR]=$EXECUTOR
  if [ "$EXECUTOR" = CeleryExecutor ]; then
    vals[AIRFLOW__CELERY__BROKER_URL]=$("$REDIS_SH" url) || die "no broker: scripts/redis.sh url failed"
    vals[AIRFLOW_CELERY_WORKERS]=$CELERY_WORKERS
    vals[REDIS_DATA_DIR]=$REDIS_DIR
  fi
  # PostgreSQL, not SQLite: SQLite cannot serve backfill creation while the scheduler writes
  # ("Database is locked ... Please use PostgreSQL or MySQL").
  vals[AIRFLOW__DATABASE__SQL_ALCHEMY_CONN]=$("$POSTGRES_SH" url "$DB_NAME") || die "could not create the metadata database $DB_NAME"
  vals[AIRFLOW__CORE__DAGS_FOLDER]=$DAGS_FOLDER
  vals[AIRFLOW__CORE__PLUGINS_FOLDER]=$PLUGINS_FOLDER
  vals[AIRFLOW__API__HOST]=127.0.0.1
  vals[AIRFLOW__API__PORT]=$PORT
  vals[AIRFLOW__API__BASE_URL]=$base
  vals[AIRFLOW__CORE__EXECUTION_API_SERVER_URL]=$base/execution/
  if [ "$AUTH_MANAGER" = fab ]; then
    vals[AIRFLOW__CORE__AUTH_MANAGER]=airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager
  else
    vals[AIRFLOW__CORE__AUTH_MANAGER]=airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
  fi
  vals[AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS]=$ADMIN_USER:admin${EXTRA_USERS:+,$EXTRA_USERS}
  vals[AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE]=$PASSWORDS
  vals[AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS]=$admins
  while IFS= read -r line; do
    [ -n "$line" ] && vals[${line%%=*}]=${line#*=}
  done <"$SECRETS"
  vals[SPARK_LOCAL_IP]=127.0.0.1
  vals[AIRFLOW_HOME]=$HOME_DIR
  vals[PG_DATA_DIR]=$PG_DIR
  (
    umask 077
    {
      echo "# scripts/airflow.sh: the environment of the Airflow instance in $HOME_DIR"
      for k in $(printf '%s\n' "${!vals[@]}" | sort); do
        printf 'export %s=%s\n' "$k" "$(squote "${vals[$k]}")"
      done
      printf 'export PATH=%q:"$PATH"\n' "$VENV_BIN"
    } >"$INSTANCE_ENV.tmp"
  )
  mv "$INSTANCE_ENV.tmp" "$INSTANCE_ENV"
  # SimpleAuthManager keeps passwords in this file (it only adds missing users).
  (
    umask 077
    {
      printf '{"%s": "%s"' "$ADMIN_USER" "$(head -n1 "$ADMIN_PASSWORD_FILE")"
      local entry name
      for entry in ${EXTRA_USERS//,/ }; do
        name=${entry%%:*}
        printf ', "%s": "%s"' "$name" "$(head -n1 "$USER_PASSWORDS_DIR/$name")"
      done
      printf '}\n'
    } >"$PASSWORDS"
  )
}

# The admin's password (see ADMIN_PASSWORD_FILE); NEW_PASSWORD=1 after one was generated just now.
NEW_PASSWORD=0
ensure_user_passwords() { # one generated password per user of AIRFLOW_USERS, kept across restarts
  local entry name
  [ -n "$EXTRA_USERS" ] || return 0
  (umask 077 && mkdir -p "$USER_PASSWORDS_DIR")
  for entry in ${EXTRA_USERS//,/ }; do
    name=${entry%%:*}
    [ -s "$USER_PASSWORDS_DIR/$name" ] || (umask 077 && random_secret 24 >"$USER_PASSWORDS_DIR/$name")
  done
}

ensure_admin_password() {
  if [ -n "${AIRFLOW_ADMIN_PASSWORD:-}" ]; then
    [[ $AIRFLOW_ADMIN_PASSWORD =~ ^[A-Za-z0-9._~+-]{1,128}$ ]] || die "AIRFLOW_ADMIN_PASSWORD: use 1-128 letters, digits or . _ ~ + -"
    (umask 077 && printf '%s\n' "$AIRFLOW_ADMIN_PASSWORD" >"$ADMIN_PASSWORD_FILE")
  elif [ ! -s "$ADMIN_PASSWORD_FILE" ]; then
    (umask 077 && random_secret 24 >"$ADMIN_PASSWORD_FILE")
    NEW_PASSWORD=1
  fi
}

# The port of the instance as recorded by 'up' (the caller's AIRFLOW_PORT may differ).
recorded_port() {
  [ -f "$INSTANCE_ENV" ] && sed -n "s/^export AIRFLOW__API__PORT='\\{0,1\\}\\([0-9]*\\)'\\{0,1\\}\$/\\1/p" "$INSTANCE_ENV" | head -n1
}

load_instance_env() {
  # shellcheck disable=SC1090
  source "$INSTANCE_ENV"
  PORT=$AIRFLOW__API__PORT
  BASE_URL=$AIRFLOW__API__BASE_URL
  # What the instance was started with, whatever the caller's environment says now.
  EXECUTOR=$AIRFLOW__CORE__EXECUTOR
  CELERY_WORKERS=${AIRFLOW_CELERY_WORKERS:-$CELERY_WORKERS}
  set_components "$EXECUTOR" "$CELERY_WORKERS"
}

# ---------------------------------------------------------------------------------------------
# processes

component_pid() { live_pid "$PID_DIR/$1.pid"; }

# "<pid> <component>" per running process of this instance: every pid file, so that 'down' also stops
# the Celery workers of an instance whose caller did not say which executor it runs.
our_daemons() {
  local f pid
  for f in "$PID_DIR"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(live_pid "$f")
    [ -n "$pid" ] && echo "$pid $(basename "$f" .pid)"
  done
  return 0
}

running_count() { our_daemons | wc -l; }

# Every Celery worker of the instance answers a ping over the broker; prints those that do not.
celery_check() {
  local workers=() c
  for c in "${COMPONENTS[@]}"; do
    [[ $c == celery-worker-* ]] && workers+=("$c")
  done
  [ ${#workers[@]} -gt 0 ] || return 0
  "$PYTHON" - "${workers[@]}" 2>/dev/null <<'PY' || { echo "celery workers not answering"; return 1; }
import sys

from airflow.providers.celery.executors.celery_executor import app

want = set(sys.argv[1:])
replies = app.control.ping(timeout=2.0) or []
seen = {name.split("@", 1)[0] for reply in replies for name in reply}
missing = sorted(want - seen)
print(f"celery workers not answering: {', '.join(missing)}" if missing else "")
sys.exit(1 if missing else 0)
PY
}

# A whole process group (the component and the children it forked) has exited. Zombies count as
# gone: the components are orphans once 'up' returns, and some inits reap them late.
group_gone() {
  ! ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# ---------------------------------------------------------------------------------------------
# REST

health_json() { curl -s --max-time 3 "http://127.0.0.1:$PORT/api/v2/monitor/health"; }

api_answers() { curl -s -o /dev/null --max-time 3 "http://127.0.0.1:$PORT/api/v2/monitor/health"; }

# Reads a health body on stdin; exit 0 when all four are healthy, else prints what is not. With $1
# (epoch seconds), a component's heartbeat must also be at least that recent: the health endpoint
# reads heartbeats from the DB, where those of the previous run still look healthy for a while.
health_check() {
  "$PYTHON" -c '
import json, sys
from datetime import datetime
since = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
try:
    h = json.load(sys.stdin)
except ValueError:
    print("no JSON from the health endpoint"); sys.exit(1)
bad = []
for k in ("metadatabase", "scheduler", "dag_processor", "triggerer"):
    c = h.get(k) or {}
    beat = c.get(f"latest_{k}_heartbeat")
    st = c.get("status")
    if st != "healthy":
        bad.append(f"{k}={st}")
    elif since and beat and datetime.fromisoformat(beat).timestamp() < since:
        bad.append(f"{k}=starting")
print(", ".join(bad)); sys.exit(1 if bad else 0)' "$@"
}

log_tail() {
  local c f
  for c in "$@"; do
    f=$LOG_DIR/$c.log
    [ -s "$f" ] || continue
    echo "----- last lines of $f" >&2
    tail -n 25 "$f" >&2
  done
}

wait_healthy() { # $1: epoch seconds the components were started (0: any heartbeat will do)
  local since=${1:-0} deadline=$(($(date +%s) + START_TIMEOUT)) body why c
  while :; do
    for c in "${COMPONENTS[@]}"; do
      if [ -z "$(component_pid "$c")" ]; then
        log_tail "$c"
        log "$c exited during start-up (log: $LOG_DIR/$c.log)"
        return 1
      fi
    done
    if body=$(health_json) && why=$(health_check "$since" <<<"$body") && why=$(celery_check); then
      return 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log_tail "${COMPONENTS[@]}"
      log "not healthy after $START_TIMEOUT s (${why:-no answer from http://127.0.0.1:$PORT})"
      return 1
    fi
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------------------------
# up / down / status / env / token

start_component() {
  local c=$1 args=() pid pgid start
  case $c in
    api-server) args=(api-server --host 127.0.0.1 --port "$PORT") ;;
    # LocalExecutor: the api-server reads task logs from the local files, so the log servers
    # (which would bind every interface on fixed ports) are not started.
    scheduler | triggerer) args=("$c" --skip-serve-logs) ;;
    # Same for the workers: every process of this mode runs on this host and writes the same log folder.
    celery-worker-*) args=(celery worker --celery-hostname "$c@%h" --skip-serve-logs) ;;
    *) args=("$c") ;;
  esac
  echo "===== $(date -Is) airflow ${args[*]}" >>"$LOG_DIR/$c.log"
  # A session (and process group) of its own: the component outlives the terminal, make or test
  # that started it, and 'down' can signal the group it forks. Non-interactive bash runs background
  # jobs in its own process group, so setsid does not fork and $! is the component's pid.
  local own=()
  # AIRFLOW_WORKER_DATA_DIRS=1: each Celery worker keeps its local data (DS2_DATA_DIR) in a folder of its own,
  # as workers on separate hosts do; what they share must then be on the object store (docs/object-store.md).
  if [[ $c == celery-worker-* ]] && [ "${AIRFLOW_WORKER_DATA_DIRS:-0}" = 1 ]; then
    own=(env "DS2_DATA_DIR=${DS2_DATA_DIR:-$ROOT/data}/hosts/$c")
    mkdir -p "${own[1]#DS2_DATA_DIR=}"
  fi
  setsid "${own[@]}" "$AIRFLOW" "${args[@]}" </dev/null >>"$LOG_DIR/$c.log" 2>&1 &
  pid=$!
  start=$(proc_start "$pid") || die "$c exited at once (log: $LOG_DIR/$c.log)"
  echo "$pid $start" >"$PID_DIR/$c.pid"
  pgid=$(ps -o pgid= -p "$pid" | tr -d ' ')
  [ "$pgid" = "$pid" ] || log "warning: $c (pid $pid) is not a process group leader (pgid $pgid)"
}

start_broker() { # the Celery broker (idempotent); nothing with the LocalExecutor
  [ "$EXECUTOR" = CeleryExecutor ] || return 0
  "$REDIS_SH" up || die "the Celery broker did not start (scripts/redis.sh, data $REDIS_DIR)"
}

run_bootstrap() {
  if "$PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("ds2_airflow.bootstrap") is None)' 2>/dev/null; then
    log "running ds2_airflow.bootstrap (pools, connections)"
    "$PYTHON" -m ds2_airflow.bootstrap >>"$LOG_DIR/bootstrap.log" 2>&1 || {
      log_tail bootstrap
      die "ds2_airflow.bootstrap failed (log: $LOG_DIR/bootstrap.log)"
    }
  fi
}

# With the FAB auth manager: its tables, and the admin user with the instance's password (read from its
# file by Python: never on a command line). Other users and roles: 'airflow users|roles ...'.
fab_admin() {
  "$AIRFLOW" fab-db migrate >>"$LOG_DIR/db-migrate.log" 2>&1 || {
    log_tail db-migrate
    die "airflow fab-db migrate failed (log: $LOG_DIR/db-migrate.log)"
  }
  "$PYTHON" - "$ADMIN_USER" "$ADMIN_PASSWORD_FILE" >>"$LOG_DIR/db-migrate.log" 2>&1 <<'PY' || die "could not create the FAB admin user (log: $LOG_DIR/db-migrate.log)"
import sys

from airflow.providers.fab.auth_manager.cli_commands.utils import get_application_builder

name, password_file = sys.argv[1:3]
with get_application_builder() as appbuilder:
    sm = appbuilder.sm
    if not sm.find_user(name):
        password = open(password_file, encoding="utf-8").readline().strip()
        if not sm.add_user(name, name, "admin", f"{name}@localhost", sm.find_role("Admin"), password):
            sys.exit(f"could not add the user {name}")
PY
}

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  need_python
  command -v curl >/dev/null 2>&1 || die "curl is missing (make setup installs it)"
  mkdir -p "$LOG_DIR" "$PID_DIR"
  local n t0 c since missing=()
  n=$(running_count)
  if [ "$n" -gt 0 ]; then
    local was
    was=$(recorded_port)
    [ -n "${AIRFLOW_PORT:-}" ] && [ "$AIRFLOW_PORT" != "$was" ] &&
      log "note: the instance in $HOME_DIR already runs on port $was (AIRFLOW_PORT=$AIRFLOW_PORT ignored)"
    local want_dags=$DAGS_FOLDER want_admins=False want_executor=$EXECUTOR
    [ "$ALL_ADMINS" = 1 ] && want_admins=True
    load_instance_env
    [ "$want_dags" != "$AIRFLOW__CORE__DAGS_FOLDER" ] &&
      log "note: the running instance reads DAGs from $AIRFLOW__CORE__DAGS_FOLDER ('down' first to change it)"
    [ -n "${AIRFLOW_EXECUTOR:-}" ] && [ "$want_executor" != "$AIRFLOW__CORE__EXECUTOR" ] &&
      log "note: the running instance runs the $AIRFLOW__CORE__EXECUTOR ('down' first to change it)"
    [ "$want_admins" != "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS" ] &&
      log "note: the running instance has all-admins $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS ('down' first to change it)"
    for c in "${COMPONENTS[@]}"; do
      [ -n "$(component_pid "$c")" ] || missing+=("$c")
    done
    if [ ${#missing[@]} -eq 0 ]; then
      wait_healthy || die "running but not healthy (see $LOG_DIR)"
      log "already running at $BASE_URL (pids $(our_daemons | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//'))"
      return 0
    fi
    log "restarting the stopped component(s): ${missing[*]}"
    "$POSTGRES_SH" up || die "the metadata DB's PostgreSQL did not start (scripts/postgres.sh, data $PG_DIR)"
    start_broker
    since=$(date +%s)
    for c in "${missing[@]}"; do start_component "$c"; done
    wait_healthy "$since" || die "not healthy (see $LOG_DIR)"
    log "Airflow up at $BASE_URL"
    return 0
  fi
  if api_answers; then
    die "something else answers on http://127.0.0.1:$PORT (not started from $HOME_DIR): stop it or set AIRFLOW_PORT"
  fi
  [ -d "$DAGS_FOLDER" ] || die "AIRFLOW_DAGS_FOLDER $DAGS_FOLDER is not a folder"
  t0=$(now_ms)
  "$POSTGRES_SH" up || die "the metadata DB's PostgreSQL did not start (scripts/postgres.sh, data $PG_DIR)"
  start_broker
  write_instance_env
  load_instance_env
  rm -f "$PID_DIR"/*.pid
  log "migrating the metadata DB ($DB_NAME on the PostgreSQL of $PG_DIR)"
  "$AIRFLOW" db migrate >>"$LOG_DIR/db-migrate.log" 2>&1 || {
    log_tail db-migrate
    die "airflow db migrate failed (log: $LOG_DIR/db-migrate.log)"
  }
  if [ "$AUTH_MANAGER" = fab ]; then fab_admin; fi
  run_bootstrap
  since=$(date +%s)
  for c in "${COMPONENTS[@]}"; do start_component "$c"; done
  if ! wait_healthy "$since"; then
    log "stopping what was started"
    cmd_down || true
    die "Airflow did not come up (logs in $LOG_DIR)"
  fi
  log "Airflow up at $BASE_URL in $(secs_since "$t0") s (pids $(our_daemons | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//') in $PID_DIR)"
  if [ "$ALL_ADMINS" = 1 ]; then
    log "UI: $BASE_URL (no login: everyone is admin); API token: scripts/airflow.sh token"
  else
    # The password itself is never printed: a terminal's output ends up in logs (CI's, a session's).
    if [ "$NEW_PASSWORD" = 1 ]; then
      log "UI: $BASE_URL  user: $ADMIN_USER  password: generated for this instance into $ADMIN_PASSWORD_FILE (readable by you only)"
    else
      log "UI: $BASE_URL  user: $ADMIN_USER  password: in $ADMIN_PASSWORD_FILE"
    fi
  fi
  log "CLI against this instance: $(cli_hint)"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  local daemons pids=() names=() pid c
  daemons=$(our_daemons)
  if [ -z "$daemons" ]; then
    rm -f "$PID_DIR"/*.pid 2>/dev/null || true
    log "not running"
    return 0
  fi
  while read -r pid c; do
    pids+=("$pid")
    names+=("$c")
  done <<<"$daemons"
  local t0 deadline left
  t0=$(now_ms)
  kill -TERM "${pids[@]}" 2>/dev/null || true
  deadline=$(($(date +%s) + STOP_TIMEOUT))
  while :; do
    # Each component is the leader of its own group: wait for the leader and what it forked.
    left=()
    for pid in "${pids[@]}"; do
      group_gone "$pid" || left+=("$pid")
    done
    [ ${#left[@]} -eq 0 ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "still running after $STOP_TIMEOUT s, killing the process groups: ${left[*]}"
      for pid in "${left[@]}"; do
        kill -KILL -- "-$pid" 2>/dev/null || true
      done
      sleep 1
      for pid in "${left[@]}"; do
        group_gone "$pid" || die "could not stop process group $pid"
      done
      break
    fi
    sleep 0.2
  done
  rm -f "$PID_DIR"/*.pid
  log "stopped ${names[*]} (pids ${pids[*]}) in $(secs_since "$t0") s"
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local daemons body why
  daemons=$(our_daemons)
  if [ -z "$daemons" ]; then
    PORT=$(recorded_port || true)
    PORT=${PORT:-${AIRFLOW_PORT:-8080}}
    echo "airflow: stopped (home $HOME_DIR, http://127.0.0.1:$PORT)"
    if api_answers; then
      echo "note: something not started from $HOME_DIR answers on http://127.0.0.1:$PORT"
    fi
    return 3
  fi
  load_instance_env
  echo "home: $HOME_DIR"
  echo "url: $BASE_URL"
  echo "pids: $(echo "$daemons" | sed 's/^\([0-9]*\) \(.*\)$/\2 \1/' | tr '\n' ',' | sed 's/,$//; s/,/, /g')"
  local n
  n=$(echo "$daemons" | wc -l)
  if [ "$n" -lt ${#COMPONENTS[@]} ]; then
    echo "airflow: only $n of ${#COMPONENTS[@]} components running ('scripts/airflow.sh up' restarts the others)"
    return 1
  fi
  if ! body=$(health_json); then
    echo "airflow: processes running but $BASE_URL does not answer (starting, or unhealthy: see $LOG_DIR)"
    return 1
  fi
  if ! why=$(health_check <<<"$body"); then
    echo "airflow: running, not healthy: $why"
    return 1
  fi
  if ! why=$(celery_check); then
    echo "airflow: running, not healthy: $why"
    return 1
  fi
  echo "airflow: running ($EXECUTOR), healthy"
  return 0
}

cmd_env() {
  [ $# -eq 0 ] || die "env takes no arguments"
  if [ -z "$(our_daemons)" ] || [ ! -f "$INSTANCE_ENV" ]; then
    # Not running: what 'up' would use with the current environment, when its database server runs.
    if "$POSTGRES_SH" status >/dev/null 2>&1; then
      mkdir -p "$LOG_DIR" "$PID_DIR"
      write_instance_env
    elif [ -f "$INSTANCE_ENV" ]; then
      log "note: not running, and its PostgreSQL is stopped: 'scripts/airflow.sh up' first"
    else
      die "no instance in $HOME_DIR yet: 'scripts/airflow.sh up' first"
    fi
  fi
  cat "$INSTANCE_ENV"
}

cmd_token() {
  [ $# -eq 0 ] || die "token takes no arguments"
  [ -n "$(our_daemons)" ] || die "not running (home $HOME_DIR): 'scripts/airflow.sh up' first"
  load_instance_env
  local body
  # The login reaches curl on its stdin (JSON made by Python from the password file), never on a command line.
  body=$("$PYTHON" -c 'import json, sys; print(json.dumps({"username": sys.argv[1], "password": open(sys.argv[2]).readline().strip()}))' \
    "$ADMIN_USER" "$ADMIN_PASSWORD_FILE" |
    curl -sf --max-time 10 -H 'Content-Type: application/json' -d @- "$BASE_URL/auth/token") ||
    die "POST $BASE_URL/auth/token failed"
  "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["access_token"])' <<<"$body"
}

dispatch "$@"
