#!/usr/bin/env bash
# A Prometheus for the autoscaler's own metrics (Debian's prometheus), and the StatsD receiver it
# scrapes them from (autoscaler.observe.statsd_bridge, the local stand-in for statsd_exporter), both
# on 127.0.0.1 and both behind a password generated per install.
#
#   scripts/prometheus.sh up        start both, wait until Prometheus is ready (idempotent)
#   scripts/prometheus.sh down      stop what this data dir started (by pid)
#   scripts/prometheus.sh status    exit 0 both running, 3 stopped, 1 partly running
#   scripts/prometheus.sh env       the settings to use them, as shell assignments: PROM_URL,
#                                   PROM_USER, PROM_PASSWORD_FILE, and the AIRFLOW__METRICS__* that
#                                   make an Airflow send its metrics (and ours) to the receiver
#
# Environment: PROM_DATA_DIR (data/prometheus: the TSDB, config, logs, pids, the password file
# (0600) and the ports), PROM_PORT (HTTP, first free from 29090), STATSD_PORT (UDP, from 29125),
# BRIDGE_PORT (the receiver's /metrics, from 29102), PROM_SCRAPE_INTERVAL (5s), PROM_FLINK_TARGETS
# (host:port of Flink Prometheus reporters to scrape too, joined by commas; scripts/flink.sh up
# --prometheus serves the JobManager on 127.0.0.1:9249 and the TaskManager on 9250),
# PROM_START_TIMEOUT (60 s), PROM_STOP_TIMEOUT (20 s).
set -euo pipefail

SCRIPT_NAME=prometheus.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA_DIR=$(realpath -m "${PROM_DATA_DIR:-$ROOT/data/prometheus}")
PID_DIR=$DATA_DIR/pids
STATE=$DATA_DIR/ds2-prometheus.env
PASSWORD_FILE=$DATA_DIR/password
USER_NAME=ds2
SCRAPE_INTERVAL=${PROM_SCRAPE_INTERVAL:-5s}
START_TIMEOUT=${PROM_START_TIMEOUT:-60}
STOP_TIMEOUT=${PROM_STOP_TIMEOUT:-20}
COMPONENTS=(bridge prometheus)
check_uints START_TIMEOUT STOP_TIMEOUT
[[ $SCRAPE_INTERVAL =~ ^[0-9]+(ms|s|m)$ ]] || die "PROM_SCRAPE_INTERVAL must look like 5s, got '$SCRAPE_INTERVAL'"
for v in PROM_PORT STATSD_PORT BRIDGE_PORT; do [ -z "${!v:-}" ] || check_uints "$v"; done
FLINK_TARGETS=${PROM_FLINK_TARGETS:-}
[[ -z $FLINK_TARGETS || $FLINK_TARGETS =~ ^[A-Za-z0-9.-]+:[0-9]{1,5}(,[A-Za-z0-9.-]+:[0-9]{1,5})*$ ]] ||
  die "PROM_FLINK_TARGETS must be host:port[,host:port...], got '$FLINK_TARGETS'"

prometheus_bin() {
  command -v prometheus 2>/dev/null || die "prometheus not found (make setup installs Debian's prometheus)"
}

read_state() {
  R_PROM_PORT= R_STATSD_PORT= R_BRIDGE_PORT=
  [ -f "$STATE" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    case $k in
      PROM_PORT) R_PROM_PORT=$v ;;
      STATSD_PORT) R_STATSD_PORT=$v ;;
      BRIDGE_PORT) R_BRIDGE_PORT=$v ;;
    esac
  done <"$STATE"
}

