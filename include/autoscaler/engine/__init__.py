"""Engine: where the policy kinds run over stored epochs -- on Spark (``spark/``: per job, per stored block,
the fleet, the rates log, the warm Connect engine, one stored run for both engines), the operator windows
over Arrow and Spark (``windows.py``) and backfill batching (``backfill.py``).

The kinds themselves are pure functions in ``policy/``; this folder feeds them epochs and commits what they
decide."""
