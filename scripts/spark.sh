#!/usr/bin/env bash
# The project's long-lived Spark engine: a Spark Connect server from pyspark's own jars (no
# download), on loopback, so that a policy decision costs a query on a warm JVM instead of a cold
# spark-submit. With --cluster, a Spark standalone master and SPARK_WORKERS workers run beside it and
# the Connect server's executors run on those workers (the compose file's topology, as local
# processes; the cluster mode, make cluster-up, runs it this way).
#
#   scripts/spark.sh up [--cluster]   start (idempotent), wait until the server answers, then warm
#                                     it up with one DS2 policy query on the bundled example
#   scripts/spark.sh down             stop the processes this data dir started (by pid)
#   scripts/spark.sh status           exit 0 running and answering, 3 stopped, 1 not answering
#   scripts/spark.sh url              print the Connect URL (sc://localhost:PORT)
#   scripts/spark.sh token-file       print the path of the server's token file (owner-only)
#
# The Connect server takes only clients that present its token (spark.connect.authenticate.token, given
# to it in its environment, never on a command line): one per data dir, made on the first 'up', kept in
# SPARK_DATA_DIR/connect-token. A client passes it as the bearer token of the URL (an Airflow spark_connect
# connection's password) or in SPARK_CONNECT_AUTHENTICATE_TOKEN. Without TLS, pyspark sends a token only
# to "localhost" (gRPC's local credentials), hence the URL's host; the server listens on 127.0.0.1.
#
# Environment: SPARK_DATA_DIR (data/spark: pid files, logs, the worker's folder, the ports in
# ds2-spark.env), SPARK_CONNECT_PORT (first free from 15002), SPARK_MASTER_PORT (first free from
# 7077), SPARK_MASTER_WEBUI_PORT (first free from 8090), SPARK_WORKERS (2, with --cluster),
# SPARK_WORKER_CORES (cores per worker with --cluster, 1; without it the N of local[N], 2),
# SPARK_WORKER_MEMORY (per worker, 2g), SPARK_START_TIMEOUT (180 s), SPARK_STOP_TIMEOUT (30 s),
# DS2_SPARK_WARMUP (1; 0 skips the warm-up query).
# Settings: conf/spark/connect-server.conf, the properties file the compose file's spark-connect
# service starts the same server class with.
set -euo pipefail

SCRIPT_NAME=spark.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DATA_DIR=$(realpath -m "${SPARK_DATA_DIR:-$ROOT/data/spark}")
LOG_DIR=$DATA_DIR/logs
PID_DIR=$DATA_DIR/pids
WORK_DIR=$DATA_DIR/work
STATE=$DATA_DIR/ds2-spark.env
TOKEN_FILE=$DATA_DIR/connect-token
VENV_BIN=$ROOT/.venv/bin
CONNECT_CONF=$ROOT/conf/spark/connect-server.conf
WORKER_CORES=${SPARK_WORKER_CORES:-}
WORKERS=${SPARK_WORKERS:-2}
WORKER_MEMORY=${SPARK_WORKER_MEMORY:-2g}
START_TIMEOUT=${SPARK_START_TIMEOUT:-180}
STOP_TIMEOUT=${SPARK_STOP_TIMEOUT:-30}
WARMUP=${DS2_SPARK_WARMUP:-1}
check_uints START_TIMEOUT STOP_TIMEOUT WARMUP
SPARK_WORKERS=$WORKERS SPARK_WORKER_CORES=$WORKER_CORES
check_uints SPARK_WORKERS # by the names the user sets
[ -z "$WORKER_CORES" ] || check_uints SPARK_WORKER_CORES
[ "$WORKERS" -ge 1 ] && [ "$WORKERS" -le 8 ] || die "SPARK_WORKERS must be 1 to 8, got '$WORKERS'"
[[ $WORKER_MEMORY =~ ^[0-9]+[mg]$ ]] || die "SPARK_WORKER_MEMORY must look like 2g or 512m, got '$WORKER_MEMORY'"
# Every process an instance may have (pid files in PID_DIR); 'down' stops those that run.
COMPONENTS=(master connect)
for ((i = 1; i <= 8; i++)); do COMPONENTS+=("worker-$i"); done

