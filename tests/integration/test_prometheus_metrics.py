"""The autoscaler's own metrics, sent by Airflow's StatsD client and scraped into a real Prometheus.

``scripts/prometheus.sh`` starts Debian's Prometheus and the StatsD receiver it scrapes, on loopback,
behind a generated password. A task process of a real Airflow (its stats backend set up from
``[metrics]`` exactly as Airflow's task runner does) sends what the record task sends for recorded
epochs of a closed-loop lab run (``tests/fixtures/views``). The test then asks Prometheus's query API
for each metric and compares it with the store: the values a dashboard would graph are the ones the
autoscaler decided.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import requests

from autoscaler.observe import metrics as m
from autoscaler.observe.views import job_view
from autoscaler.store.parquet import epoch_span
from autoscaler.store.schemas import DECISIONS
from tests.conftest import ROOT
from tests.helpers import poll

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "scripts" / "prometheus.sh"
STORE = ROOT / "tests" / "fixtures" / "views" / "store"
JOB, INTERVAL = "lab-step-up-down-ds2_plus", 30.0

# A task process's stats backend, set up as airflow.sdk.execution_time.task_runner.main does, then
# the record task's own emitter on the store's view of each epoch.
SEND = """
import sys
from airflow.sdk._shared.observability.metrics import stats
from airflow.sdk.observability.metrics import stats_utils
stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
from autoscaler.observe.metrics import epoch_samples, policy_duration_sample
from autoscaler.observe.views import job_view
from ds2_airflow.metrics import emit
store, job, interval, first, last = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sent = 0
views = job_view(store, job, interval, first, last)
for i, view in enumerate(views):
    sent += emit(epoch_samples(job, views[: i + 1], view.outcome))
sent += emit([policy_duration_sample(job, 2.5)])
print(sent)
"""


def _epochs() -> tuple[int, int]:
    span = epoch_span(STORE, DECISIONS, JOB)
    assert span, "the fixture store has no decisions"
    return span


def test_metrics_reach_prometheus_with_job_and_operator_labels(prometheus, tmp_path):
    url = prometheus.url
    assert requests.get(f"{url}/api/v1/query", params={"query": "up"}, timeout=10).status_code == 401  # anonymous

    first, last = _epochs()
    airflow_env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "plugins"), str(ROOT / "include")]),
        **prometheus.airflow_env,
    }
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(SEND), str(STORE), JOB, str(INTERVAL), str(first), str(last)],
                         env=airflow_env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.split()[-1]) > 50

    value = prometheus.query

    poll("the newest epoch in Prometheus", lambda: value(f'airflow_ds2_epoch_recorded{{job="{JOB}"}}'), timeout_s=60)
    views = job_view(STORE, JOB, INTERVAL, first, last)
    newest = [v for v in views if v.recommended][-1]
    assert value(f'airflow_ds2_epoch_recorded{{job="{JOB}"}}') == {"": float(views[-1].epoch)}

    # Gauges hold each operator's value from the newest epoch that had one, under the Flink job's name.
    def newest_of(values_of) -> dict[str, float]:
        out: dict[str, float] = {}
        for v in views:
            out.update({m.label_value(op): float(x) for op, x in values_of(v).items()})
        return out

    current: dict[str, float] = {}
    for i in range(len(views)):
        current.update({m.label_value(op): float(n) for op, n in m.current_parallelism(views[: i + 1]).items()})
    assert value(f'airflow_ds2_parallelism_current{{job="{JOB}"}}') == current
    recommended = value(f'airflow_ds2_parallelism_recommended{{job="{JOB}"}}')
    assert recommended == newest_of(lambda v: v.recommended) == {m.label_value(o): n for o, n in newest.recommended.items()}
    assert "Sink__Writer" in recommended  # "Sink: Writer" as a label value Airflow accepts
    arrival = value(f'airflow_ds2_source_arrival_rate{{job="{JOB}"}}')
    assert arrival == pytest.approx(newest_of(lambda v: v.source_arrival), rel=1e-9) and arrival
    assert value(f'airflow_ds2_operator_capacity_per_instance{{job="{JOB}",operator="Count"}}')["Count"] > 0
    # Counters add up over epochs: one decision per recorded epoch, by outcome.
    outcomes = value(f'airflow_ds2_decisions_total{{job="{JOB}"}}')
    expected: dict[str, float] = {}
    for v in views:
        if v.outcome:
            expected[v.outcome] = expected.get(v.outcome, 0) + 1
    assert outcomes == expected and outcomes.get("succeeded", 0) >= 2
    downtime = value(f'airflow_ds2_rescale_downtime_seconds{{job="{JOB}",outcome="succeeded"}}')
    last_rescale = [v for v in views if v.outcome == "succeeded"][-1]
    assert downtime == {"succeeded": pytest.approx(last_rescale.downtime_s)}
    lag = value(f'airflow_ds2_decision_lag_seconds{{job="{JOB}"}}')[""]
    assert 0 < lag == pytest.approx((newest.decided_at - newest.end).total_seconds())
    assert value(f'airflow_ds2_policy_duration_seconds{{job="{JOB}"}}') == {"": 2.5}
