#!/usr/bin/env bash
# The project's own PostgreSQL server (Debian's postgresql binaries; a cluster initialised under
# PG_DATA_DIR, TCP on 127.0.0.1 only, its own port, scram-sha-256 passwords generated per install),
# for the metadata DB of the local Airflow instances (scripts/airflow.sh) and anything else of ours
# that needs a real database. A system PostgreSQL, and any port already taken, are left alone.
#
#   scripts/postgres.sh up           initialise the cluster once, start it, wait until it accepts
#                                    connections (idempotent)
#   scripts/postgres.sh down         stop the server this data dir started (by its pid)
#   scripts/postgres.sh status       exit 0 running and ready, 3 stopped, 1 running but not ready
#   scripts/postgres.sh url NAME     create role and database NAME when missing (each role has its own
#                                    generated password) and print its SQLAlchemy URL
#                                    (postgresql+psycopg2://NAME:...@127.0.0.1:PORT/NAME)
#   scripts/postgres.sh psql [ARGS]  psql as the cluster's admin (ARGS passed on)
#
# Environment: PG_DATA_DIR (data/postgres: the cluster in cluster/, its log in log/, the admin
# password and port in ds2-postgres.env, role passwords in roles/; all mode 0600), PG_PORT (the
# first free port from 25432 when unset; kept across restarts while it stays free),
# PG_START_TIMEOUT (60 s), PG_STOP_TIMEOUT (30 s). As root, the server runs as the 'postgres'
# user (PostgreSQL refuses to run as root), which must be able to reach PG_DATA_DIR.
set -euo pipefail

SCRIPT_NAME=postgres.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA_DIR=$(realpath -m "${PG_DATA_DIR:-$ROOT/data/postgres}")
CLUSTER=$DATA_DIR/cluster
LOG_DIR=$DATA_DIR/log
ROLES_DIR=$DATA_DIR/roles
STATE=$DATA_DIR/ds2-postgres.env # PG_PORT and PG_ADMIN_PASSWORD of this cluster
PID_FILE=$DATA_DIR/postgres.pid  # "<pid> <start ticks>" of the postmaster we started
LOCK=$DATA_DIR/.lock
ADMIN=ds2admin
# Below Linux's ephemeral range (32768-60999): a port in that range can be held by any outgoing
# connection's local end, which a connect test does not see and which makes the bind fail (a CI run
# lost 7 tests to 55432 that way).
DEFAULT_PORT=25432
START_TIMEOUT=${PG_START_TIMEOUT:-60}
STOP_TIMEOUT=${PG_STOP_TIMEOUT:-30}
check_uints START_TIMEOUT STOP_TIMEOUT
[ -z "${PG_PORT:-}" ] || check_uints PG_PORT

if [ "$(id -u)" -eq 0 ]; then SERVER_USER=postgres; else SERVER_USER=$(id -un); fi

# Debian installs the server binaries per major version; take the newest.
pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [ -n "$d" ] && [ -x "$d/initdb" ] || die "PostgreSQL server binaries not found under /usr/lib/postgresql (make setup installs Debian's postgresql)"
  echo "$d"
}

as_server() { # runs a server binary as the server user
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$SERVER_USER" -- "$@"
  else
    "$@"
  fi
}

read_state() {
  PG_ADMIN_PASSWORD=
  RECORDED_PORT=
  [ -f "$STATE" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    case $k in
      PG_PORT) RECORDED_PORT=$v ;;
      PG_ADMIN_PASSWORD) PG_ADMIN_PASSWORD=$v ;;
    esac
  done <"$STATE"
}

write_state() { # $1 port, $2 admin password
  (
    umask 077
    printf 'PG_PORT=%s\nPG_ADMIN_PASSWORD=%s\n' "$1" "$2" >"$STATE.tmp"
  )
  mv "$STATE.tmp" "$STATE"
}

our_pid() { live_pid "$PID_FILE"; } # the postmaster we started, still running

