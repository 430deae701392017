#!/usr/bin/env bash
# One-shot, as root (service ds2-volumes-init of docker-compose.yaml): gives the named volumes to the
# users that write them. A new named volume belongs to root, and no service runs as root:
#   ds2-data (/opt/ds2/data)     the store, journals, Data Docs: Airflow's tasks and the Spark executors,
#                                both running as AIRFLOW_UID (group 0); savepoints/ is Flink's (FLINK_UID),
#                                at the same path in every container (the jobs config's default
#                                savepoint folder is DS2_DATA_DIR/savepoints)
#   ds2-jars (/opt/ds2/build)    the Flink jobs' jars Airflow uploads (jobs config: jar: build/<name>.jar)
#   airflow-logs, airflow-config Airflow's task logs and the simple auth manager's passwords file
#   flink-data (/flink-data)     Flink's checkpoints and uploaded jars
#   flink-tls (/opt/ds2/tls)     the TLS material of Flink's REST endpoint (deploy/flink-tls.sh), made
#                                once: the keystores readable by Flink only, the client certificate and
#                                key by Airflow only, the CA by both (its key is not kept)
# Only the top folders are changed (never a recursive chown over a large store); safe to run again.
set -euo pipefail

airflow_uid=${AIRFLOW_UID:?AIRFLOW_UID is not set}
flink_uid=${FLINK_UID:?FLINK_UID is not set}

own() { # owner mode folder...
  local owner=$1 mode=$2
  shift 2
  for dir in "$@"; do
    mkdir -p "$dir"
    chown "$owner" "$dir"
    chmod "$mode" "$dir"
  done
}

# setgid folders: whatever is created inside stays in group 0, readable by every service.
own "$airflow_uid:0" 2775 /opt/ds2/data /opt/ds2/build /opt/airflow/logs /opt/airflow/config
own "$flink_uid:0" 2775 /opt/ds2/data/savepoints /flink-data /flink-data/checkpoints /flink-data/uploads

[ "${FLINK_TLS_PASSWORD:-}" != "change-me" ] || { echo "ds2-volumes-init: set FLINK_TLS_PASSWORD in .env (see .env.example)" >&2; exit 1; }
tls=/opt/ds2/tls
KEYTOOL="$JAVA_HOME/bin/keytool" bash "$(dirname "$0")/flink-tls.sh" "$tls" "DNS:flink-jobmanager,DNS:localhost,IP:127.0.0.1"
chown "$flink_uid:0" "$tls/rest.keystore.p12" "$tls/rest.truststore.p12"
chown "$airflow_uid:0" "$tls/client.pem" "$tls/client.key"
chmod 0400 "$tls/rest.keystore.p12" "$tls/rest.truststore.p12" "$tls/client.pem" "$tls/client.key"
chmod 0444 "$tls/ca.pem"
chmod 0755 "$tls"
echo "ds2-volumes-init: volumes ready (Airflow and Spark uid $airflow_uid, Flink uid $flink_uid)"
ls -ld /opt/ds2/data /opt/ds2/data/savepoints /opt/ds2/build /opt/airflow/logs /opt/airflow/config /flink-data
ls -l "$tls"
