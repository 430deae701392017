#!/usr/bin/env bash
# The project's own S3-compatible object store: S3Proxy 4.1.0 (conf/store/pom.xml, resolved once from
# Maven Central into build/s3proxy-4.1.0/) over a local folder, loopback only. Clients sign their requests
# (AWS SigV4) with an access key and secret generated per data dir; one bucket is created. It stands for
# the object store (S3, GCS's S3 API, Ceph, ...) that workers on several hosts share as the store.
#
#   scripts/s3proxy.sh install   resolve S3Proxy's jar, and Hadoop's S3A jars for Spark (build/spark-s3a/)
#   scripts/s3proxy.sh up        install, start S3Proxy, wait until a signed request answers, create the
#                                bucket (idempotent; a dead S3Proxy is started again on its port, with its data)
#   scripts/s3proxy.sh down      stop the S3Proxy this data dir started (by its pid)
#   scripts/s3proxy.sh status    exit 0 running and answering, 3 stopped, 1 running but not answering
#   scripts/s3proxy.sh client-env
#                                print the path of the client environment file (owner-only): AWS_ACCESS_KEY_ID,
#                                AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION, AWS_ALLOW_HTTP and
#                                DS2_STORE (the store's URL in the bucket), as `KEY=value` lines
#
# Environment: S3PROXY_DATA_DIR (data/s3proxy: the objects, the config and client env, mode 0600; the log
# and pid file), S3PROXY_PORT (the first free port from 29100 when unset, kept across restarts while it
# stays free), S3PROXY_BUCKET (ds2), S3PROXY_START_TIMEOUT (60 s), S3PROXY_STOP_TIMEOUT (30 s).
set -euo pipefail

SCRIPT_NAME=s3proxy.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

S3PROXY_VERSION=4.1.0
S3PROXY_HOME=$ROOT/build/s3proxy-$S3PROXY_VERSION
S3A_HOME=$ROOT/build/spark-s3a
POM=$ROOT/conf/store/pom.xml
DATA_DIR=$(realpath -m "${S3PROXY_DATA_DIR:-$ROOT/data/s3proxy}")
CONF=$DATA_DIR/s3proxy.properties # owner-only: it holds the access key and secret
CLIENT=$DATA_DIR/client.env       # what clients need to reach the store (owner-only)
STATE=$DATA_DIR/ds2-s3proxy.env   # port and credentials of this instance
OBJECTS=$DATA_DIR/objects
PID_FILE=$DATA_DIR/s3proxy.pid
LOG=$DATA_DIR/s3proxy.log
DEFAULT_PORT=29100 # below Linux's ephemeral range, as scripts/postgres.sh's port
S3PROXY_START_TIMEOUT=${S3PROXY_START_TIMEOUT:-60}
S3PROXY_STOP_TIMEOUT=${S3PROXY_STOP_TIMEOUT:-30}
check_uints S3PROXY_START_TIMEOUT S3PROXY_STOP_TIMEOUT
START_TIMEOUT=$S3PROXY_START_TIMEOUT
STOP_TIMEOUT=$S3PROXY_STOP_TIMEOUT
[ -z "${S3PROXY_PORT:-}" ] || check_uints S3PROXY_PORT
BUCKET=${S3PROXY_BUCKET:-ds2}
# S3's bucket naming rule (lowercase letters, digits, dots, hyphens; 3-63), matched in full.
[[ $BUCKET =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] || die "S3PROXY_BUCKET must be an S3 bucket name (3-63 of a-z 0-9 . -), got '$BUCKET'"
REGION=us-east-1

cmd_install() {
  [ $# -eq 0 ] || die "install takes no arguments"
  local want home stamp
  want=$(sha256sum "$POM" | cut -d' ' -f1)
  for home in "$S3PROXY_HOME:s3proxy" "$S3A_HOME:spark-s3a"; do
    stamp=${home%%:*}/.ds2-resolved
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
      maven_resolve "$POM" "${home##*:}" "${home%%:*}"
      echo "$want" >"$stamp"
    fi
  done
}

read_state() {
  RECORDED_PORT= ACCESS_KEY= SECRET_KEY=
  [ -f "$STATE" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    case $k in
      S3PROXY_PORT) RECORDED_PORT=$v ;;
      S3PROXY_ACCESS_KEY) ACCESS_KEY=$v ;;
      S3PROXY_SECRET_KEY) SECRET_KEY=$v ;;
    esac
  done <"$STATE"
}

