-- Nexmark's three streams, as Kafka tables over the topics the generator writes
-- (python -m autoscaler.kafka produce --events nexmark --topic nexmark). A query's script is this file
-- followed by the query's own (jobs.yaml: sql_file: [flink-job/sql/nexmark/tables.sql, .../q5.sql]).
-- The login comes from the job's Kafka client config (kafka_client_config), never from this file.
-- Each job starts at the topics' end (a query measures the load from when it starts) and afterwards
-- resumes from the offsets in its savepoint; it commits no offsets, so queries never share a group's.
-- Event time is each event's dateTime, with 2 s of allowed disorder.
-- A fetch holds at most 64 KiB a partition: some 300 bids, under a second of a partition's input here. A
-- Kafka source's pendingRecords is as fresh as its last fetch; with Kafka's default 1 MiB a back-pressured
-- reader drains seconds of records between fetches and its lag reads falling while records arrive
-- (benchmarks/results/kafka-rate-error.md: arrival 47-54 % short under back-pressure, against 0-1 % with
-- fetches of under a second). The principle: record size x a partition's rate x 1 s.

CREATE TABLE person (
  id BIGINT,
  name STRING,
  emailAddress STRING,
  creditCard STRING,
  city STRING,
  state STRING,
  `dateTime` TIMESTAMP(3),
  extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'nexmark-person',
  'properties.bootstrap.servers' = '${kafka.bootstrap.servers}',
  'properties.security.protocol' = '${kafka.security.protocol}',
  'properties.sasl.mechanism' = '${kafka.sasl.mechanism}',
  'properties.sasl.jaas.config' = '${kafka.sasl.jaas.config}',
  'properties.group.id' = 'nexmark',
  'properties.commit.offsets.on.checkpoint' = 'false',
  'properties.max.partition.fetch.bytes' = '65536',
  'scan.startup.mode' = 'latest-offset',
  'format' = 'json'
);

CREATE TABLE auction (
  id BIGINT,
  itemName STRING,
  description STRING,
  initialBid BIGINT,
  reserve BIGINT,
  `dateTime` TIMESTAMP(3),
  expires TIMESTAMP(3),
  seller BIGINT,
  category BIGINT,
  extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'nexmark-auction',
  'properties.bootstrap.servers' = '${kafka.bootstrap.servers}',
  'properties.security.protocol' = '${kafka.security.protocol}',
  'properties.sasl.mechanism' = '${kafka.sasl.mechanism}',
  'properties.sasl.jaas.config' = '${kafka.sasl.jaas.config}',
  'properties.group.id' = 'nexmark',
  'properties.commit.offsets.on.checkpoint' = 'false',
  'properties.max.partition.fetch.bytes' = '65536',
  'scan.startup.mode' = 'latest-offset',
  'format' = 'json'
);

CREATE TABLE bid (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel STRING,
  url STRING,
  `dateTime` TIMESTAMP(3),
  extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'nexmark-bid',
  'properties.bootstrap.servers' = '${kafka.bootstrap.servers}',
  'properties.security.protocol' = '${kafka.security.protocol}',
  'properties.sasl.mechanism' = '${kafka.sasl.mechanism}',
  'properties.sasl.jaas.config' = '${kafka.sasl.jaas.config}',
  'properties.group.id' = 'nexmark',
  'properties.commit.offsets.on.checkpoint' = 'false',
  'properties.max.partition.fetch.bytes' = '65536',
  'scan.startup.mode' = 'latest-offset',
  'format' = 'json'
);
