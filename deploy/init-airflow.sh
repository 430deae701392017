#!/usr/bin/env bash
# One-shot set-up of the compose deployment's Airflow (service airflow-init of docker-compose.yaml), run
# as the Airflow user after ds2-volumes-init and once PostgreSQL is healthy:
#   1. refuse placeholder or weak secrets (the values of .env.example), naming the variable;
#   2. write the admin's password for the simple auth manager (the api-server reads the file);
#   3. airflow db migrate;
#   4. python -m ds2_airflow.bootstrap: one Airflow pool per job of DS2_JOBS_CONFIG.
# Every step is idempotent: `docker compose up` runs it again each time.
set -euo pipefail

log() { echo "init-airflow: $*"; }
die() {
  echo "init-airflow: error: $*" >&2
  exit 1
}

placeholder=change-me
check_secret() { # variable, minimum length
  local name=$1 min=$2
  local value=${!name:-}
  [[ -n $value ]] || die "$name is empty: set it in .env (see .env.example and docs/deploy.md)"
  [[ $value != *"$placeholder"* ]] || die "$name is still the placeholder '$placeholder': set a real value in .env (docs/deploy.md)"
  ((${#value} >= min)) || die "$name is shorter than $min characters"
}

check_secret AIRFLOW__API_AUTH__JWT_SECRET 32
check_secret AIRFLOW__API__SECRET_KEY 16
check_secret AIRFLOW__CORE__FERNET_KEY 44
check_secret AIRFLOW_ADMIN_PASSWORD 8
[[ -n ${AIRFLOW_ADMIN_USERNAME:-} ]] || die "AIRFLOW_ADMIN_USERNAME is empty"
[[ ${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:?} != *":$placeholder@"* ]] ||
  die "POSTGRES_PASSWORD is still the placeholder '$placeholder': set a real value in .env (docs/deploy.md)"
[[ ${AIRFLOW__CELERY__BROKER_URL:?} != *":$placeholder@"* ]] ||
  die "REDIS_PASSWORD is still the placeholder '$placeholder': set a real value in .env (docs/deploy.md)"
python -c 'import os; from cryptography.fernet import Fernet; Fernet(os.environ["AIRFLOW__CORE__FERNET_KEY"])' 2>/dev/null ||
  die "AIRFLOW__CORE__FERNET_KEY is not a Fernet key (32 url-safe base64-encoded bytes); docs/deploy.md shows how to make one"

passwords=${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?}
log "writing the password of '$AIRFLOW_ADMIN_USERNAME' to $passwords"
python - "$passwords" <<'EOF'
import json
import os
import sys

path = sys.argv[1]
tmp = f"{path}.tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({os.environ["AIRFLOW_ADMIN_USERNAME"]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}, f)
    f.write("\n")
os.replace(tmp, path)
EOF

log "migrating the metadata database"
airflow db migrate

jobs_config=${DS2_JOBS_CONFIG:?}
[[ -f $jobs_config ]] || die "DS2_JOBS_CONFIG=$jobs_config: no such file in the container (include/ is mounted at /opt/ds2/include)"
log "creating the pools of the jobs in $jobs_config"
python -m ds2_airflow.bootstrap
log "done"
