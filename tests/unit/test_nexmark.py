"""The Nexmark generator follows the model: 1 person, 3 auctions and 46 bids per 50 events; every id it
refers to exists already; some auctions are hot; sizes near the reference's; the same events on a rerun."""

from __future__ import annotations

import json
from collections import Counter

from autoscaler.kafka.nexmark import FIRST_ID, SIZES, auctions_before, event, kind_of, persons_before

EVENTS = [event(seq, 1_795_800_000.0 + seq / 1000) for seq in range(20_000)]


def test_each_block_of_50_holds_1_person_3_auctions_and_46_bids():
    assert Counter(kind_of(s) for s in range(5_000)) == {"person": 100, "auction": 300, "bid": 4_600}
    assert [kind_of(s) for s in range(5)] == ["person", "auction", "auction", "auction", "bid"]


def test_ids_count_up_and_references_point_at_what_already_exists():
    persons = auctions = 0
    for seq, (kind, e) in enumerate(EVENTS):
        assert (persons_before(seq), auctions_before(seq)) == (persons, auctions)
        if kind == "person":
            assert e["id"] == FIRST_ID + persons
            persons += 1
        elif kind == "auction":
            assert e["id"] == FIRST_ID + auctions and FIRST_ID <= e["seller"] < FIRST_ID + persons
            assert e["expires"] > e["dateTime"] and e["reserve"] > e["initialBid"]
            auctions += 1
        else:
            assert FIRST_ID <= e["auction"] < FIRST_ID + auctions and FIRST_ID <= e["bidder"] < FIRST_ID + persons


def test_some_auctions_draw_most_bids():
    # The hot ids move on every 100 auctions (some 1,667 events): look at a stretch shorter than that.
    bids = Counter(e["auction"] for k, e in EVENTS[10_000:11_500] if k == "bid")
    top3 = sum(n for _, n in bids.most_common(3))
    assert top3 > 0.3 * sum(bids.values()) and len(bids) > 50


def test_sizes_are_near_the_references_and_a_rerun_writes_the_same_events():
    for kind, want in SIZES.items():
        sizes = [len(json.dumps(e, separators=(",", ":"))) for k, e in EVENTS[:2_000] if k == kind]
        assert abs(sum(sizes) / len(sizes) - want) < 0.15 * want, (kind, sum(sizes) / len(sizes))
    assert [event(seq, 1_795_800_000.0 + seq / 1000) for seq in range(100)] == EVENTS[:100]
