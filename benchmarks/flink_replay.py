"""A Flink REST replay: the endpoints the autoscaler reads, serving counters recorded from the real
test job, for as many jobs as a fleet benchmark needs (more than this machine's Flink can hold).

    .venv/bin/python benchmarks/flink_replay.py record --flink http://127.0.0.1:18081 --job ds2-testjob \\
        [--seconds 10] [--out benchmarks/flink-replay.json]
    .venv/bin/python benchmarks/flink_replay.py serve --jobs 1000 [--prefix ds2-fleet] [--port 18091]

``record`` reads a running job twice, ``--seconds`` apart: ``/overview``, its ``/jobs/overview``
entry, ``/jobs/<id>``, every ``/jobs/<id>/vertices/<vid>`` and the sources' subtask metrics (names and
values). ``serve`` answers the same paths for jobs ``<prefix>-0`` .. ``<prefix>-<N-1>``, each with
its own job id; every counter that moved between the two readings advances at the recorded rate
from the server's start, so each job looks like the recorded one running since then. Everything
else is the recorded payload. It is for the fleet benchmark only: correctness stays proven on real
Flink. Writes (rescale, savepoint) answer 405: a replayed fleet has nothing to rescale.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

HERE = Path(__file__).resolve().parent
RECORDING = HERE / "flink-replay.json"
_JOB = re.compile(r"/jobs/([0-9a-f]{32})")
_JOB_METRICS = re.compile(r"/jobs/([0-9a-f]{32})/metrics")
_VERTEX = re.compile(r"/jobs/([0-9a-f]{32})/vertices/([0-9a-f]{32})")
_METRICS = re.compile(r"/jobs/([0-9a-f]{32})/vertices/([0-9a-f]{32})/subtasks/([0-9]{1,4})/metrics")


def record(flink: str, job_name: str, seconds: float) -> dict[str, Any]:
    """Two readings of a running job, ``seconds`` apart, with the time of each."""
    session = requests.Session()

    def get(path: str, **params: Any) -> Any:
        r = session.get(f"{flink}{path}", params=params, timeout=10)
        r.raise_for_status()
        return r.json()

    entry = next(j for j in get("/jobs/overview")["jobs"] if j["name"] == job_name and j["state"] == "RUNNING")
    jid = entry["jid"]
    job = get(f"/jobs/{jid}")
    sources = {v["id"] for v in job["vertices"]} - {i["id"] for n in job["plan"]["nodes"] for i in n.get("inputs", [])}
    names = {vid: [m["id"] for m in get(f"/jobs/{jid}/vertices/{vid}/subtasks/0/metrics")] for vid in sources}

    def reading() -> dict[str, Any]:
        at = time.time()
        vertices = {v["id"]: get(f"/jobs/{jid}/vertices/{v['id']}") for v in job["vertices"]}
        metrics = {
            f"{vid}/{sub['subtask']}": get(f"/jobs/{jid}/vertices/{vid}/subtasks/{sub['subtask']}/metrics", get=wanted)
            for vid, wanted in ((vid, ",".join(names[vid])) for vid in sources)
            for sub in vertices[vid]["subtasks"]
        }  # fmt: skip
        return {"at": at, "vertices": vertices, "metrics": metrics}

    first = reading()
    time.sleep(seconds)
    second = reading()
    return {"overview": get("/overview"), "entry": entry, "job": job, "metric_names": names, "readings": [first, second]}


def _advance(a: Any, b: Any, elapsed: float, span: float) -> Any:
    """``b`` with every number that moved since ``a`` moved on at the same rate for ``elapsed`` s more."""
    if isinstance(b, dict) and isinstance(a, dict):
        return {k: _advance(a.get(k), v, elapsed, span) for k, v in b.items()}
    if isinstance(b, list) and isinstance(a, list) and len(a) == len(b):
        return [_advance(x, y, elapsed, span) for x, y in zip(a, b, strict=True)]
    if isinstance(b, (int, float)) and not isinstance(b, bool) and isinstance(a, (int, float)) and a != b and b > a:
        value = b + (b - a) / span * elapsed
        return int(value) if isinstance(b, int) else value
    return b


class Replay:
    """The recorded job, served as ``jobs`` jobs that all started when the server did."""

    def __init__(self, recording: dict[str, Any], jobs: int, prefix: str) -> None:
        self.rec = recording
        self.started = time.time()
        first, second = recording["readings"]
        self.span = second["at"] - first["at"]
        _time_shares(first, second, self.span)
        self.names = {self.job_id(k): f"{prefix}-{k}" for k in range(jobs)}
        self.start_ms = int(self.started * 1000)

    @staticmethod
    def job_id(k: int) -> str:
        return hashlib.md5(f"replay-{k}".encode(), usedforsecurity=False).hexdigest()

    def elapsed(self) -> float:
        """Seconds since the second reading, as each replayed job lives them (it starts at the first)."""
        return time.time() - self.started - self.span

    def overview(self) -> dict[str, Any]:
        out = dict(self.rec["overview"])
        per_job = int(self.rec["overview"].get("slots-total", 8)) or 8
        out.update({"slots-total": per_job * len(self.names), "slots-available": per_job * len(self.names) // 2,
                    "jobs-running": len(self.names)})  # fmt: skip
        return out

    def jobs_overview(self) -> dict[str, Any]:
        jobs = []
        for jid, name in self.names.items():
            entry = dict(self.rec["entry"], jid=jid, name=name)
            entry["start-time"] = self.start_ms
            jobs.append(entry)
        return {"jobs": jobs}

    def job(self, jid: str) -> dict[str, Any]:
        out = copy.deepcopy(self.rec["job"])
        out.update({"jid": jid, "name": self.names[jid], "start-time": self.start_ms})
        return out

    def vertex(self, vid: str) -> dict[str, Any]:
        first, second = (r["vertices"][vid] for r in self.rec["readings"])
        return _advance(first, second, self.elapsed(), self.span)

    def metrics(self, vid: str, subtask: str, wanted: list[str] | None) -> list[dict[str, Any]]:
        if wanted is None:
            return [{"id": n} for n in self.rec["metric_names"].get(vid, [])]
        values = {m["id"]: m for m in self.rec["readings"][1]["metrics"].get(f"{vid}/{subtask}", [])}
        return [values[n] for n in wanted if n in values]


TIMES = ("accumulated-busy-time", "accumulated-idle-time", "accumulated-backpressured-time")


def _time_shares(first: dict[str, Any], second: dict[str, Any], span: float) -> None:
    """Make each subtask's busy, idle and back-pressured time add up to the wall time between the readings.

    Flink refreshes these gauges on its own cadence, so two readings 10 s apart can differ by 5 or 20 s
    of accounted time; advanced at that rate, every replayed window would fail validation. The shares
    between the three are kept: they are what the recording says about the job.
    """
    for vid, vertex in second["vertices"].items():
        before = {s["subtask"]: s.get("metrics", {}) for s in first["vertices"][vid]["subtasks"]}
        for sub in vertex["subtasks"]:
            now, was = sub.get("metrics", {}), before.get(sub["subtask"], {})
            moved = {t: float(now.get(t, 0)) - float(was.get(t, 0)) for t in TIMES}
            total = sum(moved.values())
            if total <= 0:
                continue
            for t in TIMES:
                now[t] = float(was.get(t, 0)) + moved[t] * span * 1000.0 / total


def handler(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the collectors reuse their connections
        # Headers and body go out in two writes: without TCP_NODELAY the body waits for the client's
        # delayed ACK (40 ms per request), a latency real Flink (Netty) does not have.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # quiet: thousands of requests per interval
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # the http.server interface names it
            url = urlsplit(self.path)
            path, query = url.path.rstrip("/"), parse_qs(url.query)
            if path == "/overview":
                return self._send(200, replay.overview())
            if path == "/jobs/overview":
                return self._send(200, replay.jobs_overview())
            if (m := _METRICS.fullmatch(path)) and m[1] in replay.names:
                wanted = query["get"][0].split(",") if "get" in query else None
                return self._send(200, replay.metrics(m[2], m[3], wanted))
            if (m := _JOB_METRICS.fullmatch(path)) and m[1] in replay.names:
                return self._send(200, [{"id": "numRestarts", "value": "0"}])  # a replayed job never fails over
            if (m := _VERTEX.fullmatch(path)) and m[1] in replay.names and m[2] in replay.rec["readings"][1]["vertices"]:
                return self._send(200, replay.vertex(m[2]))
            if (m := _JOB.fullmatch(path)) and m[1] in replay.names:
                return self._send(200, replay.job(m[1]))
            return self._send(404, {"errors": [f"not replayed: {path}"]})

        def do_POST(self) -> None:
            self._send(405, {"errors": ["a replayed fleet is read-only"]})

        do_PATCH = do_PUT = do_DELETE = do_POST

    return Handler


class _Server(ThreadingHTTPServer):
    # A fleet's collectors and the triggerer's boundary threads connect at once: the default backlog of 5
    # refused connections at 1,000 jobs.
    request_queue_size = 1024


def serve(jobs: int, prefix: str, port: int, recording: Path = RECORDING) -> ThreadingHTTPServer:
    """Start serving on 127.0.0.1:``port`` (0: any free port) in this process; the caller runs ``serve_forever``."""
    replay = Replay(json.loads(recording.read_text()), jobs, prefix)
    server = _Server(("127.0.0.1", port), handler(replay))
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--flink", required=True)
    rec.add_argument("--job", default="ds2-testjob")
    rec.add_argument("--seconds", type=float, default=10.0)
    rec.add_argument("--out", default=str(RECORDING))
    srv = sub.add_parser("serve")
    srv.add_argument("--jobs", type=int, required=True)
    srv.add_argument("--prefix", default="ds2-fleet")
    srv.add_argument("--port", type=int, default=18091)
    args = parser.parse_args()
    if args.command == "record":
        Path(args.out).write_text(json.dumps(record(args.flink.rstrip("/"), args.job, args.seconds), indent=1) + "\n")
        print(f"recorded {args.job} into {args.out}")
        return
    server = serve(args.jobs, args.prefix, args.port)
    print(f"replaying {args.jobs} jobs ({args.prefix}-0..) on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
