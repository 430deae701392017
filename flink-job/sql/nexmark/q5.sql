-- Nexmark q5, hot items: the auctions with the most bids in each sliding window of 10 s, every 2 s
-- (a windowed count per auction, then the largest count per window). After tables.sql.
SET 'pipeline.name' = 'nexmark-q5';

CREATE TABLE q5_sink (auction BIGINT, num BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO q5_sink
SELECT counts.auction, counts.num
FROM (
  SELECT auction, COUNT(*) AS num, window_start, window_end
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end
) AS counts
JOIN (
  SELECT MAX(num) AS maxn, window_start, window_end
  FROM (
    SELECT COUNT(*) AS num, window_start, window_end
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
  )
  GROUP BY window_start, window_end
) AS most
ON counts.window_start = most.window_start AND counts.window_end = most.window_end AND counts.num >= most.maxn;
