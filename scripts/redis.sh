#!/usr/bin/env bash
# The project's own Redis server (Debian's redis-server), the Celery broker of the cluster mode's
# Airflow: loopback only, its own port, a password generated per install, the append-only file on
# (conf/redis/redis.conf, the settings the compose file's redis service mounts too). A system Redis,
# and any port already taken, are left alone.
#
#   scripts/redis.sh up        write the server's config once, start it, wait until it answers (idempotent)
#   scripts/redis.sh down      stop the server this data dir started (by its pid): it writes its data first
#   scripts/redis.sh restart   down, then up on the same port with the same data (the fault drills use it)
#   scripts/redis.sh status    exit 0 running and answering, 3 stopped, 1 running but not answering
#   scripts/redis.sh url       print the broker URL (redis://:PASSWORD@127.0.0.1:PORT/0)
#
# Environment: REDIS_DATA_DIR (data/redis: redis.conf with the password, mode 0600; the append-only
# file and the log; the pid file), REDIS_PORT (the first free port from 26379 when unset; kept
# across restarts while it stays free), REDIS_START_TIMEOUT (30 s), REDIS_STOP_TIMEOUT (30 s).
set -euo pipefail

SCRIPT_NAME=redis.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA_DIR=$(realpath -m "${REDIS_DATA_DIR:-$ROOT/data/redis}")
CONF=$DATA_DIR/redis.conf    # generated: includes SHARED_CONF, then this instance's port, dir and password
STATE=$DATA_DIR/ds2-redis.env # REDIS_PORT and REDIS_PASSWORD of this instance
PID_FILE=$DATA_DIR/redis.pid  # "<pid> <start ticks>" of the server we started
LOG=$DATA_DIR/redis.log
SHARED_CONF=$ROOT/conf/redis/redis.conf
# Below Linux's ephemeral range, as scripts/postgres.sh's port (see there why).
DEFAULT_PORT=26379
REDIS_START_TIMEOUT=${REDIS_START_TIMEOUT:-30}
REDIS_STOP_TIMEOUT=${REDIS_STOP_TIMEOUT:-30}
check_uints REDIS_START_TIMEOUT REDIS_STOP_TIMEOUT # by the names the user sets
START_TIMEOUT=$REDIS_START_TIMEOUT
STOP_TIMEOUT=$REDIS_STOP_TIMEOUT
[ -z "${REDIS_PORT:-}" ] || check_uints REDIS_PORT

server_bin() {
  command -v redis-server 2>/dev/null || die "redis-server is missing (make setup installs Debian's redis-server)"
}

read_state() {
  RECORDED_PORT= PASSWORD=
  [ -f "$STATE" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    case $k in
      REDIS_PORT) RECORDED_PORT=$v ;;
      REDIS_PASSWORD) PASSWORD=$v ;;
    esac
  done <"$STATE"
}

write_state() { # $1 port, $2 password
  (
    umask 077
    printf 'REDIS_PORT=%s\nREDIS_PASSWORD=%s\n' "$1" "$2" >"$STATE.tmp"
  )
  mv "$STATE.tmp" "$STATE"
}

our_pid() { live_pid "$PID_FILE"; }

# The server answers PING with the password (given through the environment, never on a command line).
answers() { # $1 port
  REDISCLI_AUTH=$PASSWORD redis-cli --no-auth-warning -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q '^PONG$'
}

write_conf() { # $1 port
  (
    umask 077
    cat >"$CONF.tmp" <<CONF
# scripts/redis.sh: this instance's settings (owner-only: it holds the password)
include $SHARED_CONF
bind 127.0.0.1
port $1
dir $DATA_DIR
logfile $LOG
daemonize no
requirepass $PASSWORD
CONF
  )
  mv "$CONF.tmp" "$CONF"
}

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  local bin pid port t0 deadline
  bin=$(server_bin)
  mkdir -p "$DATA_DIR"
  chmod 700 "$DATA_DIR"
  read_state
  pid=$(our_pid)
  if [ -n "$pid" ]; then
    deadline=$(($(date +%s) + START_TIMEOUT))
    until answers "$RECORDED_PORT"; do
      [ "$(date +%s)" -lt "$deadline" ] || die "running (pid $pid) but not answering on 127.0.0.1:$RECORDED_PORT (log: $LOG)"
      sleep 0.2
    done
    log "already running on 127.0.0.1:$RECORDED_PORT (pid $pid)"
    return 0
  fi
  [ -n "$PASSWORD" ] || PASSWORD=$(random_secret 32)
  if [ -n "${REDIS_PORT:-}" ]; then
    port_taken "$REDIS_PORT" && die "port $REDIS_PORT (REDIS_PORT) is taken by something else: choose another"
    port=$REDIS_PORT
  elif [ -n "$RECORDED_PORT" ] && ! port_taken "$RECORDED_PORT"; then
    port=$RECORDED_PORT
  else
    port=$(first_free_port "$DEFAULT_PORT")
  fi
  write_state "$port" "$PASSWORD"
  write_conf "$port"
  t0=$(now_ms)
  echo "===== $(date -Is) redis-server $CONF" >>"$LOG"
  # A session of its own: the server outlives the make, test or terminal that started it.
  setsid "$bin" "$CONF" </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid $(proc_start "$pid" || die "redis-server exited at once (log: $LOG)")" >"$PID_FILE"
  wait_answering redis-server "$PID_FILE" "$LOG" answers "$port"
  log "Redis up on 127.0.0.1:$port in $(secs_since "$t0") s (pid $pid, data $DATA_DIR)"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  stop_recorded "$PID_FILE" # SIGTERM: Redis flushes the append-only file and exits
}

cmd_restart() {
  [ $# -eq 0 ] || die "restart takes no arguments"
  cmd_down
  # The same port: the broker URL every Airflow process holds stays valid.
  read_state
  [ -z "$RECORDED_PORT" ] || REDIS_PORT=$RECORDED_PORT
  cmd_up
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local pid
  pid=$(our_pid)
  read_state
  if [ -z "$pid" ]; then
    echo "redis: stopped (data $DATA_DIR)"
    return 3
  fi
  if ! answers "$RECORDED_PORT"; then
    echo "redis: running (pid $pid) but not answering on 127.0.0.1:$RECORDED_PORT (log: $LOG)"
    return 1
  fi
  echo "redis: running on 127.0.0.1:$RECORDED_PORT (pid $pid, data $DATA_DIR)"
  return 0
}

cmd_url() {
  [ $# -eq 0 ] || die "url takes no arguments"
  read_state
  [ -n "$(our_pid)" ] && [ -n "$PASSWORD" ] || die "not running (data $DATA_DIR): 'scripts/redis.sh up' first"
  echo "redis://:$PASSWORD@127.0.0.1:$RECORDED_PORT/0"
}

dispatch "$@"
