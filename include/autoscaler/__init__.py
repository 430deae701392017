"""DS2 autoscaler core, one folder per stage of the loop (pure Python, no Airflow import).

- ``config/``: the registered jobs and every option, with its default and meaning;
- ``collect/``: metrics of an epoch (Flink counter snapshots, DS2 rate files);
- ``validate/``: the Great Expectations suite that keeps bad metrics from any decision;
- ``policy/``: the policies (pure functions, one skeleton's parts);
- ``engine/``: where they run over stored epochs: Spark, the Arrow windows, backfill batching;
- ``decide/``: whether a proposal is worth acting on (warm-up, hysteresis, cooldown, bounds);
- ``rescale/``: savepoint-restart and in-place rescales, journaled and rolled back on failure;
- ``record/``: what an epoch ended as: its outcome, the audit trail and the loop report;
- ``observe/``: what people look at: the views' read API and pages, the metrics, the alerts;
- ``store/``: the table schemas and the Parquet store every stage reads and writes;
- ``flink/``: the Flink REST boundary (client, models, ids, deployment).

The Spark job (``spark_jobs/ds2_policy.py``) and the Airflow DAGs both delegate to this package.
"""
