"""Airflow objects the job DAGs need besides the DAG files: one pool per registered job.

Run once after ``airflow db migrate`` (``scripts/airflow.sh up`` and the compose file's init
do): ``python -m ds2_airflow.bootstrap``. A task in a pool that does not exist is never
scheduled, so every configured job gets its pool here (one slot: the policy and the rescale
of a job never run twice at once; deferred tasks keep their slot).
"""

from __future__ import annotations

import sys

from autoscaler.config.jobs import load_jobs
from autoscaler.errors import InputError
from ds2_airflow.provider_config import export_to_environment


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
    export_to_environment()
    try:
        pools = ensure_pools()
    except InputError as exc:
        print(f"ds2 bootstrap: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"ds2 bootstrap: pools ready: {', '.join(pools) or '(no jobs configured)'}")


if __name__ == "__main__":
    main()
