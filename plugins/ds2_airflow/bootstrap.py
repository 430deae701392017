"""Airflow objects the job DAGs need besides the DAG files: one pool per registered job.

Run once after ``airflow db migrate`` (``scripts/airflow.sh up`` and the compose file's init
do): ``python -m ds2_airflow.bootstrap``. A task in a pool that does not exist is never
scheduled, so every configured job gets its pool here (one slot: the policy and the rescale
of a job never run twice at once; deferred tasks keep their slot). A store on an object store is
asked once here, so that a wrong bucket or connection is named at install time.
"""

from __future__ import annotations

import os
import sys

from autoscaler.config import paths
from autoscaler.config.jobs import load_jobs
from autoscaler.errors import InputError
from autoscaler.store.delta import is_store_url
from ds2_airflow.provider_config import export_to_environment
from ds2_airflow.store_access import check_store


def ensure_pools() -> list[str]:
    from airflow.models.pool import Pool

    names = []
    for job in load_jobs():
        Pool.create_or_update_pool(
            name=job.pool,
            slots=1,
            description=f"DS2 autoscaler: one policy run or rescale of job {job.name} at a time",
            include_deferred=True,
        )
        names.append(job.pool)
    return names


def main() -> None:
    try:
        export_to_environment()
        store = paths.store()
        if is_store_url(store):  # a wrong bucket or connection shows here, once, not in every task
            check_store(str(store), os.environ.get(paths.STORE_CONN_ID.env) or None)
        pools = ensure_pools()
    except InputError as exc:
        print(f"ds2 bootstrap: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"ds2 bootstrap: store {store}; pools ready: {', '.join(pools) or '(no jobs configured)'}")


if __name__ == "__main__":
    main()
