"""Observe: what people look at -- the job and fleet views' read API (``views.py``, ``series.py``) and
pages (``pages.py``, ``templates/``), the autoscaler's metrics (``metrics.py``; ``statsd_bridge.py``
serves them to Prometheus) and the alerts found in the newest epochs (``alerts.py``).

``record/`` holds what an epoch ended as; this folder reads it."""
