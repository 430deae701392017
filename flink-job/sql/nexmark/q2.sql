-- Nexmark q2, selection: the bids on a set of auctions (a filter). After tables.sql.
SET 'pipeline.name' = 'nexmark-q2';

CREATE TABLE q2_sink (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO q2_sink
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