ready() { # $1 port
  "$(pg_bin)/pg_isready" -q -h 127.0.0.1 -p "$1" -t 3
}

admin_psql() {
  read_state
  PGPASSWORD=$PG_ADMIN_PASSWORD PGCONNECT_TIMEOUT=10 "$(pg_bin)/psql" -X -q -h 127.0.0.1 -p "$RECORDED_PORT" \
    -U "$ADMIN" -d postgres -v ON_ERROR_STOP=1 "$@"
}

prepare_dirs() {
  mkdir -p "$DATA_DIR" "$LOG_DIR" "$ROLES_DIR"
  chmod 700 "$ROLES_DIR"
  if [ "$(id -u)" -eq 0 ]; then
    id "$SERVER_USER" >/dev/null 2>&1 || die "user '$SERVER_USER' is missing (Debian's postgresql package creates it)"
    chown "$SERVER_USER" "$LOG_DIR"
    [ -d "$CLUSTER" ] && chown "$SERVER_USER" "$CLUSTER"
    as_server test -w "$LOG_DIR" ||
      die "the server runs as '$SERVER_USER', which cannot reach $DATA_DIR (a parent folder is private): set PG_DATA_DIR to a folder it can reach"
  fi
}

init_cluster() {
  local bin pw pwfile t0
  bin=$(pg_bin)
  t0=$(now_ms)
  pw=$(random_secret 32)
  rm -rf "$CLUSTER"
  mkdir -p "$CLUSTER"
  chmod 700 "$CLUSTER"
  pwfile=$DATA_DIR/.initdb-password
  (
    umask 077
    echo "$pw" >"$pwfile"
  )
  if [ "$(id -u)" -eq 0 ]; then chown "$SERVER_USER" "$CLUSTER" "$pwfile"; fi
  if ! as_server "$bin/initdb" -D "$CLUSTER" -U "$ADMIN" --pwfile="$pwfile" -E UTF8 --locale=C \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 >"$LOG_DIR/initdb.log" 2>&1; then
    rm -f "$pwfile"
    tail -n 20 "$LOG_DIR/initdb.log" >&2
    die "initdb failed (log: $LOG_DIR/initdb.log)"
  fi
  rm -f "$pwfile"
  # Loopback TCP only: no Unix socket (its path would be too long under a test's temp folder).
  cat >>"$CLUSTER/postgresql.conf" <<'CONF'

# scripts/postgres.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
log_line_prefix = '%m [%p] %q%u@%d '
CONF
  write_state "" "$pw"
  log "initialised a cluster in $CLUSTER in $(secs_since "$t0") s"
}

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  local bin pid port t0
  bin=$(pg_bin)
  prepare_dirs
  exec 9>"$LOCK"
  flock 9
  read_state
  pid=$(our_pid)
  if [ -n "$pid" ]; then
    local deadline=$(($(date +%s) + START_TIMEOUT))
    until ready "$RECORDED_PORT"; do
      [ "$(date +%s)" -lt "$deadline" ] || die "running (pid $pid) but not accepting connections on 127.0.0.1:$RECORDED_PORT (log: $LOG_DIR/postgres.log)"
      sleep 0.3
    done
    log "already running on 127.0.0.1:$RECORDED_PORT (pid $pid)"
    return 0
  fi
  [ -f "$CLUSTER/PG_VERSION" ] && [ -n "$PG_ADMIN_PASSWORD" ] || init_cluster
  read_state
  if [ -n "${PG_PORT:-}" ]; then
    port_taken "$PG_PORT" && die "port $PG_PORT (PG_PORT) is taken by something else: choose another"
    port=$PG_PORT
  elif [ -n "$RECORDED_PORT" ] && ! port_taken "$RECORDED_PORT"; then
    port=$RECORDED_PORT
  else
    port=$(first_free_port "$DEFAULT_PORT")
  fi
  t0=$(now_ms)
  rm -f "$PID_FILE"
  # A session of its own (setsid): the server outlives the make, test or terminal that started it.
  # A port chosen here can still be taken between the check and the bind (another server starting);
  # then the next free one is tried. A port the user set is never swapped.
  local tries=5
  until as_server setsid -w "$bin/pg_ctl" start -D "$CLUSTER" -l "$LOG_DIR/postgres.log" -w -t "$START_TIMEOUT" \
    -o "-p $port" >/dev/null 2>&1 9>&-; do
    tries=$((tries - 1))
    if [ -z "${PG_PORT:-}" ] && [ "$tries" -gt 0 ] && tail -n 20 "$LOG_DIR/postgres.log" | grep -q 'could not bind'; then
      log "port $port was taken before the server bound it; trying the next free port"
      port=$(first_free_port $((port + 1)))
      continue
    fi
    tail -n 20 "$LOG_DIR/postgres.log" >&2 || true
    die "PostgreSQL did not start (log: $LOG_DIR/postgres.log)"
  done
  pid=$(head -n1 "$CLUSTER/postmaster.pid")
  is_uint "$pid" || die "no pid in $CLUSTER/postmaster.pid"
  echo "$pid $(proc_start "$pid")" >"$PID_FILE"
  write_state "$port" "$PG_ADMIN_PASSWORD"
  log "PostgreSQL up on 127.0.0.1:$port in $(secs_since "$t0") s (pid $pid, data $CLUSTER)"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  local pid t0
  pid=$(our_pid)
  if [ -z "$pid" ]; then
    rm -f "$PID_FILE"
    log "not running"
    return 0
  fi
  t0=$(now_ms)
  # Fast shutdown: open sessions are closed and the server checkpoints before it exits.
  if ! as_server "$(pg_bin)/pg_ctl" stop -D "$CLUSTER" -m fast -w -t "$STOP_TIMEOUT" >/dev/null 2>&1; then
    log "pg_ctl stop did not finish within $STOP_TIMEOUT s"
    STOP_TIMEOUT=5 stop_pids "$pid" || die "could not stop pid $pid"
  fi
  rm -f "$PID_FILE"
  log "stopped (pid $pid) in $(secs_since "$t0") s"
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local pid
  pid=$(our_pid)
  read_state
  if [ -z "$pid" ]; then
    echo "postgres: stopped (data $DATA_DIR)"
    return 3
  fi
  if ! ready "$RECORDED_PORT"; then
    echo "postgres: running (pid $pid) but not accepting connections on 127.0.0.1:$RECORDED_PORT"
    return 1
  fi
  echo "postgres: running on 127.0.0.1:$RECORDED_PORT (pid $pid, data $CLUSTER)"
  return 0
}

