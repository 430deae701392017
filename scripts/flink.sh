#!/usr/bin/env bash
# A local Apache Flink 2.3 cluster (one JobManager, one TaskManager with 8 slots, loopback only)
# for development, the demo and integration tests.
#
#   scripts/flink.sh install                  download the PyPI wheels apache-flink and
#                                             apache-flink-libraries (never installed into .venv)
#                                             and assemble FLINK_HOME in build/flink-2.3.0/
#   scripts/flink.sh configure [--adaptive] [--prometheus] [--ssl] [--ha]
#                                             write build/flink-2.3.0/conf/config.yaml from conf/flink/
#   scripts/flink.sh up [--adaptive] [--prometheus] [--ssl] [--ha]
#                                             install + configure, start, wait until the slots are up;
#                                             --ssl: REST over TLS with client certificates (a CA, the
#                                             server's and a client's certificate in FLINK_DATA_DIR/ssl);
#                                             --ha: ZooKeeper high availability (FLINK_ZOOKEEPER_QUORUM,
#                                             e.g. from scripts/zookeeper.sh quorum), a leader and a standby
#                                             JobManager, REST on FLINK_REST_PORT and FLINK_STANDBY_REST_PORT
#   scripts/flink.sh down                     stop the daemons this project started
#   scripts/flink.sh start-missing            start again the daemons of this instance that died
#                                             (the fault tests kill one), with the same config
#   scripts/flink.sh add-taskmanager ID [--memory MB] [--managed-fraction F]
#                                             start one more TaskManager whose resource id is ID (the
#                                             capacity provider's scale-out; [A-Za-z0-9_-], at most 64) and
#                                             wait until the REST API lists it; --memory and --managed-fraction
#                                             set its taskmanager.memory.process.size and .managed.fraction
#                                             (a configuration change applied on new TaskManagers)
#   scripts/flink.sh release-taskmanager ID   stop TaskManager ID (any this instance started: up and start-missing
#                                             name their own tm-1, tm-2, ..., never reused) and wait until the
#                                             REST API no longer lists it
#   scripts/flink.sh taskmanagers             the TaskManagers this instance runs, "ID PID" per line, after a
#                                             first line "baseline N": how many 'up' started (FLINK_TASKMANAGERS)
#   scripts/flink.sh status                   exit 0 running, 3 stopped, 1 not answering
#   scripts/flink.sh build-job                build build/ds2-testjob.jar and build/ds2-sql-runner.jar
#                                             (flink-job/build.sh)
#   scripts/flink.sh submit-sql FILE... [--parallelism N] [--kafka-client-config F]
#                                             submit a Flink SQL script as one job (SET 'pipeline.name'
#                                             names it) through the SQL runner jar
#
# Environment: FLINK_REST_PORT (8081), FLINK_RPC_PORT (6123), FLINK_START_TIMEOUT (60 s),
# FLINK_STOP_TIMEOUT (30 s), FLINK_SLOTS (8, task slots per TaskManager), FLINK_TASKMANAGERS (1; the cluster
# mode runs 2: a job spreads over them, and savepoints and checkpoints are in FLINK_DATA_DIR, which every
# process reaches, as a shared volume would be), FLINK_DATA_DIR (data/flink: one cluster instance; tests use their own),
# with --ha: FLINK_ZOOKEEPER_QUORUM (host:port,...), FLINK_STANDBY_REST_PORT (FLINK_REST_PORT + 1);
# FLINK_STATE_BACKEND (hashmap, the default; rocksdb; forst: conf/flink/state-rocksdb.yaml, state-forst.yaml), FLINK_TM_CORES (the CPU
# cores a TaskManager declares, taskmanager.cpu.cores; default: Flink's, its number of slots), FLINK_TM_MEMORY
# (MB, taskmanager.memory.process.size; default 2048) and FLINK_TM_MANAGED_FRACTION (taskmanager.memory.managed.fraction).
# An instance keeps everything in FLINK_DATA_DIR: its config (conf/), logs (log/), uploaded jars,
# savepoints, checkpoints, pid files and the daemons' temp folder. The distribution is shared.
set -euo pipefail

SCRIPT_NAME=flink.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FLINK_VERSION=2.3.0
BUILD_DIR=$ROOT/build
DOWNLOAD_DIR=$BUILD_DIR/downloads
FLINK_HOME=$BUILD_DIR/flink-$FLINK_VERSION
STAMP=$FLINK_HOME/.ds2-assembled
DATA_DIR=${FLINK_DATA_DIR:-$ROOT/data/flink}
CONF_DIR=$DATA_DIR/conf
LOG_DIR=$DATA_DIR/log
PID_DIR=$DATA_DIR/pids
TMP_DIR=$DATA_DIR/tmp
TEMPLATE_DIR=$ROOT/conf/flink

