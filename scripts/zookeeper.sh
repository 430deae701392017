#!/usr/bin/env bash
# A standalone Apache ZooKeeper 3.9.5 (conf/zookeeper/pom.xml, resolved once from Maven Central into
# build/zookeeper-3.9.5/), loopback only: the coordination service of a Flink cluster with ZooKeeper high
# availability (scripts/flink.sh up --ha), which elects the leading JobManager through it.
#
#   scripts/zookeeper.sh install   resolve ZooKeeper's jars
#   scripts/zookeeper.sh up        install, start it, wait until it serves (idempotent)
#   scripts/zookeeper.sh down      stop the ZooKeeper this data dir started (by its pid)
#   scripts/zookeeper.sh status    exit 0 running and answering, 3 stopped, 1 running but not answering
#   scripts/zookeeper.sh quorum    print its address, host:port (the value of high-availability.zookeeper.quorum)
#
# Environment: ZOOKEEPER_DATA_DIR (data/zookeeper: its snapshots, zoo.cfg, log and pid file), ZOOKEEPER_PORT
# (the first free port from 29200 when unset, kept across restarts while it stays free), ZOOKEEPER_START_TIMEOUT
# (60 s), ZOOKEEPER_STOP_TIMEOUT (30 s).
set -euo pipefail

SCRIPT_NAME=zookeeper.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ZOOKEEPER_VERSION=3.9.5
ZOOKEEPER_HOME=$ROOT/build/zookeeper-$ZOOKEEPER_VERSION
POM=$ROOT/conf/zookeeper/pom.xml
DATA_DIR=$(realpath -m "${ZOOKEEPER_DATA_DIR:-$ROOT/data/zookeeper}")
CONF=$DATA_DIR/zoo.cfg
PORT_FILE=$DATA_DIR/port
PID_FILE=$DATA_DIR/zookeeper.pid
LOG=$DATA_DIR/zookeeper.log
DEFAULT_PORT=29200 # below Linux's ephemeral range, as scripts/postgres.sh's port
START_TIMEOUT=${ZOOKEEPER_START_TIMEOUT:-60}
STOP_TIMEOUT=${ZOOKEEPER_STOP_TIMEOUT:-30}
check_uints START_TIMEOUT STOP_TIMEOUT
[ -z "${ZOOKEEPER_PORT:-}" ] || check_uints ZOOKEEPER_PORT

cmd_install() {
  [ $# -eq 0 ] || die "install takes no arguments"
  local want stamp=$ZOOKEEPER_HOME/.ds2-resolved
  want=$(sha256sum "$POM" | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    maven_resolve "$POM" zookeeper "$ZOOKEEPER_HOME"
    echo "$want" >"$stamp"
  fi
}

our_pid() { live_pid "$PID_FILE"; }

recorded_port() { [ -f "$PORT_FILE" ] && cat "$PORT_FILE" || true; }

# ZooKeeper's four-letter 'srvr' over bash's /dev/tcp names its mode once it serves ('ruok' answers "imok"
# even from a server whose database failed to load).
answers() {
  local port reply
  port=$(recorded_port)
  [ -n "$port" ] || return 1
  # In a subshell: the connection (fd 3) and its errors stay there; the server closes it after replying.
  reply=$({ exec 3<>"/dev/tcp/127.0.0.1/$port" && printf srvr >&3 && timeout 3 cat <&3; } 2>/dev/null) || true
  [[ $reply == *"Mode: standalone"* ]]
}

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  cmd_install
  local java pid t0 port
  java=$(java_cmd)
  mkdir -p "$DATA_DIR/data"
  pid=$(our_pid)
  t0=$(now_ms)
  if [ -z "$pid" ]; then
    rm -f "$PID_FILE"
    port=$(recorded_port)
    if [ -n "${ZOOKEEPER_PORT:-}" ]; then
      port_taken "$ZOOKEEPER_PORT" && die "port $ZOOKEEPER_PORT (ZOOKEEPER_PORT) is taken by something else: choose another"
      port=$ZOOKEEPER_PORT
    elif [ -z "$port" ] || port_taken "$port"; then
      port=$(first_free_port "$DEFAULT_PORT")
    fi
    echo "$port" >"$PORT_FILE"
    {
      echo "# scripts/zookeeper.sh: one standalone server on the loopback"
      echo "tickTime=2000"
      echo "dataDir=$DATA_DIR/data"
      echo "clientPort=$port"
      echo "clientPortAddress=127.0.0.1"
      echo "admin.enableServer=false"
      echo "4lw.commands.whitelist=srvr"
      echo "autopurge.snapRetainCount=3"
      echo "autopurge.purgeInterval=1"
    } >"$CONF"
    echo "===== $(date -Is) ZooKeeper $ZOOKEEPER_VERSION $CONF" >>"$LOG"
    # A session of its own: the server outlives the make, test or terminal that started it.
    setsid "$java" -Xmx256m -Dzookeeper.log.dir="$DATA_DIR" -cp "$ZOOKEEPER_HOME/*" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$CONF" </dev/null >>"$LOG" 2>&1 9>&- &
    pid=$!
    echo "$pid $(proc_start "$pid" || die "ZooKeeper exited at once (log: $LOG)")" >"$PID_FILE"
  fi
  wait_answering ZooKeeper "$PID_FILE" "$LOG" answers
  log "ZooKeeper $ZOOKEEPER_VERSION up on 127.0.0.1:$(recorded_port) in $(secs_since "$t0") s (pid $(our_pid), data $DATA_DIR)"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  stop_recorded "$PID_FILE"
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  service_status zookeeper "$(our_pid)" "127.0.0.1:$(recorded_port)" "$DATA_DIR" "$LOG" answers
}

cmd_quorum() {
  [ $# -eq 0 ] || die "quorum takes no arguments"
  [ -n "$(recorded_port)" ] || die "no ZooKeeper configured in $DATA_DIR: 'scripts/zookeeper.sh up' first"
  echo "127.0.0.1:$(recorded_port)"
}

dispatch "$@"
