"""A Nexmark event generator: the online auction's persons, auctions and bids, as JSON into three topics.

Written from the Nexmark model (Tucker et al., "NEXMark - A Benchmark for Queries over Data Streams"),
as the reference generators shape it:

- **Proportions.** In every block of 50 events: 1 person, 3 auctions and 46 bids, interleaved (event 0 of
  a block is the person, events 1-3 the auctions, the rest bids).
- **Ids.** Persons and auctions are numbered from ``FIRST_ID`` in the order they are created. A new auction's
  seller and a bid's bidder are recent persons; a bid's auction is a recent auction. A share of the picks
  (``hot_share``) goes to a few *hot* ids (the newest ids that are multiples of ``HOT_STRIDE``): some
  auctions draw most bids and some people bid and sell most, as on a real site.
- **Times.** ``dateTime`` is the event's time: the wall-clock time its sequence number was scheduled
  (the generator runs on the schedule, so event time follows arrival). An auction ``expires`` 10-30 s of
  event time later, so windowed queries close auctions within a test.
- **Sizes.** ``extra`` pads each event towards an average size (person 200 B, auction 500 B, as the
  reference's; bid 200 B, where the reference's compact encoding has 100 B: JSON's field names and the
  url alone take some 170 B), since record size drives a Kafka source's cost.

The event of a sequence number is a pure function of it and the seed: a rerun writes the same events.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime

FIRST_ID = 1000
BLOCK, PERSONS_PER_BLOCK, AUCTIONS_PER_BLOCK = 50, 1, 3
HOT_STRIDE = 100  # hot ids: multiples of this among the recent ones
RECENT_PERSONS, RECENT_AUCTIONS = 100, 1000
CATEGORIES = (10, 11, 12, 13, 14)
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne")
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
TOPICS = ("person", "auction", "bid")
SIZES = {"person": 200, "auction": 500, "bid": 200}


@dataclass(frozen=True)
class NexmarkConfig:
    seed: int = 1
    hot_share: float = 0.5  # share of bids (auction and bidder) and sellers drawn from the hot ids


def kind_of(seq: int) -> str:
    """``person``, ``auction`` or ``bid``: the event type of sequence number ``seq``."""
    i = seq % BLOCK
    return "person" if i < PERSONS_PER_BLOCK else "auction" if i < PERSONS_PER_BLOCK + AUCTIONS_PER_BLOCK else "bid"


def persons_before(seq: int) -> int:
    """Persons created by events ``0 .. seq - 1``."""
    full, rest = divmod(seq, BLOCK)
    return full * PERSONS_PER_BLOCK + min(rest, PERSONS_PER_BLOCK)


def auctions_before(seq: int) -> int:
    full, rest = divmod(seq, BLOCK)
    return full * AUCTIONS_PER_BLOCK + min(max(rest - PERSONS_PER_BLOCK, 0), AUCTIONS_PER_BLOCK)


def _pick(rng: random.Random, created: int, recent: int, hot_share: float) -> int:
    """An existing id: with probability ``hot_share`` one of the 3 newest hot ids, else one of the ``recent`` newest."""
    if created <= 0:
        return FIRST_ID
    newest = FIRST_ID + created - 1
    hot = newest - newest % HOT_STRIDE
    if hot >= FIRST_ID and rng.random() < hot_share:
        return hot - HOT_STRIDE * rng.randrange(min(3, (hot - FIRST_ID) // HOT_STRIDE + 1))
    return newest - rng.randrange(min(created, recent))


def _stamp(t: float) -> str:
    """Flink JSON's default TIMESTAMP(3) form: ``yyyy-MM-dd HH:mm:ss.SSS`` (UTC)."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


_PADDING = "abcdefghijklmnopqrstuvwxyz" * 20


def _pad(event: dict, kind: str) -> dict:
    size = len(json.dumps(event, separators=(",", ":")))
    event["extra"] = _PADDING[: max(SIZES[kind] - size - 11, 0)]  # 11: the bytes of ',"extra":""'
    return event


def event(seq: int, at: float, config: NexmarkConfig = NexmarkConfig()) -> tuple[str, dict]:
    """The event of sequence number ``seq`` at event time ``at`` (epoch seconds): (kind, JSON object)."""
    rng = random.Random(config.seed * 1_000_003 + seq)
    kind, persons, auctions = kind_of(seq), persons_before(seq), auctions_before(seq)
    if kind == "person":
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        e = {"id": FIRST_ID + persons, "name": f"{first} {last}", "emailAddress": f"{first.lower()}@{last.lower()}.com",
             "creditCard": " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4)), "city": rng.choice(US_CITIES),
             "state": rng.choice(US_STATES), "dateTime": _stamp(at)}  # fmt: skip
    elif kind == "auction":
        initial = rng.randrange(1, 1000) * 100
        e = {"id": FIRST_ID + auctions, "itemName": f"item-{rng.randrange(1_000_000)}", "description": "a thing for sale",
             "initialBid": initial, "reserve": initial + rng.randrange(1, 1000) * 100, "dateTime": _stamp(at),
             "expires": _stamp(at + rng.uniform(10, 30)), "seller": _pick(rng, persons, RECENT_PERSONS, config.hot_share),
             "category": rng.choice(CATEGORIES)}  # fmt: skip
    else:
        e = {"auction": _pick(rng, auctions, RECENT_AUCTIONS, config.hot_share),
             "bidder": _pick(rng, persons, RECENT_PERSONS, config.hot_share), "price": rng.randrange(100, 1_000_000),
             "channel": rng.choice(CHANNELS), "url": f"https://www.nexmark.com/item.htm?query=1&channel_id={rng.randrange(4)}",
             "dateTime": _stamp(at)}  # fmt: skip
    return kind, _pad(e, kind)