# Every Spark process: loopback only (RPC and web UIs bind SPARK_LOCAL_IP), the project's config.
SPARK_ENV=(env "SPARK_LOCAL_IP=127.0.0.1" "SPARK_CONF_DIR=$ROOT/conf/spark" "PYSPARK_PYTHON=$VENV_BIN/python"
  "SPARK_LOG_DIR=$LOG_DIR" "SPARK_WORKER_DIR=$WORK_DIR" "PATH=$VENV_BIN:$PATH")

read_state() {
  CONNECT_PORT= MASTER_PORT= WEBUI_PORT= MODE= CORES= RECORDED_WORKERS=
  [ -f "$STATE" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    case $k in
      CONNECT_PORT) CONNECT_PORT=$v ;;
      MASTER_PORT) MASTER_PORT=$v ;;
      WEBUI_PORT) WEBUI_PORT=$v ;;
      MODE) MODE=$v ;;
      CORES) CORES=$v ;;
      WORKERS) RECORDED_WORKERS=$v ;;
    esac
  done <"$STATE"
}

component_pid() { live_pid "$PID_DIR/$1.pid"; }

# The server's token into this script's environment, which the server and the ping inherit (made once).
load_token() {
  if [ ! -s "$TOKEN_FILE" ]; then
    (umask 077 && mkdir -p "$DATA_DIR" && random_secret 32 >"$TOKEN_FILE.tmp" && mv "$TOKEN_FILE.tmp" "$TOKEN_FILE")
  fi
  SPARK_CONNECT_AUTHENTICATE_TOKEN=$(cat "$TOKEN_FILE")
  export SPARK_CONNECT_AUTHENTICATE_TOKEN
}

our_pids() { component_pids | cut -d' ' -f1; }

start_component() { # $1 name, then the command
  local c=$1 pid start
  shift
  echo "===== $(date -Is) $*" >>"$LOG_DIR/$c.log"
  # A session of its own: the JVM outlives the make, test or task that started it.
  setsid "${SPARK_ENV[@]}" "$@" </dev/null >>"$LOG_DIR/$c.log" 2>&1 9>&- &
  pid=$!
  start=$(proc_start "$pid") || die "$c exited at once (log: $LOG_DIR/$c.log)"
  echo "$pid $start" >"$PID_DIR/$c.pid"
}

# The Connect server answers a real query (a gRPC round trip, not just an open port).
answers() { # $1 port
  "$VENV_BIN/python" -m autoscaler.engine.spark.engine ping "sc://localhost:$1" >/dev/null 2>&1
}

wait_for() { # $1 what, $2 component, then a command that succeeds when ready
  local what=$1 c=$2
  shift 2
  wait_answering "$what" "$PID_DIR/$c.pid" "$LOG_DIR/$c.log" "$@"
}

start_worker() { # $1: worker-$1 of this instance's master (MASTER_PORT, CORES, WORKER_MEMORY)
  local ui
  ui=$(first_free_port $((WEBUI_PORT + 1)))
  mkdir -p "$WORK_DIR/worker-$1"
  start_component "worker-$1" "$VENV_BIN/spark-class" org.apache.spark.deploy.worker.Worker "spark://127.0.0.1:$MASTER_PORT" \
    --host 127.0.0.1 --cores "$CORES" --memory "$WORKER_MEMORY" --webui-port "$ui" --work-dir "$WORK_DIR/worker-$1"
  # The next worker must not pick the same web UI port before this one has bound it.
  local deadline=$(($(date +%s) + 30))
  until port_taken "$ui" || [ "$(date +%s)" -ge "$deadline" ] || [ -z "$(component_pid "worker-$1")" ]; do sleep 0.2; done
}

