-- Nexmark q1, currency conversion: every bid's price in euros (a map). After tables.sql.
SET 'pipeline.name' = 'nexmark-q1';

CREATE TABLE q1_sink (auction BIGINT, bidder BIGINT, price DECIMAL(23, 3), `dateTime` TIMESTAMP(3), extra STRING)
WITH ('connector' = 'blackhole');

INSERT INTO q1_sink
SELECT auction, bidder, 0.908 * price, `dateTime`, extra FROM bid;
