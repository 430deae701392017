"""Collect: an epoch's per-instance metrics, from Flink counter snapshots (``flink.py``,
``snapshot.py``, ``boundaries.py``) or DS2 rate files (``ds2_files.py``)."""
