#!/usr/bin/env bash
# The Spark standalone worker of the compose deployment (service spark-worker), in the foreground.
# It runs as the Airflow uid (AIRFLOW_UID, group 0), not as the image's spark user: the DS2 policy's
# executors write the store's Parquet files into the ds2-data volume and the driver (in the Airflow
# scheduler container) then renames them, so both sides must be the same user. The image has no passwd
# entry for that uid and Hadoop's login needs one: it is provided with nss_wrapper, as the image's own
# entrypoint does for its Kubernetes driver and executors. Executors inherit the environment.
# Arguments go to org.apache.spark.deploy.worker.Worker (e.g. --host spark-worker spark://spark-master:7077);
# cores, memory and work folder come from SPARK_WORKER_CORES, SPARK_WORKER_MEMORY, SPARK_WORKER_DIR.
# With --connect first, the rest is the command to run instead (the spark-connect service: the Spark
# Connect server's driver plans reads of the same store, as the same user).
set -euo pipefail

work_dir=${SPARK_WORKER_DIR:?SPARK_WORKER_DIR is not set}
mkdir -p "$work_dir"

if ! getent passwd "$(id -u)" >/dev/null 2>&1; then
  for wrapper in /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so /lib/*/libnss_wrapper.so; do
    if [ -s "$wrapper" ]; then
      NSS_WRAPPER_PASSWD=$(mktemp)
      NSS_WRAPPER_GROUP=$(mktemp)
      printf 'ds2:x:%s:%s:ds2 spark worker:%s:/bin/false\n' "$(id -u)" "$(id -g)" "$work_dir" >"$NSS_WRAPPER_PASSWD"
      printf 'ds2:x:%s:\n' "$(id -g)" >"$NSS_WRAPPER_GROUP"
      export LD_PRELOAD=$wrapper NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
      break
    fi
  done
fi

if [ "${1:-}" = --connect ]; then
  shift
  exec "$@"
fi
exec "${SPARK_HOME:?}/bin/spark-class" org.apache.spark.deploy.worker.Worker "$@"
