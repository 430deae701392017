-- A Flink SQL job with no line of Java of ours: datagen -> a keyed GROUP BY with state -> blackhole.
-- Its operators are the planner's ("Source: clicks", "GroupAggregate -> Calc -> user_counts: Writer");
-- the autoscaler scales it through Flink alone, with no flags (see README, "Registering a job").
-- Each update is digested (SHA-512 of 128 KB) before it is written, so at 2,000 clicks/s one
-- aggregate instance keeps up with about 1,300/s on these machines: the job starts short.
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
  clicks BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO user_counts
SELECT user_id, clicks
FROM (SELECT user_id, COUNT(*) AS clicks, MAX(url) AS url FROM clicks GROUP BY user_id)
WHERE CHAR_LENGTH(SHA512(REPEAT(url, 2000))) = 128;