udp_taken() { # something is bound to udp 127.0.0.1:$1
  "$PYTHON" - "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

pick_port() { # $1 the user's choice, $2 the recorded one, $3 the default start, $4 "udp" for a UDP port
  local taken=port_taken p
  [ "${4:-}" = udp ] && taken=udp_taken
  if [ -n "$1" ]; then
    "$taken" "$1" && die "port $1 is taken by something else: choose another"
    echo "$1"
    return
  fi
  if [ -n "$2" ] && ! "$taken" "$2"; then
    echo "$2"
    return
  fi
  p=$3
  while "$taken" "$p"; do p=$((p + 1)); done
  echo "$p"
}

write_configs() { # $1 prom port, $2 bridge port
  local hash
  hash=$("$PYTHON" -c 'import bcrypt, sys; print(bcrypt.hashpw(open(sys.argv[1]).read().strip().encode(), bcrypt.gensalt(10)).decode())' "$PASSWORD_FILE")
  (
    umask 077
    cat >"$DATA_DIR/web.yml" <<EOF
# scripts/prometheus.sh: every request to this Prometheus needs the password in $PASSWORD_FILE
basic_auth_users:
  $USER_NAME: '$hash'
EOF
    cat >"$DATA_DIR/prometheus.yml" <<EOF
# scripts/prometheus.sh
global:
  scrape_interval: $SCRAPE_INTERVAL
  evaluation_interval: $SCRAPE_INTERVAL
scrape_configs:
  - job_name: ds2-autoscaler
    honor_labels: true  # the job label is the Flink job's (as with statsd_exporter)
    static_configs:
      - targets: ['127.0.0.1:$2']
    basic_auth:
      username: $USER_NAME
      password_file: $PASSWORD_FILE
EOF
    if [ -n "$FLINK_TARGETS" ]; then
      cat >>"$DATA_DIR/prometheus.yml" <<EOF
  - job_name: flink
    honor_labels: true  # job_name, task_id and subtask_index as Flink's reporter names them
    static_configs:
      - targets: ['${FLINK_TARGETS//,/\', \'}']
EOF
    fi
  )
}

ready() { # Prometheus answers its readiness endpoint with the password
  # The login goes to curl as a config on its stdin (printf is a builtin): never on a command line in /proc.
  printf 'user = "%s:%s"\n' "$USER_NAME" "$(cat "$PASSWORD_FILE")" |
    curl -fsS -m 3 -K - "http://127.0.0.1:$1/-/ready" >/dev/null 2>&1
}

start_component() { # $1 name, rest: the command; a session of its own, its pid recorded
  local name=$1
  shift
  setsid "$@" >"$DATA_DIR/log/$name.log" 2>&1 </dev/null &
  local pid=$!
  sleep 0.2
  proc_start "$pid" >/dev/null || {
    tail -n 20 "$DATA_DIR/log/$name.log" >&2
    die "$name exited at once (log: $DATA_DIR/log/$name.log)"
  }
  echo "$pid $(proc_start "$pid")" >"$PID_DIR/$name.pid"
}

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  need_python
  local bin t0 prom_port statsd_port bridge_port running
  bin=$(prometheus_bin)
  mkdir -p "$DATA_DIR/log" "$DATA_DIR/tsdb" "$PID_DIR"
  exec 9>"$DATA_DIR/.lock"
  flock 9
  read_state
  running=$(component_pids | wc -l)
  if [ "$running" -eq ${#COMPONENTS[@]} ] && ready "$R_PROM_PORT"; then
    log "already running: Prometheus on http://127.0.0.1:$R_PROM_PORT, StatsD on udp 127.0.0.1:$R_STATSD_PORT"
    return 0
  fi
  [ "$running" -eq 0 ] || cmd_down >/dev/null 2>&1
  if [ ! -s "$PASSWORD_FILE" ]; then
    (
      umask 077
      random_secret 32 >"$PASSWORD_FILE.tmp"
    )
    mv "$PASSWORD_FILE.tmp" "$PASSWORD_FILE"
  fi
  prom_port=$(pick_port "${PROM_PORT:-}" "$R_PROM_PORT" 29090)
  bridge_port=$(pick_port "${BRIDGE_PORT:-}" "$R_BRIDGE_PORT" 29102)
  statsd_port=$(pick_port "${STATSD_PORT:-}" "$R_STATSD_PORT" 29125 udp)
  (
    umask 077
    printf 'PROM_PORT=%s\nSTATSD_PORT=%s\nBRIDGE_PORT=%s\n' "$prom_port" "$statsd_port" "$bridge_port" >"$STATE"
  )
  write_configs "$prom_port" "$bridge_port"
  t0=$(now_ms)
  start_component bridge "$PYTHON" -m autoscaler.observe.statsd_bridge --statsd-port "$statsd_port" \
    --http-port "$bridge_port" --user "$USER_NAME" --password-file "$PASSWORD_FILE"
  start_component prometheus "$bin" --config.file="$DATA_DIR/prometheus.yml" --web.config.file="$DATA_DIR/web.yml" \
    --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.path="$DATA_DIR/tsdb" --storage.tsdb.retention.time=15d
  local deadline=$(($(date +%s) + START_TIMEOUT))
  until ready "$prom_port"; do
    if [ "$(component_pids | wc -l)" -ne ${#COMPONENTS[@]} ] || [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 20 "$DATA_DIR/log/prometheus.log" "$DATA_DIR/log/bridge.log" >&2 || true
      cmd_down >/dev/null 2>&1 || true
      die "Prometheus did not become ready (logs in $DATA_DIR/log)"
    fi
    sleep 0.3
  done
  log "Prometheus up on http://127.0.0.1:$prom_port in $(secs_since "$t0") s, scraping the StatsD receiver (udp 127.0.0.1:$statsd_port) every $SCRAPE_INTERVAL; user $USER_NAME, password in $PASSWORD_FILE"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  local pids
  mapfile -t pids < <(component_pids | cut -d' ' -f1)
  if [ ${#pids[@]} -eq 0 ]; then
    log "not running"
  else
    stop_pids "${pids[@]}" || die "could not stop every process (pids ${pids[*]})"
    log "stopped (pids ${pids[*]})"
  fi
  rm -f "$PID_DIR"/*.pid
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local n
  n=$(component_pids | wc -l)
  read_state
  if [ "$n" -eq 0 ]; then
    echo "prometheus: stopped (data $DATA_DIR)"
    return 3
  fi
  if [ "$n" -ne ${#COMPONENTS[@]} ] || ! ready "$R_PROM_PORT"; then
    echo "prometheus: partly running: $(component_pids | tr '\n' ' ')"
    return 1
  fi
  echo "prometheus: running on http://127.0.0.1:$R_PROM_PORT, StatsD receiver on udp 127.0.0.1:$R_STATSD_PORT ($(component_pids | tr '\n' ' '))"
}

cmd_env() {
  [ $# -eq 0 ] || die "env takes no arguments"
  read_state
  [ -n "$R_PROM_PORT" ] || die "never started (data $DATA_DIR): 'scripts/prometheus.sh up' first"
  echo "PROM_URL=http://127.0.0.1:$R_PROM_PORT"
  echo "PROM_USER=$USER_NAME"
  echo "PROM_PASSWORD_FILE=$(squote "$PASSWORD_FILE")"
  echo "AIRFLOW__METRICS__STATSD_ON=True"
  echo "AIRFLOW__METRICS__STATSD_HOST=127.0.0.1"
  echo "AIRFLOW__METRICS__STATSD_PORT=$R_STATSD_PORT"
  echo "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED=True"
}

dispatch "$@"