workers_registered() { # $1: the master's JSON lists that many ALIVE workers
  local n
  n=$(curl -sf --max-time 3 "http://127.0.0.1:$WEBUI_PORT/json/" | grep -o '"state" *: *"ALIVE"' | wc -l) || return 1
  [ "$n" -ge "$1" ]
}

cmd_up() {
  local cluster=0 a
  for a in "$@"; do
    case $a in
      --cluster) cluster=1 ;;
      *) die "up: unknown option '$a' (expected --cluster)" ;;
    esac
  done
  need_python
  mkdir -p "$LOG_DIR" "$PID_DIR" "$WORK_DIR"
  load_token
  read_state
  local want=local
  [ "$cluster" = 1 ] && want=cluster
  if [ -n "$(component_pid connect)" ]; then
    [ "$MODE" = "$want" ] || die "already running in $MODE mode: 'scripts/spark.sh down' first to switch to $want"
    if [ "$MODE" = cluster ]; then
      # A worker that died (a lost host) comes back; the master and the Connect server kept running.
      local i started=()
      [ -n "$(component_pid master)" ] || die "the master died under a running Connect server: 'scripts/spark.sh down', then up"
      for ((i = 1; i <= RECORDED_WORKERS; i++)); do
        [ -n "$(component_pid "worker-$i")" ] || {
          start_worker "$i"
          started+=("worker-$i")
        }
      done
      if [ ${#started[@]} -gt 0 ]; then
        wait_for "$RECORDED_WORKERS worker(s) registered with the master" "${started[0]}" workers_registered "$RECORDED_WORKERS"
        log "started again: ${started[*]}"
      fi
    fi
    wait_for "the Connect server on 127.0.0.1:$CONNECT_PORT" connect answers "$CONNECT_PORT"
    log "already running: sc://localhost:$CONNECT_PORT ($MODE)"
    return 0
  fi
  # Something of ours half up (e.g. the Connect server died): start clean.
  [ -z "$(our_pids)" ] || cmd_down
  local t0 master=()
  t0=$(now_ms)
  CONNECT_PORT=${SPARK_CONNECT_PORT:-}
  if [ -n "$CONNECT_PORT" ]; then
    check_uints CONNECT_PORT
    port_taken "$CONNECT_PORT" && die "port $CONNECT_PORT (SPARK_CONNECT_PORT) is taken by something else"
  else
    CONNECT_PORT=$(first_free_port 15002)
  fi
  MASTER_PORT= WEBUI_PORT=
  if [ "$cluster" = 1 ]; then
    MASTER_PORT=${SPARK_MASTER_PORT:-$(first_free_port 7077)}
    WEBUI_PORT=${SPARK_MASTER_WEBUI_PORT:-$(first_free_port 8090)}
    check_uints MASTER_PORT WEBUI_PORT
    local i cores=${WORKER_CORES:-1}
    start_component master "$VENV_BIN/spark-class" org.apache.spark.deploy.master.Master \
      --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "$WEBUI_PORT"
    wait_for "the master's web UI on 127.0.0.1:$WEBUI_PORT" master curl -sf --max-time 3 -o /dev/null "http://127.0.0.1:$WEBUI_PORT/json/"
    CORES=$cores
    for ((i = 1; i <= WORKERS; i++)); do start_worker "$i"; done
    wait_for "$WORKERS worker(s) registered with the master" worker-1 workers_registered "$WORKERS"
    master=(--master "spark://127.0.0.1:$MASTER_PORT" --conf "spark.cores.max=$((cores * WORKERS))")
  else
    master=(--master "local[${WORKER_CORES:-2}]")
  fi
  # Hadoop's S3A, when installed (scripts/s3proxy.sh install): a store on an object store is read through it.
  local s3a=() jars=("${DS2_JARS_DIR:-$ROOT/build}"/spark-s3a/*.jar)
  [ ! -f "${jars[0]}" ] || s3a=(--jars "$(IFS=,; echo "${jars[*]}")")
  start_component connect "$VENV_BIN/spark-submit" --class org.apache.spark.sql.connect.service.SparkConnectServer \
    --name ds2-spark-connect --properties-file "$CONNECT_CONF" "${master[@]}" "${s3a[@]}" \
    --conf spark.connect.grpc.binding.address=127.0.0.1 --conf "spark.connect.grpc.binding.port=$CONNECT_PORT" \
    --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 spark-internal
  (
    umask 077
    printf 'MODE=%s\nCONNECT_PORT=%s\nMASTER_PORT=%s\nWEBUI_PORT=%s\nCORES=%s\nWORKERS=%s\n' "$want" "$CONNECT_PORT" \
      "$MASTER_PORT" "$WEBUI_PORT" "${CORES:-}" "$WORKERS" >"$STATE"
  )
  wait_for "the Connect server on 127.0.0.1:$CONNECT_PORT" connect answers "$CONNECT_PORT"
  log "Spark Connect up at sc://localhost:$CONNECT_PORT ($want, clients present the token in $TOKEN_FILE) in $(secs_since "$t0") s (pids $(our_pids | tr '\n' ' ' | sed 's/ $//') in $PID_DIR)"
  if [ "$WARMUP" = 1 ]; then
    local t1
    t1=$(now_ms)
    # The first query pays for JIT and code generation of the policy's wide aggregation.
    "$VENV_BIN/python" -m autoscaler.engine.spark.engine warm-up "sc://localhost:$CONNECT_PORT" >>"$LOG_DIR/warm-up.log" 2>&1 ||
      die "the warm-up query failed (log: $LOG_DIR/warm-up.log)"
    log "warmed up in $(secs_since "$t1") s"
  fi
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  local pids c pid t0
  # The Connect server first (its executors live on the workers), then the workers, then the master.
  pids=()
  for c in connect "${COMPONENTS[@]:2}" master; do
    pid=$(component_pid "$c")
    [ -n "$pid" ] && pids+=("$pid")
  done
  if [ ${#pids[@]} -eq 0 ]; then
    rm -f "$PID_DIR"/*.pid 2>/dev/null || true
    log "not running"
    return 0
  fi
  t0=$(now_ms)
  for pid in "${pids[@]}"; do
    stop_pids "$pid" || die "could not stop pid $pid"
  done
  rm -f "$PID_DIR"/*.pid
  log "stopped (pids ${pids[*]}) in $(secs_since "$t0") s"
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  [ ! -s "$TOKEN_FILE" ] || load_token
  read_state
  if [ -z "$(component_pid connect)" ]; then
    echo "spark: stopped (data $DATA_DIR)"
    return 3
  fi
  if ! answers "$CONNECT_PORT"; then
    echo "spark: running ($MODE) but sc://localhost:$CONNECT_PORT does not answer (log: $LOG_DIR/connect.log)"
    return 1
  fi
  echo "spark: running ($MODE), sc://localhost:$CONNECT_PORT"
  if [ "$MODE" = cluster ]; then
    echo "master: spark://127.0.0.1:$MASTER_PORT (web UI http://127.0.0.1:$WEBUI_PORT)"
    local c alive=()
    for c in "${COMPONENTS[@]:2}"; do
      [ -n "$(component_pid "$c")" ] && alive+=("$c")
    done
    echo "workers: ${#alive[@]} running (${alive[*]})"
  fi
  echo "pids: $(our_pids | tr '\n' ' ' | sed 's/ $//')"
  return 0
}

cmd_url() {
  [ $# -eq 0 ] || die "url takes no arguments"
  read_state
  [ -n "$(component_pid connect)" ] || die "not running (data $DATA_DIR): 'scripts/spark.sh up' first"
  echo "sc://localhost:$CONNECT_PORT"
}

cmd_token_file() {
  [ $# -eq 0 ] || die "token-file takes no arguments"
  [ -s "$TOKEN_FILE" ] || die "no token in $DATA_DIR: 'scripts/spark.sh up' first"
  echo "$TOKEN_FILE"
}

dispatch "$@"
