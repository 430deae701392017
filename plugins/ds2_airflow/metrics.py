"""Send the autoscaler's metrics (:mod:`autoscaler.observe.metrics`) the way Airflow sends its own.

Through Airflow's stats facade, so ``[metrics]`` in Airflow's configuration decides where they go:
``statsd_on`` (with ``statsd_influxdb_enabled`` for the job and operator labels, as a Prometheus
StatsD exporter reads them) or ``otel_on``. With neither, nothing is sent. A metric that cannot be
sent is logged and never fails the task: the epoch's decision and audit row are already committed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from autoscaler.observe.metrics import COUNTER, Sample

log = logging.getLogger(__name__)


def emit(samples: Iterable[Sample]) -> int:
    """Send each sample (a gauge is set, a counter incremented); how many were handed to the backend."""
    from airflow.sdk.observability import stats

    sent = 0
    try:
        for s in samples:
            if s.metric.type == COUNTER:
                stats.incr(s.metric.name, int(s.value), tags=s.labels)
            else:
                stats.gauge(s.metric.name, s.value, tags=s.labels)
            sent += 1
    except Exception as exc:  # an unreachable or misconfigured backend costs the metrics, never the epoch
        log.warning("autoscaler metrics not sent (%d sent before): %s", sent, exc)
    return sent
