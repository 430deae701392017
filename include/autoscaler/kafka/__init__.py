"""Kafka for the test bed: the client config ``scripts/kafka.sh`` writes, topics, and a load generator.

The autoscaler itself never talks to Kafka: it reads what a Flink Kafka source reports (records out and
FLIP-33's ``pendingRecords``) through Flink's REST API or Prometheus. This package serves the broker's
start-up probe, the tests, the demo and the benchmarks, which need a topic filled at a known schedule.
"""
