"""``python -m autoscaler.kafka``: the broker probe, topics and the load generator, for scripts and tests.

  probe --client-config F [--timeout S]            list the broker's topics (exit 0 when it answers)
  create-topic --client-config F --topic T --partitions N
  produce --client-config F --topic T (--rate R | --rate-schedule SPEC) [--start-ms MS] [--duration S]
          [--keys K] [--words-per-record W] [--skew X] [--events lines|nexmark] [--progress FILE]

The password is read from the client config file, never from the command line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from autoscaler.kafka.client import KafkaSetupError, ensure_topic, list_topics, read_client_config
from autoscaler.kafka.generator import Load, run_until_signalled
from autoscaler.kafka.schedule import RateSchedule


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autoscaler.kafka", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe", help="list the broker's topics")
    probe.add_argument("--timeout", type=float, default=5.0)
    topic = sub.add_parser("create-topic", help="create a topic unless it exists with that partition count")
    topic.add_argument("--topic", required=True)
    topic.add_argument("--partitions", type=int, required=True)
    produce = sub.add_parser("produce", help="write the test job's lines at a rate schedule")
    produce.add_argument("--topic", required=True)
    rate = produce.add_mutually_exclusive_group(required=True)
    rate.add_argument("--rate", type=float)
    rate.add_argument("--rate-schedule")
    produce.add_argument("--start-ms", type=int, help="wall clock (ms) of the schedule's 0 s; default now")
    produce.add_argument("--duration", type=float, help="seconds from the start; default until SIGTERM")
    produce.add_argument("--keys", type=int, default=1000)
    produce.add_argument("--words-per-record", type=int, default=1)
    produce.add_argument("--skew", type=float, default=0.0)
    produce.add_argument(
        "--events",
        choices=("lines", "nexmark"),
        default="lines",
        help="the test job's lines into --topic, or Nexmark's events into --topic-{person,auction,bid}",
    )
    produce.add_argument("--progress", type=Path, help="JSON lines of records acknowledged, once a second")
    for s in (probe, topic, produce):
        s.add_argument("--client-config", type=Path, required=True, help="scripts/kafka.sh client-config")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = read_client_config(args.client_config)
        if args.command == "probe":
            for name, partitions in sorted(list_topics(config, args.timeout).items()):
                print(f"{name}\t{partitions}")
        elif args.command == "create-topic":
            created = ensure_topic(config, args.topic, args.partitions)
            print(f"topic {args.topic}: {'created' if created else 'exists'} with {args.partitions} partitions")
        else:
            if args.keys < 1 or args.words_per_record < 1 or not 0 <= args.skew <= 1:
                raise KafkaSetupError("--keys and --words-per-record must be at least 1, --skew in [0, 1]")
            schedule = RateSchedule.constant(args.rate) if args.rate is not None else RateSchedule.parse(args.rate_schedule)
            start = args.start_ms / 1000 if args.start_ms is not None else time.time()
            load = Load(args.topic, schedule, start, args.keys, args.words_per_record, args.skew, args.duration, args.events)
            acked = run_until_signalled(config, load, args.progress)
            print(f"topic {args.topic}: {acked} records acknowledged")
    except (KafkaSetupError, ValueError) as e:
        print(f"autoscaler.kafka: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
