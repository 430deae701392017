"""The REST client's plumbing against a real (tiny) HTTP server: auth, retries, error text."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from autoscaler.errors import InputError
from autoscaler.flink import ids
from autoscaler.flink.client import FlinkConnection, FlinkError, FlinkRestClient, FlinkUnreachable


class Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, str | None]]] = []
    failures_left = 0

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        Recorder.seen.append(("GET", self.path, self.headers.get("Authorization")))
        if self.path == "/overview" and Recorder.failures_left > 0:
            Recorder.failures_left -= 1
            self._reply(503, {"errors": ["busy"]})
        elif self.path == "/overview":
            self._reply(200, {"slots-total": 8})
        else:
            self._reply(404, {"errors": ["Internal server error.", "<Exception on server side:\nJob not found>"]})

    def do_POST(self) -> None:
        Recorder.seen.append(("POST", self.path, self.headers.get("Authorization")))
        self._reply(500, {"errors": ["boom"]})


@pytest.fixture
def server():
    Recorder.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


def test_bearer_token_is_sent_and_not_shown(server):
    conn = FlinkConnection(base_url=server, token="s3cret", backoff_s=0)
    FlinkRestClient(conn).overview()
    assert Recorder.seen[-1][2] == "Bearer s3cret"
    assert "s3cret" not in repr(conn)


def test_basic_auth(server):
    FlinkRestClient(FlinkConnection(base_url=server, username="u", password="p", backoff_s=0)).overview()
    assert Recorder.seen[-1][2].startswith("Basic ")


def test_get_retries_5xx_then_succeeds(server):
    Recorder.failures_left = 2
    assert FlinkRestClient(FlinkConnection(base_url=server, backoff_s=0)).overview() == {"slots-total": 8}
    assert [p for _, p, _ in Recorder.seen].count("/overview") == 3


def test_post_is_not_retried_on_5xx(server):
    client = FlinkRestClient(FlinkConnection(base_url=server, backoff_s=0))
    with pytest.raises(FlinkError, match="HTTP 500: boom"):
        client.stop_with_savepoint("0" * 32, None)
    assert [m for m, _, _ in Recorder.seen] == ["POST"]  # a stop must never be sent twice


def test_4xx_surfaces_flinks_error_text(server):
    client = FlinkRestClient(FlinkConnection(base_url=server, backoff_s=0))
    with pytest.raises(FlinkError) as err:
        client.job("a" * 32)
    assert err.value.status == 404 and "Job not found" in str(err.value)


def test_unreachable_flink_is_named():
    client = FlinkRestClient(FlinkConnection(base_url="http://127.0.0.1:9", retries=1, backoff_s=0))
    with pytest.raises(FlinkUnreachable, match=r"Flink REST at http://127.0.0.1:9 is unreachable"):
        client.overview()


@pytest.mark.parametrize("bad", ["../jobs", "ABC", "a" * 31, "a" * 32 + "/x", None, "g" * 32])
def test_ids_are_validated_before_they_reach_a_url(bad):
    with pytest.raises(InputError, match="not a Flink job id"):
        ids.job_id(bad)
    with pytest.raises(InputError, match="not a Flink vertex id"):
        ids.vertex_id(bad)
    client = FlinkRestClient(FlinkConnection(base_url="http://127.0.0.1:9"))
    with pytest.raises(InputError):
        client.job(bad)  # refused before any request


def test_jar_ids():
    assert ids.jar_id("867eaee7-eaf8-481f-9571-f37da1173d65_ds2-testjob.jar")
    for bad in ("../x.jar", "x.jar", "a_b.zip", "a_../b.jar"):
        with pytest.raises(InputError):
            ids.jar_id(bad)


class SlowSubmit(BaseHTTPRequestHandler):
    """A JobManager whose jar run answers only after ``delay_s`` (main() building the job), like a SQL job's."""

    delay_s = 0.0
    posts: ClassVar[list[int]] = []
    stop = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        SlowSubmit.posts.append(self.server.server_port)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        SlowSubmit.stop.wait(SlowSubmit.delay_s)  # the client has long given up or is still waiting
        data = json.dumps({"jobid": "b" * 32}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def slow_jobmanagers():
    SlowSubmit.posts, SlowSubmit.stop = [], threading.Event()
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), SlowSubmit) for _ in range(2)]
    for httpd in servers:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{httpd.server_port}" for httpd in servers]
    SlowSubmit.stop.set()
    for httpd in servers:
        httpd.shutdown()


JAR = "867eaee7-eaf8-481f-9571-f37da1173d65_ds2-testjob.jar"


def test_a_submission_slower_than_a_rest_call_is_waited_for(slow_jobmanagers):
    SlowSubmit.delay_s = 1.5  # longer than a REST call may take, within the submission's bound
    conn = FlinkConnection(base_url=slow_jobmanagers[0], timeout_s=0.5, submit_timeout_s=30, backoff_s=0)
    assert FlinkRestClient(conn).run_jar(JAR, None, []) == "b" * 32
    assert len(SlowSubmit.posts) == 1


def test_a_submission_without_answer_is_never_sent_again_not_even_to_a_standby(slow_jobmanagers):
    SlowSubmit.delay_s = 30  # no answer in time: the job may still be being submitted
    first, standby = slow_jobmanagers
    conn = FlinkConnection(base_url=first, standby_urls=(standby,), submit_timeout_s=0.5, retries=2, backoff_s=0)
    with pytest.raises(FlinkUnreachable, match=r"did not answer POST /jars/.*/run in 0.5 s"):
        FlinkRestClient(conn).run_jar(JAR, None, [])
    assert len(SlowSubmit.posts) == 1  # two jobs from one submission would be worse than none
