-- A Flink SQL job nobody here wrote a line of Java for: datagen -> a keyed GROUP BY -> blackhole.
-- Its operators are the planner's; the autoscaler scales it through Flink alone (no flags).
SET 'pipeline.name' = 'ds2-sql-user-counts';

CREATE TABLE clicks (
  user_id BIGINT,
  url STRING
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '2000',
  'fields.user_id.min' = '1',
  'fields.user_id.max' = '10000',
  'fields.url.length' = '64'
);

CREATE TABLE user_counts (
  user_id BIGINT,
  clicks BIGINT,
  digest STRING
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO user_counts
SELECT user_id, COUNT(*) AS clicks, MAX(SHA256(url)) AS digest
FROM clicks
GROUP BY user_id;
