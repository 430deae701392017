"""A StatsD receiver that serves what it received to Prometheus: the local stand-in for statsd_exporter.

Airflow sends its metrics, and ours, over StatsD. In a deployment, Prometheus reads them through
the Prometheus project's ``statsd_exporter``; that Go binary is neither in Debian nor on PyPI, so
these machines cannot install it. This module does the part of its job the autoscaler needs, the
same way: StatsD lines with InfluxDB-style tags (``name,job=x,operator=y:4|g``, what Airflow sends
with ``statsd_influxdb_enabled``) become samples named with dots as underscores and the tags as
labels (``name{job="x",operator="y"} 4``). Gauges keep the last value (``+n``/``-n`` change it),
counters add up (``_total``), timers (``ms``) become a summary's count and sum in seconds.
The exposition is written by ``prometheus_client`` and served only to a client with the password
(HTTP basic auth), on loopback.

    python -m autoscaler.observe.statsd_bridge --statsd-port 29125 --http-port 29102 --password-file F
"""

from __future__ import annotations

import argparse
import base64
import hmac
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

log = logging.getLogger(__name__)

GAUGE, COUNTER, TIMER = "g", "c", "ms"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_:]")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Line:
    name: str  # Prometheus name: dots and other characters as "_"
    labels: tuple[tuple[str, str], ...]
    value: float
    type: str  # g, c or ms
    delta: bool = False  # a gauge's "+n" / "-n"


def parse_line(line: str) -> Line | None:
    """One StatsD line, or None (with a debug log) for a line this bridge does not take."""
    try:
        body, _, meta = line.partition("|")  # "name,k=v:value", "g|@0.5"
        head, sep, raw = body.rpartition(":")
        kind, *extra = meta.split("|")
        rate = next((float(f[1:]) for f in extra if f.startswith("@")), 1.0)
        name, *tags = head.split(",")
        labels = tuple(sorted((k, v) for k, _, v in (t.partition("=") for t in tags)))
        if not sep or not name or kind not in (GAUGE, COUNTER, TIMER, "h") or any(not _LABEL_NAME.match(k) for k, _ in labels):
            raise ValueError(line)
        value = float(raw)
    except (ValueError, IndexError, TypeError):
        log.debug("not a StatsD line: %r", line)
        return None
    if value != value or value in (float("inf"), float("-inf")) or rate <= 0:
        return None
    kind = TIMER if kind == "h" else kind
    return Line(
        name=_NAME_UNSAFE.sub("_", name),
        labels=labels,
        value=value / rate if kind == COUNTER else value,
        type=kind,
        delta=kind == GAUGE and raw[:1] in "+-",
    )


class Samples:
    """What was received, by metric and label set, for the collector; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gauges: dict[tuple[str, tuple], float] = {}
        self._counters: dict[tuple[str, tuple], float] = {}
        self._timers: dict[tuple[str, tuple], tuple[int, float]] = {}

    def add(self, line: Line) -> None:
        key = (line.name, line.labels)
        with self._lock:
            if line.type == GAUGE:
                self._gauges[key] = (self._gauges.get(key, 0.0) if line.delta else 0.0) + line.value
            elif line.type == COUNTER:
                self._counters[key] = self._counters.get(key, 0.0) + line.value
            else:
                count, total = self._timers.get(key, (0, 0.0))
                self._timers[key] = (count + 1, total + line.value / 1000.0)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

        with self._lock:
            gauges, counters, timers = dict(self._gauges), dict(self._counters), dict(self._timers)
        for name, group in _by_name(gauges):
            family = GaugeMetricFamily(name, f"StatsD gauge {name}", labels=_label_names(group))
            for labels, value in group:
                family.add_metric([v for _, v in labels], value)
            yield family
        for name, group in _by_name(counters):
            family = CounterMetricFamily(name, f"StatsD counter {name}", labels=_label_names(group))
            for labels, value in group:
                family.add_metric([v for _, v in labels], value)
            yield family
        for name, group in _by_name(timers):
            family = SummaryMetricFamily(name, f"StatsD timer {name} (seconds)", labels=_label_names(group))
            for labels, (count, total) in group:
                family.add_metric([v for _, v in labels], count_value=count, sum_value=total)
            yield family


def _by_name(values: dict[tuple[str, tuple], Any]) -> Iterator[tuple[str, list[tuple[tuple, Any]]]]:
    """Each name with its label sets; a name seen with several sets of label names keeps the first."""
    names: dict[str, list[tuple[tuple, Any]]] = {}
    for (name, labels), value in sorted(values.items()):
        group = names.setdefault(name, [])
        if not group or [k for k, _ in group[0][0]] == [k for k, _ in labels]:
            group.append((labels, value))
    yield from names.items()


def _label_names(group: list[tuple[tuple, Any]]) -> list[str]:
    return [k for k, _ in group[0][0]]


def receive(sock: socket.socket, samples: Samples) -> None:
    """Read StatsD packets (one or more lines each) until the socket is closed."""
    while True:
        try:
            data = sock.recv(65535)
        except OSError:
            return
        for raw in data.decode("utf-8", errors="replace").splitlines():
            line = parse_line(raw.strip())
            if line is not None:
                samples.add(line)


def with_basic_auth(app: Callable, user: str, password: str) -> Callable:
    """The WSGI app behind HTTP basic auth (401 without the right user and password)."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def guarded(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        if hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), expected.encode()):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="ds2"'), ("Content-Type", "text/plain")])
        return [b"authentication required\n"]

    return guarded


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def serve(statsd_port: int, http_port: int, user: str, password: str) -> None:
    from prometheus_client import CollectorRegistry, make_wsgi_app

    samples = Samples()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(samples)  # type: ignore[arg-type]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", statsd_port))
    threading.Thread(target=receive, args=(sock, samples), daemon=True, name="statsd").start()
    app = with_basic_auth(make_wsgi_app(registry), user, password)
    with make_server("127.0.0.1", http_port, app, handler_class=_QuietHandler) as server:
        log.info("StatsD on udp 127.0.0.1:%d, metrics on http://127.0.0.1:%d/metrics", statsd_port, http_port)
        server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statsd-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--user", default="ds2")
    parser.add_argument("--password-file", type=Path, required=True, help="the scrape password (one line)")
    args = parser.parse_args(argv)
    try:
        password = args.password_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        parser.error(f"--password-file {args.password_file}: {exc.strerror}")
    if not password:
        parser.error(f"--password-file {args.password_file} is empty")
    logging.basicConfig(level=logging.INFO, format="statsd_bridge: %(message)s")
    serve(args.statsd_port, args.http_port, args.user, password)


if __name__ == "__main__":
    main()