REST_PORT=${FLINK_REST_PORT:-8081}
RPC_PORT=${FLINK_RPC_PORT:-6123}
START_TIMEOUT=${FLINK_START_TIMEOUT:-60}
STOP_TIMEOUT=${FLINK_STOP_TIMEOUT:-30}
SLOTS=${FLINK_SLOTS:-8}
TASKMANAGERS=${FLINK_TASKMANAGERS:-1}
SSL_DIR=$DATA_DIR/ssl
STANDBY_REST_PORT=${FLINK_STANDBY_REST_PORT:-$((REST_PORT + 1))}
ZOOKEEPER_QUORUM=${FLINK_ZOOKEEPER_QUORUM:-}
STATE_BACKEND=${FLINK_STATE_BACKEND:-hashmap}
TM_CORES=${FLINK_TM_CORES:-}
TM_MEMORY=${FLINK_TM_MEMORY:-}
TM_MANAGED_FRACTION=${FLINK_TM_MANAGED_FRACTION:-}
TM_DIR=$PID_DIR/taskmanagers # one file per TaskManager this instance started: its resource id, holding its pid

configured_ssl() {
  grep -q '^security.ssl.rest.enabled: true' "$CONF_DIR/config.yaml" 2>/dev/null
}

set_rest_url() { # https once the instance is configured with --ssl
  if configured_ssl; then REST_URL=https://127.0.0.1:$REST_PORT; else REST_URL=http://127.0.0.1:$REST_PORT; fi
}
set_rest_url

# The Flink scripts read these from the environment before the config file: make sure a caller's
# environment cannot point them elsewhere.
FLINK_ENV=(env -u FLINK_LIB_DIR -u FLINK_PLUGINS_DIR -u FLINK_OPT_DIR
  -u FLINK_ENV_JAVA_OPTS -u FLINK_ENV_JAVA_OPTS_JM -u FLINK_ENV_JAVA_OPTS_TM -u FLINK_IDENT_STRING
  "FLINK_CONF_DIR=$CONF_DIR" "FLINK_LOG_DIR=$LOG_DIR" "FLINK_PID_DIR=$PID_DIR")

check_uints REST_PORT RPC_PORT START_TIMEOUT STOP_TIMEOUT SLOTS TASKMANAGERS STANDBY_REST_PORT
[ "$TASKMANAGERS" -ge 1 ] || die "FLINK_TASKMANAGERS must be at least 1, got $TASKMANAGERS"

java_cmd() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    echo "$JAVA_HOME/bin/java"
  else
    command -v java || true
  fi
}

check_java() {
  local java major
  java=$(java_cmd)
  [ -n "$java" ] || die "Java 17 or newer is required and no 'java' was found (install OpenJDK 17, e.g. 'make setup' or apt-get install openjdk-17-jdk-headless)"
  major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  if ! is_uint "${major:-}" || [ "$major" -lt 17 ]; then
    die "Java 17 or newer is required, $java is version '${major:-unknown}' (set JAVA_HOME or install OpenJDK 17)"
  fi
}

# ---------------------------------------------------------------------------------------------
# processes

