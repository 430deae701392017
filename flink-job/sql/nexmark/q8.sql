-- Nexmark q8, new users: the people who joined and opened an auction in the same 10-s window
-- (a window join of persons and auctions). After tables.sql.
SET 'pipeline.name' = 'nexmark-q8';

CREATE TABLE q8_sink (id BIGINT, name STRING, starttime TIMESTAMP(3)) WITH ('connector' = 'blackhole');

INSERT INTO q8_sink
SELECT p.id, p.name, p.window_start
FROM (
  SELECT id, name, window_start, window_end
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) AS p
JOIN (
  SELECT seller, window_start, window_end
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) AS a
ON p.id = a.seller AND p.window_start = a.window_start AND p.window_end = a.window_end;
