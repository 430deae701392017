"""Rescaling a running Flink job, safely and idempotently.

Two mechanisms:

- :func:`rescale_with_savepoint`: stop-with-savepoint, then run the job's jar from that
  savepoint with the new per-operator parallelism in its program arguments (any scheduler), or, for
  a job without such flags (a SQL job), unchanged and then set vertex by vertex through the adaptive
  scheduler (Flink 2.3 ignores ``pipeline.jobvertex-parallelism-overrides``). A new job id.
- :func:`rescale_in_place` (adaptive scheduler only): ``PUT /jobs/:id/resource-requirements``
  plus a manual checkpoint so the change applies at once. Same job id.

Both verify what actually runs (``/jobs/:id`` vertex parallelism; the live ``/jobs/overview``
for "all tasks RUNNING"), because Flink accepts requests it then does not honour.

Failures never leave the job stopped when that can be avoided: a failed or late savepoint
leaves the job running (or restarts it unchanged from the late savepoint); a failed restart is
rolled back from the same savepoint at the previous parallelism. Only when the rollback fails
too is the job left stopped, and the result says so and names the savepoint that restores it.

Every step is journaled to ``journal_dir/<action_id>.json`` (atomic replace) before and after
its side effect, so an orchestrator retry (same ``action_id``) after a crash resumes where the
first attempt stopped: it returns a recorded result as is, never takes a second savepoint of a
job it already rescaled and never submits the job twice. Pure Python: no Airflow import.

Modules: ``result`` (what an action did), ``journal`` (the resumable state), ``checks`` (shared
checks and waits), ``savepoint`` and ``restart`` (savepoint-restart), ``in_place``.
"""