# Prints "<pid> <daemon>" for every daemon in our pid files that still runs from our FLINK_HOME
# (a recycled pid belonging to something else is never reported, hence never signalled).
our_daemons() {
  local f pid daemon args
  [ -d "$PID_DIR" ] || return 0
  for f in "$PID_DIR"/*.pid; do
    [ -f "$f" ] || continue
    daemon=${f##*-}
    daemon=${daemon%.pid}
    while IFS= read -r pid || [ -n "$pid" ]; do
      is_uint "$pid" || continue
      args=$(ps -ww -p "$pid" -o args= 2>/dev/null) || continue
      case $args in
        *"$FLINK_HOME/"*) echo "$pid $daemon" ;;
      esac
    done <"$f"
  done
}

our_pids() { our_daemons | cut -d' ' -f1; }

running() { [ -n "$(our_daemons)" ]; }

# GET on the REST API; prints the body, fails when it does not answer.
rest_get() {
  local tls=()
  configured_ssl && tls=(--cacert "$SSL_DIR/ca.pem" --cert "$SSL_DIR/client.pem" --key "$SSL_DIR/client.key")
  curl -sf --max-time 3 "${tls[@]}" "$REST_URL$1"
}

# A CA, the REST server's keystore (certificate for 127.0.0.1/localhost) and truststore, and a client
# certificate, all under SSL_DIR (owner-only; deploy/flink-tls.sh, which the compose deployment runs
# too); kept across restarts, made once per instance with its own password.
make_ssl() {
  [ -s "$SSL_DIR/rest.keystore.p12" ] && [ -s "$SSL_DIR/client.pem" ] && [ -s "$SSL_DIR/password" ] && return 0
  local keytool
  keytool="$(dirname "$(readlink -f "$(java_cmd)")")/keytool"
  (
    umask 077
    rm -rf "$SSL_DIR" && mkdir -p "$SSL_DIR"
    random_secret 32 >"$SSL_DIR/password"
    FLINK_TLS_PASSWORD=$(cat "$SSL_DIR/password") KEYTOOL=$keytool \
      "$ROOT/deploy/flink-tls.sh" "$SSL_DIR" "IP:127.0.0.1,DNS:localhost" >/dev/null
  ) || die "could not make the TLS material in $SSL_DIR"
}

rest_answers() { rest_get /config >/dev/null 2>&1; }

configured_adaptive() {
  grep -q '^jobmanager.scheduler: adaptive' "$CONF_DIR/config.yaml" 2>/dev/null
}

configured_prometheus() {
  grep -q '^metrics.reporter.prom.factory.class:' "$CONF_DIR/config.yaml" 2>/dev/null
}

configured_ha() {
  grep -q '^high-availability.type: zookeeper' "$CONF_DIR/config.yaml" 2>/dev/null
}

# The REST ports of the JobManagers this instance runs: the leader's and, with --ha, a standby's.
jobmanager_ports() {
  if configured_ha && [ -f "$CONF_DIR/jobmanager-ports" ]; then cat "$CONF_DIR/jobmanager-ports"; else echo "$REST_PORT"; fi
}

# Whether one of our JobManagers serves REST on port $1 (each is started with its port on its command line).
jobmanager_on() {
  local pid daemon
  while read -r pid daemon; do
    [ "$daemon" = standalonesession ] || continue
    ps -ww -p "$pid" -o args= 2>/dev/null | grep -q -- "rest.port=$1\b" && return 0
  done < <(our_daemons)
  return 1
}

start_jobmanagers() { # the missing ones; prints how many it started
  local port started=0
  for port in $(jobmanager_ports); do
    jobmanager_on "$port" && continue
    "${setsid[@]}" "${FLINK_ENV[@]}" "$FLINK_HOME/bin/jobmanager.sh" start -D "rest.port=$port" >/dev/null
    started=$((started + 1))
  done
  echo "$started"
}

mode_name() { if "$@"; then echo adaptive; else echo default; fi; }

log_tail() {
  local f
  for f in "$LOG_DIR"/*.log "$LOG_DIR"/*.out; do
    [ -s "$f" ] || continue
    echo "----- last lines of $f" >&2
    tail -n 30 "$f" >&2
  done
}

# ---------------------------------------------------------------------------------------------
# install

cmd_install() {
  [ $# -eq 0 ] || die "install takes no arguments"
  check_java
  local want="apache-flink==$FLINK_VERSION apache-flink-libraries==$FLINK_VERSION"
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    install_connectors
    return 0
  fi
  need_python
  if running; then
    die "a cluster from $FLINK_HOME is running: 'scripts/flink.sh down' before re-installing"
  fi
  local t0
  t0=$(now_ms)
  log "installing Flink $FLINK_VERSION into $FLINK_HOME: [1/2] downloading its two PyPI wheels (about 330 MB, once)"
  mkdir -p "$DOWNLOAD_DIR"
  # The wheels only serve as an archive of the distribution: --no-deps, and never installed. Less the
  # one warning per package a machine's unused local index gives, which hid every line of ours.
  "$PYTHON" -m pip download -q --no-deps --disable-pip-version-check -d "$DOWNLOAD_DIR" \
    "apache-flink==$FLINK_VERSION" "apache-flink-libraries==$FLINK_VERSION" 2>&1 |
    { grep -v "^WARNING: Location 'file://.*' is ignored" || true; } >&2
  log "[2/2] unpacking the distribution"
  local py_tag app_wheels lib_wheels
  py_tag=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  app_wheels=("$DOWNLOAD_DIR"/apache_flink-"$FLINK_VERSION"-"$py_tag"-*.whl)
  lib_wheels=("$DOWNLOAD_DIR"/apache_flink_libraries-"$FLINK_VERSION"-*.whl)
  [ -f "${app_wheels[0]}" ] || die "no apache-flink $FLINK_VERSION wheel for $py_tag in $DOWNLOAD_DIR"
  [ -f "${lib_wheels[0]}" ] || die "no apache-flink-libraries $FLINK_VERSION wheel in $DOWNLOAD_DIR"

  local staging=$BUILD_DIR/.flink-staging
  local home=$staging/flink-$FLINK_VERSION
  rm -rf "$staging"
  mkdir -p "$staging" "$home"
  "$PYTHON" -m zipfile -e "${app_wheels[0]}" "$staging/app"
  "$PYTHON" -m zipfile -e "${lib_wheels[0]}" "$staging/libs"
  local app=$staging/app/pyflink libs=$staging/libs/pyflink d
  for d in "$app/bin" "$app/conf" "$libs/lib" "$libs/opt" "$libs/plugins" "$libs/bin/bash-java-utils.jar"; do
    [ -e "$d" ] || die "unexpected wheel layout: $d is missing"
  done
  mv "$app/bin" "$home/bin"
  cp "$libs/bin/bash-java-utils.jar" "$home/bin/" # config.sh needs it to read config.yaml
  mv "$libs/lib" "$libs/opt" "$libs/plugins" "$home/"
  [ -d "$libs/licenses" ] && mv "$libs/licenses" "$home/licenses"
  cp "$staging"/libs/apache_flink_libraries-*.dist-info/licenses/* "$home/" 2>/dev/null || true
  mv "$app/conf" "$home/conf"
  cp "$home/conf/config.yaml" "$home/conf/config.yaml.dist" # the template configure reads from
  mkdir -p "$home/log"
  chmod +x "$home"/bin/*.sh "$home/bin/flink"
  echo "$want" >"$home/.ds2-assembled"

  rm -rf "$FLINK_HOME"
  mv "$home" "$FLINK_HOME"
  rm -rf "$staging"
  write_cluster_files
  install_connectors
  log "installed Flink $FLINK_VERSION ($(du -sh "$FLINK_HOME" | cut -f1)) in $(secs_since "$t0") s"
}

# Flink's optional jars from Maven Central: the Kafka connector into lib/ (scripts/kafka.sh, conf/kafka/pom.xml).
install_connectors() {
  "$ROOT/scripts/kafka.sh" install-connector
}

write_cluster_files() {
  mkdir -p "$CONF_DIR" "$LOG_DIR"
  local f
  for f in "$FLINK_HOME"/conf/*; do # log4j and logback settings of the distribution
    case $(basename "$f") in config.yaml | config.yaml.dist | masters | workers) ;; *) cp "$f" "$CONF_DIR/" ;; esac
  done
  echo "127.0.0.1:$REST_PORT" >"$CONF_DIR/masters"
  echo "127.0.0.1" >"$CONF_DIR/workers"
}

require_installed() {
  [ -f "$STAMP" ] || die "Flink is not installed: run 'scripts/flink.sh install'"
}

# ---------------------------------------------------------------------------------------------
# configure

cmd_configure() {
  local adaptive=0 prometheus=0 ssl=0 ha=0
  while [ $# -gt 0 ]; do
    case $1 in
      --adaptive) adaptive=1 ;;
      --prometheus) prometheus=1 ;;
      --ssl) ssl=1 ;;
      --ha) ha=1 ;;
      *) die "configure: unknown option '$1' (expected --adaptive, --prometheus, --ssl, --ha)" ;;
    esac
    shift
  done
  if [ "$ha" = 1 ]; then
    # host:port[,host:port...], matched in full: it is written into the config file.
    [[ $ZOOKEEPER_QUORUM =~ ^[A-Za-z0-9.-]+:[0-9]{1,5}(,[A-Za-z0-9.-]+:[0-9]{1,5})*$ ]] ||
      die "--ha needs FLINK_ZOOKEEPER_QUORUM as host:port[,host:port...] (scripts/zookeeper.sh quorum), got '$ZOOKEEPER_QUORUM'"
    [ "$STANDBY_REST_PORT" != "$REST_PORT" ] || die "FLINK_STANDBY_REST_PORT must differ from FLINK_REST_PORT ($REST_PORT)"
  fi
  require_installed
  need_python
  if running; then
    # status and up read the mode of the running cluster from this file: keep them in step.
    die "the cluster is running: 'scripts/flink.sh down' first ('up' configures again anyway)"
  fi
  mkdir -p "$DATA_DIR/uploads" "$DATA_DIR/savepoints" "$DATA_DIR/checkpoints" "$DATA_DIR/ha" "$PID_DIR" "$TMP_DIR"
  local fragments=()
  case $STATE_BACKEND in
    hashmap) ;;
    rocksdb | forst) fragments+=("$TEMPLATE_DIR/state-$STATE_BACKEND.yaml") ;;
    *) die "FLINK_STATE_BACKEND must be hashmap, rocksdb or forst, got '$STATE_BACKEND'" ;;
  esac
  if [ -n "$TM_CORES" ]; then
    is_uint "$TM_CORES" && [ "$TM_CORES" -ge 1 ] || die "FLINK_TM_CORES must be a whole number of cores >= 1, got '$TM_CORES'"
    printf '\n# FLINK_TM_CORES: the CPU cores each TaskManager declares (the capacity check reads them).\ntaskmanager.cpu.cores: %s\n' \
      "$TM_CORES" >"$DATA_DIR/cores.yaml"
    fragments+=("$DATA_DIR/cores.yaml")
  fi
  local memory=()
  memory_settings "$TM_MEMORY" "$TM_MANAGED_FRACTION" >/dev/null # dies here on a bad value
  mapfile -t memory < <(memory_settings "$TM_MEMORY" "$TM_MANAGED_FRACTION")
  if [ ${#memory[@]} -gt 0 ]; then
    { printf '\n# FLINK_TM_MEMORY, FLINK_TM_MANAGED_FRACTION: every TaskManager'"'"'s memory.\n'
      printf '%s\n' "${memory[@]}" | sed 's/=/: /'; } >"$DATA_DIR/memory.yaml"
    fragments+=("$DATA_DIR/memory.yaml")
  fi
  [ "$ha" = 1 ] && fragments+=("$TEMPLATE_DIR/ha.yaml")
  [ "$adaptive" = 1 ] && fragments+=("$TEMPLATE_DIR/adaptive.yaml")
  if [ "$prometheus" = 1 ]; then
    fragments+=("$TEMPLATE_DIR/prometheus.yaml")
    # The reporter bound to the loopback, in the folder (one class loader) of Flink's reporter it extends.
    local built
    built=$("$ROOT/flink-job/build.sh" 2>&1) || die "could not build the Prometheus reporter (flink-job/build.sh): $built"
    cp "$ROOT/build/ds2-prometheus-loopback.jar" "$FLINK_HOME/plugins/metrics-prometheus/"
  fi
  local ssl_password=""
  if [ "$ssl" = 1 ]; then
    make_ssl
    fragments+=("$TEMPLATE_DIR/ssl.yaml")
    ssl_password=$(cat "$SSL_DIR/password")
  fi
  write_cluster_files
  if [ "$ha" = 1 ]; then printf '%s\n%s\n' "$REST_PORT" "$STANDBY_REST_PORT" >"$CONF_DIR/jobmanager-ports"; fi
  local out=$CONF_DIR/config.yaml
  "$PYTHON" - "$FLINK_HOME/conf/config.yaml.dist" "$TEMPLATE_DIR/config.yaml.in" "$out.tmp" \
    "REST_PORT=$REST_PORT" "RPC_PORT=$RPC_PORT" "SLOTS=$SLOTS" "PID_DIR=$PID_DIR" "TMP_DIR=$TMP_DIR" \
    "UPLOAD_DIR=$DATA_DIR/uploads" "SAVEPOINT_URI=file://$DATA_DIR/savepoints" \
    "CHECKPOINT_URI=file://$DATA_DIR/checkpoints" "SSL_DIR=$SSL_DIR" "SSL_PASSWORD=$ssl_password" \
    "ZK_QUORUM=${ZOOKEEPER_QUORUM:-none}" "HA_URI=file://$DATA_DIR/ha" \
    "HA_CLUSTER_ID=/ds2-$(printf '%s' "$DATA_DIR" | sha256sum | cut -c1-12)" \
    -- "${fragments[@]}" <<'PY'
import re
import sys

dist, template, out = sys.argv[1:4]
rest = sys.argv[4:]
sep = rest.index("--")
values = dict(kv.split("=", 1) for kv in rest[:sep])
fragments = rest[sep + 1 :]

# The distribution's JVM flags (nested YAML env: java: opts: all: ...), needed on Java 17.
text = open(dist, encoding="utf-8").read()
opts = None
try:
    import yaml

    node = yaml.safe_load(text) or {}
    opts = node.get("env.java.opts.all") or (
        node.get("env", {}).get("java", {}).get("opts", {}).get("all")
    )
except ImportError:
    m = re.search(r"^\s+all:\s*(--add-\S.*)$", text, re.M)
    opts = m and m.group(1)
if not opts or "--add-opens" not in opts:
    sys.exit(f"flink.sh: error: no env.java.opts.all with --add-opens in {dist}")
values["JAVA_OPTS_ALL"] = opts.strip()

for key, value in values.items():
    if "\n" in value or ": " in value or " #" in value:
        sys.exit(f"flink.sh: error: {key}={value!r} cannot be written as a plain YAML value")

config = open(template, encoding="utf-8").read()
for frag in fragments:
    text = open(frag, encoding="utf-8").read()
    # A fragment's key replaces the template's (Flink's YAML parser refuses a key given twice).
    for key in re.findall(r"^([A-Za-z0-9_.-]+):", text, re.M):
        config = re.sub(rf"^{re.escape(key)}:.*\n", "", config, flags=re.M)
    config += text
unknown = set(re.findall(r"@([A-Z_]+)@", config)) - set(values)
if unknown:
    sys.exit(f"flink.sh: error: {template}: unknown placeholder(s) {sorted(unknown)}")
config = re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], config)
with open(out, "w", encoding="utf-8") as f:
    f.write(config)
PY
  (umask 077 && mv "$out.tmp" "$out") # it may hold the keystore password
  chmod 600 "$out"
  set_rest_url
  write_cluster_files
  log "wrote $out (scheduler: $(mode_name test "$adaptive" = 1), prometheus: $([ "$prometheus" = 1 ] && echo on || echo off), REST port $REST_PORT)"
}

# ---------------------------------------------------------------------------------------------
# up / down / status

# Prints "slots_total slots_available" from a /overview body on stdin.
overview_slots() {
  "$PYTHON" -c 'import json, sys
o = json.load(sys.stdin)
print(o.get("slots-total", 0), o.get("slots-available", 0))'
}

wait_ready() {
  local body total _available
  local deadline=$(($(date +%s) + START_TIMEOUT))
  while :; do
    if body=$(rest_get /overview 2>/dev/null); then
      read -r total _available < <(overview_slots <<<"$body")
      if [ "${total:-0}" -ge $((SLOTS * TASKMANAGERS)) ]; then
        return 0
      fi
    fi
    if [ "$(our_daemons | grep -c ' standalonesession$')" -lt "$(jobmanager_ports | wc -l)" ] ||
      [ "$(our_daemons | grep -c ' taskexecutor$')" -lt "$TASKMANAGERS" ]; then
      log_tail
      die "a Flink daemon exited during start-up (logs above; all logs in $LOG_DIR)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log_tail
      die "Flink did not offer $((SLOTS * TASKMANAGERS)) slots on $REST_URL within $START_TIMEOUT s (logs above; all logs in $LOG_DIR); 'scripts/flink.sh down' stops what was started"
    fi
    sleep 0.5
  done
}

cmd_up() {
  local want_adaptive=0 want_prometheus=0 want_ssl=0 want_ha=0 a
  for a in "$@"; do
    case $a in
      --adaptive) want_adaptive=1 ;;
      --prometheus) want_prometheus=1 ;;
      --ssl) want_ssl=1 ;;
      --ha) want_ha=1 ;;
      *) die "up: unknown option '$a' (expected --adaptive, --prometheus, --ssl, --ha)" ;;
    esac
  done
  need_python
  if running; then
    local have=0
    configured_adaptive && have=1
    if [ "$have" != "$want_adaptive" ]; then
      die "the cluster already runs with the $(mode_name test "$have" = 1) scheduler; 'scripts/flink.sh down' first to switch to $(mode_name test "$want_adaptive" = 1)"
    fi
    have=0
    configured_prometheus && have=1
    if [ "$have" != "$want_prometheus" ]; then
      die "the cluster already runs with the Prometheus reporter $([ "$have" = 1 ] && echo on || echo off); 'scripts/flink.sh down' first to change it"
    fi
    have=0
    configured_ssl && have=1
    if [ "$have" != "$want_ssl" ]; then
      die "the cluster already runs with REST TLS $([ "$have" = 1 ] && echo on || echo off); 'scripts/flink.sh down' first to change it"
    fi
    have=0
    configured_ha && have=1
    if [ "$have" != "$want_ha" ]; then
      die "the cluster already runs with high availability $([ "$have" = 1 ] && echo on || echo off); 'scripts/flink.sh down' first to change it"
    fi
    wait_ready
    log "already running at $REST_URL"
    return 0
  fi
  if rest_answers; then
    die "something else answers on $REST_URL (not started by this project): stop it or set FLINK_REST_PORT"
  fi
  if [ "$want_ha" = 1 ] && port_taken "$STANDBY_REST_PORT"; then
    die "port $STANDBY_REST_PORT (FLINK_STANDBY_REST_PORT) is taken by something else: choose another"
  fi
  cmd_install
  cmd_configure "$@"
  rm -f "$PID_DIR"/*.pid
  local setsid=()
  # A session of its own: the daemons outlive the terminal, make or Airflow task that started them.
  command -v setsid >/dev/null 2>&1 && setsid=(setsid -w)
  local t0
  t0=$(now_ms)
  start_jobmanagers >/dev/null
  rm -rf "$TM_DIR"
  echo "$TASKMANAGERS" >"$CONF_DIR/taskmanagers-baseline"
  echo 1 >"$CONF_DIR/taskmanagers-next"
  local i
  for ((i = 1; i <= TASKMANAGERS; i++)); do
    start_taskmanager "$(next_tm_id)" >/dev/null
  done
  wait_ready
  local ha=""
  configured_ha && ha=", high availability: JobManagers on REST ports $(jobmanager_ports | tr "\n" " " | sed "s/ $//")"
  log "Flink up at $REST_URL in $(secs_since "$t0") s ($(mode_name configured_adaptive) scheduler, $TASKMANAGERS TaskManager(s) x $SLOTS slots$ha; pids $(our_pids | tr "\n" " " | sed "s/ $//") in $PID_DIR)"
}

# The daemons' temp folder (io.tmp.dirs, java.io.tmpdir): only ever used by our daemons.
clean_tmp() {
  [ -d "$TMP_DIR" ] && find "$TMP_DIR" -mindepth 1 -delete 2>/dev/null || true
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  local pids
  mapfile -t pids < <(our_pids)
  if [ ${#pids[@]} -eq 0 ]; then
    rm -f "$PID_DIR"/*.pid 2>/dev/null || true
    clean_tmp
    log "not running"
    return 0
  fi
  local t0
  t0=$(now_ms)
  stop_pids "${pids[@]}" || die "could not stop Flink (pids ${pids[*]})"
  rm -f "$PID_DIR"/*.pid
  rm -rf "$TM_DIR"
  clean_tmp
  log "stopped (pids ${pids[*]}) in $(secs_since "$t0") s"
}

# Forget pids of daemons that are gone, so Flink's start scripts do not count them.
prune_pid_files() {
  local f pid live
  for f in "$PID_DIR"/*.pid; do
    [ -f "$f" ] || continue
    live=()
    while IFS= read -r pid || [ -n "$pid" ]; do
      is_uint "$pid" && kill -0 "$pid" 2>/dev/null && live+=("$pid")
    done <"$f"
    if [ ${#live[@]} -eq 0 ]; then rm -f "$f"; else printf '%s\n' "${live[@]}" >"$f"; fi
  done
}

cmd_start_missing() {
  [ $# -eq 0 ] || die "start-missing takes no arguments"
  [ -f "$CONF_DIR/config.yaml" ] || die "no configured instance in $DATA_DIR: use 'scripts/flink.sh up'"
  prune_pid_files
  local setsid=() started=()
  command -v setsid >/dev/null 2>&1 && setsid=(setsid -w)
  local jobmanagers
  jobmanagers=$(start_jobmanagers)
  [ "$jobmanagers" -eq 0 ] || started+=("$jobmanagers jobmanager(s)")
  local have_tms
  have_tms=$(our_daemons | grep -c ' taskexecutor$' || true)
  while [ "$have_tms" -lt "$TASKMANAGERS" ]; do
    start_taskmanager "$(next_tm_id)" >/dev/null
    started+=(taskmanager)
    have_tms=$((have_tms + 1))
  done
  wait_ready
  log "started ${started[*]:-nothing (all running)}; up at $REST_URL"
}

# ---------------------------------------------------------------------------------------------
# TaskManagers added and released one at a time (the capacity provider of include/autoscaler/capacity)

check_tm_id() {
  [[ ${1:-} =~ ^[A-Za-z0-9_-]{1,64}$ ]] || die "a TaskManager id is 1-64 of [A-Za-z0-9_-], got '${1:-}'"
}

# Prints "key=value" per memory setting given (MB of process memory $1, managed fraction $2; either may be empty).
# Both matched in full: they are written into a config file or passed as -D.
memory_settings() {
  if [ -n "${1:-}" ]; then
    is_uint "$1" && [ "$1" -ge 512 ] || die "a TaskManager's memory is a whole number of MB >= 512, got '$1'"
    echo "taskmanager.memory.process.size=${1}m"
  fi
  if [ -n "${2:-}" ]; then
    [[ $2 =~ ^0?\.[0-9]{1,4}$ ]] || die "a managed-memory fraction is a number in (0, 1) like 0.4, got '$2'"
    echo "taskmanager.memory.managed.fraction=$2"
  fi
}

# Whether the REST API lists TaskManager $1 (exit 0) or not (1); 2 when it does not answer.
tm_listed() {
  local body
  body=$(rest_get /taskmanagers) || return 2
  "$PYTHON" -c 'import json, sys
sys.exit(0 if any(t.get("id") == sys.argv[1] for t in json.load(sys.stdin).get("taskmanagers", [])) else 1)' "$1" <<<"$body"
}

wait_tm_listed() { # ID WANT(0 listed, 1 gone)
  local deadline=$(($(date +%s) + START_TIMEOUT)) rc
  while :; do
    rc=0
    tm_listed "$1" || rc=$?
    [ "$rc" = "$2" ] && return 0
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.3
  done
}

# Whether TaskManager $1 was started by this instance and still runs.
tm_running() {
  local pid daemons
  [ -f "$TM_DIR/$1" ] || return 1
  pid=$(cat "$TM_DIR/$1")
  daemons=$(our_daemons) # not piped into grep -q: with pipefail its early exit would fail the pipe
  is_uint "$pid" && grep -qx "$pid taskexecutor" <<<"$daemons"
}

# The next id of a TaskManager this instance starts itself (tm-1, tm-2, ...). Never one used before: a TaskManager
# started again after one died gets a new id, as Flink's resource manager may still hold the dead one's registration.
next_tm_id() {
  local n
  n=$(cat "$CONF_DIR/taskmanagers-next" 2>/dev/null || echo 1)
  is_uint "$n" || n=1
  echo $((n + 1)) >"$CONF_DIR/taskmanagers-next"
  echo "tm-$n"
}

# Starts TaskManager $1 (its resource id), with the -D settings $2... if any, and records its pid in TM_DIR; prints the pid.
start_taskmanager() {
  local before after pid id=$1 dynamic=()
  shift
  local setting
  for setting in "$@"; do dynamic+=(-D "$setting"); done
  mkdir -p "$TM_DIR"
  before=$(our_daemons | awk '$2 == "taskexecutor" {print $1}' | sort)
  "${setsid[@]}" "${FLINK_ENV[@]}" "$FLINK_HOME/bin/taskmanager.sh" start -D "taskmanager.resource-id=$id" "${dynamic[@]}" >/dev/null
  after=$(our_daemons | awk '$2 == "taskexecutor" {print $1}' | sort)
  pid=$(comm -13 <(echo "$before") <(echo "$after") | head -n1)
  is_uint "${pid:-}" || die "TaskManager $id did not start (logs in $LOG_DIR)"
  echo "$pid" >"$TM_DIR/$id"
  echo "$pid"
}

cmd_add_taskmanager() {
  [ $# -ge 1 ] || die "usage: add-taskmanager ID [--memory MB] [--managed-fraction F]"
  local id=$1 mb="" fraction=""
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --memory) [ $# -ge 2 ] || die "--memory needs a value"; mb=$2; shift 2 ;;
      --managed-fraction) [ $# -ge 2 ] || die "--managed-fraction needs a value"; fraction=$2; shift 2 ;;
      *) die "add-taskmanager: unknown option '$1' (expected --memory MB, --managed-fraction F)" ;;
    esac
  done
  set -- "$id"
  check_tm_id "$1"
  local settings=()
  memory_settings "$mb" "$fraction" >/dev/null # dies here on a bad value
  mapfile -t settings < <(memory_settings "$mb" "$fraction")
  running || die "no cluster of this instance runs ($DATA_DIR): 'scripts/flink.sh up' first"
  need_python
  if tm_running "$1"; then
    wait_tm_listed "$1" 0 || die "TaskManager $1 runs (pid $(cat "$TM_DIR/$1")) but the REST API does not list it"
    log "TaskManager $1 already runs (pid $(cat "$TM_DIR/$1"))"
    return 0
  fi
  local pid setsid=() t0
  command -v setsid >/dev/null 2>&1 && setsid=(setsid -w)
  t0=$(now_ms)
  pid=$(start_taskmanager "$1" "${settings[@]}")
  wait_tm_listed "$1" 0 || { log_tail; die "TaskManager $1 (pid $pid) did not register within $START_TIMEOUT s"; }
  log "added TaskManager $1 (pid $pid) in $(secs_since "$t0") s"
}

cmd_release_taskmanager() {
  [ $# -eq 1 ] || die "usage: release-taskmanager ID"
  check_tm_id "$1"
  need_python
  [ -f "$TM_DIR/$1" ] || die "no TaskManager $1 was started by this instance ($TM_DIR)"
  local pid t0
  pid=$(cat "$TM_DIR/$1")
  t0=$(now_ms)
  if tm_running "$1"; then
    stop_pids "$pid" || die "could not stop TaskManager $1 (pid $pid)"
  fi
  prune_pid_files
  rm -f "$TM_DIR/$1"
  wait_tm_listed "$1" 1 || die "TaskManager $1 stopped but the REST API still lists it after $START_TIMEOUT s"
  log "released TaskManager $1 (pid $pid) in $(secs_since "$t0") s"
}

cmd_taskmanagers() {
  [ $# -eq 0 ] || die "taskmanagers takes no arguments"
  echo "baseline $(cat "$CONF_DIR/taskmanagers-baseline" 2>/dev/null || echo "$TASKMANAGERS")"
  local f
  for f in "$TM_DIR"/*; do
    [ -f "$f" ] || continue
    tm_running "$(basename "$f")" && echo "$(basename "$f") $(cat "$f")"
  done
  return 0
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local daemons
  daemons=$(our_daemons)
  if [ -z "$daemons" ]; then
    echo "flink: stopped ($REST_URL)"
    if rest_answers; then
      echo "note: something not started by this project answers on $REST_URL"
    fi
    return 3
  fi
  need_python
  local overview jobs
  if ! overview=$(rest_get /overview) || ! jobs=$(rest_get /jobs/overview); then
    echo "flink: processes running ($(echo "$daemons" | tr '\n' ',' | sed 's/,$//')) but $REST_URL does not answer (starting, or unhealthy: see $LOG_DIR)"
    return 1
  fi
  echo "flink: running ($(mode_name configured_adaptive) scheduler)"
  echo "rest: $REST_URL"
  echo "pids: $(echo "$daemons" | tr '\n' ',' | sed 's/,$//; s/,/, /g')"
  "$PYTHON" - "$overview" "$jobs" <<'PY'
import json
import sys

o, j = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"flink version: {o.get('flink-version')}")
print(
    f"slots: {o.get('slots-total')} total, {o.get('slots-available')} available"
    f" ({o.get('taskmanagers')} taskmanager(s))"
)
jobs = sorted(j.get("jobs", []), key=lambda x: -x.get("start-time", 0))
print(f"jobs: {sum(x.get('state') == 'RUNNING' for x in jobs)} running, {len(jobs)} known")
for x in jobs:
    t = x.get("tasks", {})
    print(
        f"  {x.get('state'):<10} {x.get('name')}  {x.get('jid')}"
        f"  tasks {t.get('running', 0)}/{t.get('total', 0)} running"
    )
PY
  return 0
}

cmd_submit_sql() {
  [ $# -ge 1 ] || die "usage: submit-sql FILE... [--parallelism N] [--kafka-client-config F]"
  need_python
  cmd_build_job
  configured_ssl && die "submit-sql talks plain HTTP; this instance serves REST over TLS"
  FLINK_REST_URL=$REST_URL PYTHONPATH=$ROOT/include "$PYTHON" -m autoscaler.flink.sql "$@"
}

cmd_build_job() {
  [ $# -eq 0 ] || die "build-job takes no arguments"
  cmd_install
  "$ROOT/flink-job/build.sh"
}

dispatch "$@"