cmd_url() {
  [ $# -eq 1 ] || die "usage: url NAME"
  local name=$1 pw f
  [[ $name =~ ^[a-z_][a-z0-9_]{0,62}$ ]] || die "database name '$name' must be lowercase letters, digits and '_' (at most 63, not starting with a digit)"
  [ -n "$(our_pid)" ] || die "not running (data $DATA_DIR): 'scripts/postgres.sh up' first"
  mkdir -p "$ROLES_DIR"
  exec 9>"$LOCK"
  flock 9
  f=$ROLES_DIR/$name.password
  if [ ! -s "$f" ]; then
    (
      umask 077
      random_secret 32 >"$f.tmp"
    )
    mv "$f.tmp" "$f"
  fi
  pw=$(cat "$f")
  # psql variables (:'pw', :"name") quote the values; the name was checked above anyway.
  admin_psql -v name="$name" -v pw="$pw" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'name') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'name') \gexec
ALTER ROLE :"name" WITH LOGIN PASSWORD :'pw';
SELECT format('CREATE DATABASE %I OWNER %I', :'name', :'name') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'name') \gexec
SQL
  echo "postgresql+psycopg2://$name:$pw@127.0.0.1:$RECORDED_PORT/$name"
}

cmd_psql() {
  [ -n "$(our_pid)" ] || die "not running (data $DATA_DIR): 'scripts/postgres.sh up' first"
  admin_psql "$@"
}

dispatch "$@"
