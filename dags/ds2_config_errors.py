"""Reports the bad entries of the jobs config as this file's import error, one line each.

The good entries' DAGs are built by ds2_autoscaler.py all the same: one bad job never takes the
others down. With no bad entry this file defines nothing and imports cleanly. (It names "airflow"
and "DAG" so that the dag-processor's safe mode reads it: a file naming neither is skipped.)
"""

from __future__ import annotations

from autoscaler.config.jobs import load_jobs_each
from autoscaler.errors import InputError

try:
    _jobs, _bad = load_jobs_each()
except InputError:
    _bad = []  # a file-level problem is ds2_autoscaler.py's import error already

if _bad:
    first = _bad[0]
    more = "".join(f"\n{e}" for e in _bad[1:])
    raise InputError(first.source, first.problem + more, first.line) from None
