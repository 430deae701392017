"""The autoscaler's metrics (observe/metrics.py) and the StatsD receiver that serves them to Prometheus."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.observe import metrics as m
from autoscaler.observe.statsd_bridge import COUNTER, GAUGE, TIMER, Line, Samples, parse_line, with_basic_auth
from autoscaler.observe.views import DECIDED, QUARANTINED, EpochView

START = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def view(**kw) -> EpochView:
    base = dict(epoch=100, start=START, end=START + timedelta(seconds=30), state=DECIDED)
    return EpochView(**{**base, **kw})


def by_name(samples: list[m.Sample]) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for s in samples:
        out.setdefault(s.metric.name, []).append((s.labels, s.value))
    return out


def test_a_rescaled_epoch_exports_its_new_parallelism_downtime_outcome_and_lag():
    v = view(
        parallelism={"Source: Source": 2, "Count": 2}, applied={"Count": 4}, recommended={"Count": 4},
        source_arrival={"Source: Source": 20_000.0}, source_backlog={"Source: Source": 12_345.0},
        capacity={"Count": 5_500.0}, downtime_s=4.2, decided_at=START + timedelta(seconds=37.5),
    )  # fmt: skip
    got = by_name(m.epoch_samples("testjob", [v], "succeeded"))
    assert got["ds2.parallelism.current"] == [
        ({"job": "testjob", "operator": "Count"}, 4.0),  # after the rescale, not the measured 2
        ({"job": "testjob", "operator": "Source__Source"}, 2.0),
    ]
    assert got["ds2.parallelism.recommended"] == [({"job": "testjob", "operator": "Count"}, 4.0)]
    assert got["ds2.source.arrival_rate"] == [({"job": "testjob", "operator": "Source__Source"}, 20_000.0)]
    assert got["ds2.source.backlog"] == [({"job": "testjob", "operator": "Source__Source"}, 12_345.0)]
    assert got["ds2.operator.capacity_per_instance"] == [({"job": "testjob", "operator": "Count"}, 5_500.0)]
    assert got["ds2.decisions_total"] == [({"job": "testjob", "outcome": "succeeded"}, 1.0)]
    assert got["ds2.rescale.downtime_seconds"] == [({"job": "testjob", "outcome": "succeeded"}, 4.2)]
    assert got["ds2.decision.lag_seconds"] == [({"job": "testjob"}, 7.5)]
    assert got["ds2.epoch.recorded"] == [({"job": "testjob"}, 100.0)]
    assert "ds2.validation.failures_total" not in got


def test_a_quarantined_epoch_counts_a_validation_failure_and_exports_no_decision_figures():
    got = by_name(m.epoch_samples("testjob", [view(state=QUARANTINED)], "skipped"))
    assert got["ds2.validation.failures_total"] == [({"job": "testjob"}, 1.0)]
    assert got["ds2.decisions_total"] == [({"job": "testjob", "outcome": "skipped"}, 1.0)]
    assert not {"ds2.decision.lag_seconds", "ds2.parallelism.recommended", "ds2.rescale.downtime_seconds"} & set(got)


def test_current_parallelism_after_a_late_epoch_is_the_rescaled_one():
    # Epoch 100 rescaled Count 1 -> 4, finishing 10 s after its end; epoch 101 ran late and measured Count 1 in
    # a window that ended before that rescale: the job runs at 4, not at what the late epoch measured.
    rescaled = view(epoch=100, parallelism={"Count": 1}, applied={"Count": 4}, outcome="succeeded",
                    rescaled_at=START + timedelta(seconds=40))  # fmt: skip
    late = view(epoch=101, start=START + timedelta(seconds=30), end=START + timedelta(seconds=35), parallelism={"Count": 1})
    assert m.current_parallelism([rescaled]) == {"Count": 4}
    assert m.current_parallelism([rescaled, late]) == {"Count": 4}
    # An epoch measured after the rescale finished reports what it measured.
    after = view(epoch=102, start=START + timedelta(seconds=60), end=START + timedelta(seconds=90), parallelism={"Count": 4})
    assert m.current_parallelism([rescaled, late, after]) == {"Count": 4}
    failed = view(epoch=100, parallelism={"Count": 1}, applied={}, outcome="failed", rescaled_at=START + timedelta(seconds=40))
    assert m.current_parallelism([failed, late]) == {"Count": 1}


def test_label_values_are_what_airflows_stats_client_accepts():
    assert m.label_value("GroupAggregate[2], Sink: x=y") == "GroupAggregate_2___Sink__x_y"
    assert m.label_value("") == "_" and len(m.label_value("a" * 500)) == 100
    assert m.label_value("lab-job.v2/a_b") == "lab-job.v2/a_b"


def test_docs_list_every_metric():
    docs = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
    assert m.metrics_table() in docs.read_text(), "docs/metrics.md is stale: python -m autoscaler.observe.metrics"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("airflow.ds2.parallelism.current,job=j,operator=Count:4|g",
         Line("airflow_ds2_parallelism_current", (("job", "j"), ("operator", "Count")), 4.0, GAUGE)),
        ("airflow.ds2.decisions_total,outcome=noop,job=j:1|c|@0.5",
         Line("airflow_ds2_decisions_total", (("job", "j"), ("outcome", "noop")), 2.0, COUNTER)),
        ("airflow.dag.x.duration:1500|ms", Line("airflow_dag_x_duration", (), 1500.0, TIMER)),
        ("a.b:-3|g", Line("a_b", (), -3.0, GAUGE, delta=True)),
        ("airflow.ti.start.my-dag.t:1|c", Line("airflow_ti_start_my_dag_t", (), 1.0, COUNTER)),
    ],
)  # fmt: skip
def test_statsd_lines_with_influxdb_tags(line, expected):
    assert parse_line(line) == expected


@pytest.mark.parametrize("line", ["", "novalue", "a:|g", "a:x|g", "a:1|zz", "a,9bad=v:1|g", "a:nan|g", "a:1|c|@0", ":1|g"])
def test_lines_the_receiver_does_not_take_are_dropped(line):
    assert parse_line(line) is None


def test_the_receiver_serves_gauges_counters_and_timers_in_prometheus_text():
    samples = Samples()
    for raw in ["g1,job=a:5|g", "g1,job=a:+2|g", "g1,job=b:1|g", "c1,job=a:1|c", "c1,job=a:2|c", "t1:250|ms", "t1:750|ms"]:
        samples.add(parse_line(raw))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(samples)
    text = generate_latest(registry).decode()
    assert 'g1{job="a"} 7.0' in text and 'g1{job="b"} 1.0' in text
    assert 'c1_total{job="a"} 3.0' in text
    assert "t1_count 2.0" in text and "t1_sum 1.0" in text


def test_the_receiver_refuses_a_request_without_the_password():
    calls = []
    app = with_basic_auth(lambda env, start: calls.append(1) or [b"ok"], "ds2", "s3cret")
    statuses = []
    start = lambda status, headers: statuses.append(status)  # noqa: E731
    assert app({}, start) == [b"authentication required\n"]
    wrong = "Basic " + base64.b64encode(b"ds2:nope").decode()
    app({"HTTP_AUTHORIZATION": wrong}, start)
    right = "Basic " + base64.b64encode(b"ds2:s3cret").decode()
    assert app({"HTTP_AUTHORIZATION": right}, start) == [b"ok"]
    assert statuses == ["401 Unauthorized", "401 Unauthorized"] and calls == [1]