write_files() {
  (
    umask 077
    printf 'S3PROXY_PORT=%s\nS3PROXY_ACCESS_KEY=%s\nS3PROXY_SECRET_KEY=%s\n' "$RECORDED_PORT" "$ACCESS_KEY" "$SECRET_KEY" >"$STATE.tmp"
    {
      echo "# scripts/s3proxy.sh: this instance (owner-only: it holds the access key and secret)"
      echo "s3proxy.endpoint=http://127.0.0.1:$RECORDED_PORT"
      echo "s3proxy.authorization=aws-v2-or-v4"
      echo "s3proxy.identity=$ACCESS_KEY"
      echo "s3proxy.credential=$SECRET_KEY"
      echo "jclouds.provider=filesystem-nio2"
      echo "jclouds.filesystem.basedir=$OBJECTS"
    } >"$CONF.tmp"
    {
      echo "AWS_ACCESS_KEY_ID=$ACCESS_KEY"
      echo "AWS_SECRET_ACCESS_KEY=$SECRET_KEY"
      echo "AWS_ENDPOINT_URL=http://127.0.0.1:$RECORDED_PORT"
      echo "AWS_REGION=$REGION"
      echo "AWS_ALLOW_HTTP=true"
      echo "DS2_STORE=s3://$BUCKET/store"
    } >"$CLIENT.tmp"
  )
  mv "$STATE.tmp" "$STATE"
  mv "$CONF.tmp" "$CONF"
  mv "$CLIENT.tmp" "$CLIENT"
}

our_pid() { live_pid "$PID_FILE"; }

EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# A SigV4-signed request without a body; the login goes to curl on stdin (-K -), never on its command
# line. S3 wants the body's hash in x-amz-content-sha256, which curl 7.88 does not add by itself.
signed() { # $1 method, $2 path; prints the HTTP status
  printf 'user = "%s:%s"\n' "$ACCESS_KEY" "$SECRET_KEY" |
    curl -s -o /dev/null -w '%{http_code}' -K - --max-time 5 --aws-sigv4 "aws:amz:$REGION:s3" \
      -H "x-amz-content-sha256: $EMPTY_SHA256" -X "$1" "http://127.0.0.1:$RECORDED_PORT$2" 2>/dev/null || true
}

answers() { [ "$(signed GET /)" = 200 ]; }

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  cmd_install
  local java pid t0 deadline status
  java=$(java_cmd)
  mkdir -p "$DATA_DIR" "$OBJECTS"
  chmod 700 "$DATA_DIR"
  read_state
  pid=$(our_pid)
  if [ -z "$pid" ]; then
    if [ -f "$PID_FILE" ]; then
      deadline=$(($(date +%s) + STOP_TIMEOUT)) # a dead JVM's port is released a moment after it is gone
      while [ -n "$RECORDED_PORT" ] && port_taken "$RECORDED_PORT" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
      rm -f "$PID_FILE"
    fi
    [ -n "$ACCESS_KEY" ] || ACCESS_KEY=$(random_secret 20)
    [ -n "$SECRET_KEY" ] || SECRET_KEY=$(random_secret 40)
    if [ -n "${S3PROXY_PORT:-}" ]; then
      port_taken "$S3PROXY_PORT" && die "port $S3PROXY_PORT (S3PROXY_PORT) is taken by something else: choose another"
      RECORDED_PORT=$S3PROXY_PORT
    elif [ -z "$RECORDED_PORT" ] || port_taken "$RECORDED_PORT"; then
      RECORDED_PORT=$(first_free_port "$DEFAULT_PORT")
    fi
    write_files
    t0=$(now_ms)
    echo "===== $(date -Is) S3Proxy $S3PROXY_VERSION $CONF" >>"$LOG"
    # A session of its own: the store outlives the make, test or terminal that started it.
    setsid "$java" -Xmx256m -Djava.awt.headless=true -cp "$S3PROXY_HOME/*" org.gaul.s3proxy.Main \
      --properties "$CONF" </dev/null >>"$LOG" 2>&1 9>&- &
    pid=$!
    echo "$pid $(proc_start "$pid" || die "S3Proxy exited at once (log: $LOG)")" >"$PID_FILE"
  else
    t0=$(now_ms)
  fi
  wait_answering S3Proxy "$PID_FILE" "$LOG" answers
  status=$(signed PUT "/$BUCKET")
  # 200: created; 409: it exists already (BucketAlreadyOwnedByYou).
  [ "$status" = 200 ] || [ "$status" = 409 ] || die "creating bucket $BUCKET failed (HTTP $status; log: $LOG)"
  log "S3Proxy $S3PROXY_VERSION up on 127.0.0.1:$RECORDED_PORT in $(secs_since "$t0") s (pid $(our_pid), bucket $BUCKET, objects $OBJECTS; client env $CLIENT)"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  stop_recorded "$PID_FILE"
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local pid
  pid=$(our_pid)
  read_state
  service_status s3proxy "$pid" "127.0.0.1:$RECORDED_PORT" "$DATA_DIR" "$LOG" answers
}

cmd_client_env() {
  [ $# -eq 0 ] || die "client-env takes no arguments"
  [ -f "$CLIENT" ] || die "no client env in $DATA_DIR: 'scripts/s3proxy.sh up' first"
  echo "$CLIENT"
}

dispatch "$@"
