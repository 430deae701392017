"""The load generator writes the test job's own lines, and reads the job's rate-schedule notation.

The expected values were printed by the Java job's ``LineGenerator.line`` and ``RateSchedule`` (the
generator and the job's built-in source must carry the same keys, so that a Kafka-fed run and a built-in
one load Count alike).
"""

from __future__ import annotations

import pytest

from autoscaler.kafka.client import KafkaSetupError, check_topic, read_client_config
from autoscaler.kafka.generator import line
from autoscaler.kafka.schedule import RateSchedule

# seq -> (line(seq, 10000 keys, 3 words, no skew), line(seq, 1000 keys, 2 words, skew 0.3)), from Java.
JAVA_LINES = {
    0: ("k5919 k849 k6494", "k919 k849"),
    1: ("k9053 k3978 k8618", "k494 k0"),
    2: ("k8976 k4487 k6006", "k978 k618"),
    12345: ("k3223 k2965 k551", "k882 k673"),
    987654321: ("k1950 k9915 k5325", "k0 k335"),
}


@pytest.mark.parametrize("seq", sorted(JAVA_LINES))
def test_lines_are_the_java_jobs_lines(seq):
    assert (line(seq, 10000, 3, 0.0), line(seq, 1000, 2, 0.3)) == JAVA_LINES[seq]


def test_a_skewed_line_draws_the_hot_key_about_as_often_as_asked():
    hot = sum(line(s, 1000, 1, 0.3) == "k0" for s in range(20_000)) / 20_000
    assert hot == pytest.approx(0.3 + 0.7 / 1000, abs=0.01)


def test_the_schedule_reads_as_the_java_job_does():
    r = RateSchedule.parse("0s:20000,120s:30000,4m:10000")
    # RateSchedule.java: cumulative(130 s) = 2,700,000; rateAt(250 s) = 10,000; cumulative(300 s) = 6,600,000.
    assert (r.cumulative(130), r.rate_at(250), r.cumulative(300)) == (2_700_000, 10_000, 6_600_000)
    assert RateSchedule.parse("500ms:1, 1.5m:2, 1h:3").at_s == (0.5, 90.0, 3600.0)
    assert str(RateSchedule.constant(5000)) == "0s:5000"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "has no step"),
        ("10s", "not <time>"),
        ("x:5", "bad duration"),
        ("0s:-1", ">= 0"),
        ("0s:abc", "bad rate"),
        ("10s:1,5s:2", "must increase"),
    ],
)
def test_a_bad_schedule_is_named(spec, problem):
    with pytest.raises(ValueError, match=problem):
        RateSchedule.parse(spec)


def test_the_client_config_needs_every_login_key_and_never_shows_the_password(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# comment\nbootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.password=s3cret\n")
    with pytest.raises(KafkaSetupError, match=r"missing sasl\.mechanism, sasl\.username") as e:
        read_client_config(path)
    assert "s3cret" not in str(e.value)
    path.write_text("not a pair\n")
    with pytest.raises(KafkaSetupError, match="line 1: not key=value"):
        read_client_config(path)
    with pytest.raises(KafkaSetupError, match="cannot be read"):
        read_client_config(tmp_path / "missing")


@pytest.mark.parametrize("name", ["", ".", "a/b", "a b", "x" * 250, "t\n"])
def test_topic_names_are_checked_by_full_match(name):
    with pytest.raises(KafkaSetupError, match="topic"):
        check_topic(name)
