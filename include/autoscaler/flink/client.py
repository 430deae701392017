"""A small client for the Flink REST API (the parts the autoscaler needs).

Retries with backoff on connection errors (every method: nothing reached Flink) and on 5xx
for idempotent methods (urllib3's Retry); a 4xx raises :class:`FlinkError` with Flink's own
error text. Every id that goes into a URL is validated first (:mod:`autoscaler.flink.ids`).
Credentials (basic or bearer) and TLS settings come from the caller (an Airflow connection
or the environment), never from code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from autoscaler.flink import ids
from autoscaler.flink.connection import FlinkConnection
from autoscaler.flink.errors import FlinkError, FlinkUnreachable, JobNotRunning
from autoscaler.flink.models import (
    ACTIVE_STATES,
    ENDED_STATES,
    FAILOVER_STATES,
    JobDetails,
    JobSummary,
    OperationStatus,
    SubtaskCounters,
    VertexInfo,
    stable_vertex_names,
)

_IDEMPOTENT = frozenset({"GET", "PUT", "HEAD", "OPTIONS", "DELETE"})  # may be sent again after no answer


class FlinkRestClient:
    def __init__(self, connection: FlinkConnection) -> None:
        self.connection = connection
        self.base_url = connection.base_url.rstrip("/")
        self.urls = [self.base_url, *(u.rstrip("/") for u in connection.standby_urls if u.rstrip("/") != self.base_url)]
        self.session = requests.Session()
        connect_retries = connection.retries if len(self.urls) == 1 else 0  # with standbys: rounds (_bases)
        retry = Retry(
            total=connection.retries,
            connect=connect_retries,
            read=0,
            status=connection.retries,
            backoff_factor=connection.backoff_s,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=_IDEMPOTENT,
            raise_on_status=False,
        )
        adapter = HTTPAdapter(max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.verify = connection.verify
        if connection.client_cert:
            cert = connection.client_cert
            self.session.cert = (cert, connection.client_key) if connection.client_key else cert
        if connection.token:
            self.session.headers["Authorization"] = f"Bearer {connection.token}"
        elif connection.username:
            self.session.auth = (connection.username, connection.password or "")

    # -- plumbing -------------------------------------------------------------------------
    def _bases(self) -> Iterator[str]:
        """The REST addresses to try, in order: the one in use, then the standbys; with standbys, each once per
        round (a dead JobManager must not cost the adapter's retries before the next is asked), rounds apart by
        the backoff."""
        if len(self.urls) == 1:
            yield self.base_url  # the adapter retries
            return
        for attempt in range(self.connection.retries + 1):
            if attempt:
                time.sleep(self.connection.backoff_s * 2 ** (attempt - 1))
            first = self.urls.index(self.base_url)
            yield from self.urls[first:] + self.urls[:first]

    def _request(self, method: str, path: str, timeout_s: float | None = None, **kwargs: Any) -> Any:
        timeout_s = timeout_s or self.connection.timeout_s
        unreachable: FlinkUnreachable | None = None
        for base in self._bases():
            url = f"{base}{path}"
            try:
                # verify per request: a session's CA bundle loses to REQUESTS_CA_BUNDLE in the environment
                # (requests' merge order), so a connection's own CA would be silently ignored.
                response = self.session.request(method, url, timeout=timeout_s, verify=self.connection.verify, **kwargs)
            except requests.ConnectionError as exc:  # a connect timeout too: nothing reached Flink
                unreachable = FlinkUnreachable(f"Flink REST at {base} is unreachable: {_root_cause(exc)}", url=url)
                continue
            except requests.Timeout:  # no answer to a request that reached Flink
                message = f"Flink REST at {base} did not answer {method} {path} in {timeout_s:g} s"
                if method not in _IDEMPOTENT:  # it may have been done: never sent a second time
                    raise FlinkUnreachable(message, url=url) from None
                unreachable = FlinkUnreachable(message, url=url)
                continue
            self.base_url = base  # the JobManager that answered is asked first from now on
            return _answer(method, path, url, response)
        assert unreachable is not None
        if len(self.urls) > 1:
            unreachable.args = (f"{unreachable.args[0]} (and every standby: {', '.join(self.urls)})",)
        raise unreachable

    def get(self, path: str, **params: Any) -> Any:
        return self._request("GET", path, params=params or None)

    # -- cluster and jobs -------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        return self.get("/overview")

    def jobs(self) -> list[JobSummary]:
        """Every job the cluster knows (live state, not cached)."""
        return [
            JobSummary(
                id=j["jid"],
                name=j["name"],
                state=j["state"],
                tasks_running=int(j.get("tasks", {}).get("running", 0)),
                tasks_total=int(j.get("tasks", {}).get("total", 0)),
                start_time_ms=int(j.get("start-time", 0)),
            )
            for j in self.get("/jobs/overview")["jobs"]
        ]

    def find_job(self, name: str, states: Sequence[str] = ("RUNNING",)) -> JobSummary | None:
        """The newest job called ``name`` in one of ``states`` (ids change on every restart)."""
        matches = [j for j in self.jobs() if j.name == name and j.state in states]
        return max(matches, key=lambda j: j.start_time_ms) if matches else None

    def wait_all_running(self, job_id: str, timeout_s: float = 60.0, poll_s: float = 0.2) -> JobSummary:
        """Poll until job ``job_id`` runs all its tasks; FlinkError when it ends or the time is up."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = next((j for j in self.jobs() if j.id == job_id), None)
            if job is not None and job.all_running:
                return job
            if job is not None and job.state in ENDED_STATES:
                raise FlinkError(f"job {job_id} is {job.state}: {self.exceptions(job_id)}")
            if time.monotonic() >= deadline:
                seen = f"{job.state}, {job.tasks_running}/{job.tasks_total} tasks running" if job else "not listed"
                raise FlinkError(f"job {job_id} did not get all tasks RUNNING within {timeout_s:g} s ({seen})")
            time.sleep(poll_s)

    def running_job(self, name: str) -> JobSummary:
        """The RUNNING job called ``name``; :class:`JobNotRunning` when it is alive in another state."""
        job = self.find_job(name) or self.find_job(name, ACTIVE_STATES)
        if job is None:
            seen = sorted({f"{j.name} ({j.state})" for j in self.jobs()})
            raise FlinkError(f"no RUNNING Flink job named {name!r} at {self.base_url} (jobs: {seen or 'none'})")
        if job.state != "RUNNING":
            restarts, cause = self.restarts(job.id), self.exceptions(job.id) if job.state in FAILOVER_STATES else None
            how = "".join([f"; it restarted {restarts} times since it was submitted" if restarts else "",
                           f"; last failure: {cause}" if cause else ""])  # fmt: skip
            raise JobNotRunning(f"Flink job {name!r} ({job.id}) is {job.state}, not RUNNING{how}", job.state, restarts)
        return job

    def restarts(self, job_id: str) -> int | None:
        """Flink's job metric ``numRestarts``: failovers (and in-place rescales) since the job was submitted."""
        try:  # an answer without it (a proxy, a metric filtered out) leaves the counters to tell a restart
            data = self.get(f"/jobs/{ids.job_id(job_id)}/metrics", get="numRestarts") or []
            return int(float({m.get("id"): m.get("value") for m in data if isinstance(m, dict)}["numRestarts"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        except FlinkError as exc:
            if exc.status is None:
                raise  # Flink unreachable: the snapshot fails as any other read would
            return None

    def job(self, job_id: str) -> JobDetails:
        data = self.get(f"/jobs/{ids.job_id(job_id)}")
        names = stable_vertex_names([v["name"] for v in data["vertices"]])
        vertices = tuple(
            VertexInfo(
                id=v["id"],
                name=name,
                parallelism=int(v["parallelism"]),
                max_parallelism=int(v.get("maxParallelism", -1)),
                status=v.get("status", "UNKNOWN"),
            )
            for v, name in zip(data["vertices"], names, strict=True)
        )
        edges = tuple((inp["id"], node["id"]) for node in data.get("plan", {}).get("nodes", []) for inp in node.get("inputs", []))
        return JobDetails(id=data["jid"], name=data["name"], state=data["state"], vertices=vertices, edges=edges)

    def subtask_counters(self, job_id: str, vertex_id: str) -> list[SubtaskCounters]:
        """Cumulative per-subtask counters of one vertex (records and accumulated times)."""
        data = self.get(f"/jobs/{ids.job_id(job_id)}/vertices/{ids.vertex_id(vertex_id)}")
        out = []
        for sub in data["subtasks"]:
            m = sub.get("metrics", {})
            out.append(
                SubtaskCounters(
                    vertex_id=vertex_id,
                    subtask=int(sub["subtask"]),
                    records_in=int(m.get("read-records", 0)),
                    records_out=int(m.get("write-records", 0)),
                    busy_ms=float(m.get("accumulated-busy-time", 0)),
                    idle_ms=float(m.get("accumulated-idle-time", 0)),
                    backpressured_ms=float(m.get("accumulated-backpressured-time", 0)),
                    status=sub.get("status", "UNKNOWN"),
                )
            )
        return out

    def subtask_metrics(self, job_id: str, vertex_id: str, subtask: int, names: Sequence[str]) -> dict[str, float]:
        """Named metrics of one subtask (values come back as strings; parsed here)."""
        path = f"/jobs/{ids.job_id(job_id)}/vertices/{ids.vertex_id(vertex_id)}/subtasks/{ids.subtask_index(subtask)}/metrics"
        data = self.get(path, get=",".join(names))
        out = {}
        for item in data or []:
            try:
                out[item["id"]] = float(item["value"])
            except (TypeError, ValueError):
                continue
        return out

    def subtask_metric_names(self, job_id: str, vertex_id: str, subtask: int) -> list[str]:
        """The ids of every metric one subtask reports (e.g. ``Source__Source.pendingRecords``)."""
        path = f"/jobs/{ids.job_id(job_id)}/vertices/{ids.vertex_id(vertex_id)}/subtasks/{ids.subtask_index(subtask)}/metrics"
        return [str(item["id"]) for item in self.get(path) or [] if isinstance(item, dict) and "id" in item]

    def vertex_metric_names(self, job_id: str, vertex_id: str) -> list[str]:
        """The ids of every metric any subtask of a vertex reports (the subtasks' aggregated metrics), in one call."""
        path = f"/jobs/{ids.job_id(job_id)}/vertices/{ids.vertex_id(vertex_id)}/subtasks/metrics"
        return [str(item["id"]) for item in self.get(path) or [] if isinstance(item, dict) and "id" in item]

    def exceptions(self, job_id: str) -> str | None:
        data = self.get(f"/jobs/{ids.job_id(job_id)}/exceptions")
        root = (data or {}).get("root-exception")
        if root:
            return root.strip().splitlines()[0]
        history = (data or {}).get("exceptionHistory", {}).get("entries", [])
        if not history:
            return None
        newest = history[0]  # its stack trace's first line holds the message; the name alone does not
        first = (newest.get("stacktrace") or "").strip().splitlines()
        where = f" (in {newest['taskName']})" if newest.get("taskName") else ""
        return (first[0] if first else newest.get("exceptionName") or "unknown") + where

    # -- savepoints, checkpoints ------------------------------------------------------------
    def stop_with_savepoint(
        self, job_id: str, target_directory: str | None, drain: bool = False, format_type: str = "canonical"
    ) -> str:
        body: dict[str, Any] = {"drain": drain, "formatType": format_type.upper()}
        if target_directory:
            body["targetDirectory"] = target_directory
        return ids.trigger_id(self._request("POST", f"/jobs/{ids.job_id(job_id)}/stop", json=body)["request-id"])

    def savepoint_status(self, job_id: str, request_id: str) -> OperationStatus:
        data = self.get(f"/jobs/{ids.job_id(job_id)}/savepoints/{ids.trigger_id(request_id)}")
        return _operation(data)

    def trigger_savepoint(self, job_id: str, target_directory: str, format_type: str = "canonical") -> str:
        """A savepoint of a job that keeps running (``savepoint_status`` follows it)."""
        body = {"target-directory": target_directory, "cancel-job": False, "formatType": format_type.upper()}
        return ids.trigger_id(self._request("POST", f"/jobs/{ids.job_id(job_id)}/savepoints", json=body)["request-id"])

    def dispose_savepoint(self, path: str) -> OperationStatus:
        """Delete a savepoint through the cluster (its files may sit where only the cluster reaches) and wait."""
        trigger = ids.trigger_id(self._request("POST", "/savepoint-disposal", json={"savepoint-path": path})["request-id"])
        return self.wait_operation(
            lambda: _operation(self.get(f"/savepoint-disposal/{trigger}")), 60.0, what="savepoint disposal"
        )

    def taskmanager_metrics(self, tm_id: str, names: Sequence[str]) -> dict[str, float]:
        data = self.get(f"/taskmanagers/{ids.taskmanager_id(tm_id)}/metrics", get=",".join(names))
        return {m["id"]: float(m["value"]) for m in data if m.get("value") not in (None, "")}

    def trigger_checkpoint(self, job_id: str, checkpoint_type: str = "FULL") -> str:
        data = self._request("POST", f"/jobs/{ids.job_id(job_id)}/checkpoints", json={"checkpointType": checkpoint_type})
        return ids.trigger_id(data["request-id"])

    def checkpoint_status(self, job_id: str, request_id: str) -> OperationStatus:
        return _operation(self.get(f"/jobs/{ids.job_id(job_id)}/checkpoints/{ids.trigger_id(request_id)}"))

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        return self.get(f"/jobs/{ids.job_id(job_id)}/checkpoints")

    def wait_operation(self, poll: Any, deadline_s: float, interval_s: float = 0.2, what: str = "operation") -> OperationStatus:
        """Poll ``poll()`` until COMPLETED or the deadline; a timeout is a :class:`FlinkError`."""
        end = time.monotonic() + deadline_s
        while True:
            status = poll()
            if status.completed:
                return status
            if time.monotonic() >= end:
                raise FlinkError(f"{what} did not complete within {deadline_s} s (last status {status.status})")
            time.sleep(interval_s)

    # -- jars, cancel, the adaptive scheduler's requirements ----------------------------------
    def upload_jar(self, path: str | Path) -> str:
        path = Path(path)
        with path.open("rb") as handle:
            data = self._request("POST", "/jars/upload", files={"jarfile": (path.name, handle, "application/x-java-archive")})
        return ids.jar_id(Path(data["filename"]).name)

    def jars(self) -> list[dict[str, Any]]:
        return self.get("/jars").get("files", [])

    def run_jar(
        self,
        jar_id: str,
        entry_class: str | None,
        program_args: Sequence[str],
        savepoint_path: str | None = None,
        allow_non_restored_state: bool = False,
        parallelism: int | None = None,
        claim_mode: str = "NO_CLAIM",
        flink_configuration: Mapping[str, str] | None = None,
    ) -> str:
        body: dict[str, Any] = {"programArgsList": list(program_args), "allowNonRestoredState": allow_non_restored_state,
                                "entryClass": entry_class or None, "parallelism": parallelism or None,
                                "flinkConfiguration": dict(flink_configuration) if flink_configuration else None}  # fmt: skip
        if savepoint_path:
            body |= {"savepointPath": savepoint_path, "claimMode": claim_mode}
        path, submission = f"/jars/{ids.jar_id(jar_id)}/run", {k: v for k, v in body.items() if v is not None}
        data = self._request("POST", path, timeout_s=self.connection.submit_timeout_s, json=submission)
        return ids.job_id(data["jobid"])

    def planned_vertex_ids(self, jar_id: str, entry_class: str | None, program_args: Sequence[str]) -> set[str]:
        """The vertex ids of the job graph the jar's program builds with these arguments (not run)."""
        body: dict[str, Any] = {"programArgsList": list(program_args)}
        if entry_class:
            body["entryClass"] = entry_class
        data = self._request("POST", f"/jars/{ids.jar_id(jar_id)}/plan", timeout_s=self.connection.submit_timeout_s, json=body)
        return {str(node["id"]) for node in (data.get("plan") or {}).get("nodes", [])}

    def cancel(self, job_id: str) -> None:
        self._request("PATCH", f"/jobs/{ids.job_id(job_id)}", params={"mode": "cancel"})

    def resource_requirements(self, job_id: str) -> dict[str, dict[str, int]]:
        data = self.get(f"/jobs/{ids.job_id(job_id)}/resource-requirements")
        return {vid: dict(req["parallelism"]) for vid, req in data.items()}

    def set_resource_requirements(self, job_id: str, requirements: Mapping[str, tuple[int, int]]) -> None:
        body = {ids.vertex_id(v): {"parallelism": {"lowerBound": lo, "upperBound": hi}} for v, (lo, hi) in requirements.items()}
        self._request("PUT", f"/jobs/{ids.job_id(job_id)}/resource-requirements", json=body)


def _answer(method: str, path: str, url: str, response: requests.Response) -> Any:
    """The JSON body of an answer, or a :class:`FlinkError` with Flink's own words."""
    if response.status_code >= 400:
        raise FlinkError(
            f"Flink REST {method} {path} failed with HTTP {response.status_code}: {_error_text(response)}",
            status=response.status_code,
            url=url,
        )
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise FlinkError(f"Flink REST {method} {path} returned non-JSON: {response.text[:200]!r}", url=url) from None


def _operation(data: dict[str, Any]) -> OperationStatus:
    status = data.get("status", {}).get("id", "UNKNOWN")
    operation = data.get("operation") or {}
    failure = operation.get("failure-cause") or operation.get("failureCause")
    if isinstance(failure, dict):
        failure = failure.get("stack-trace") or failure.get("class") or str(failure)
    if failure:
        failure = str(failure).strip().splitlines()[0]
    return OperationStatus(status=status, location=operation.get("location"), failure=failure)


def _error_text(response: requests.Response) -> str:
    """Flink's own words: the first meaningful line and the root cause, without stack frames."""
    try:
        errors = response.json().get("errors", [])
    except ValueError:
        return response.text[:300]
    lines = []
    for error in errors:
        for line in str(error).splitlines():
            line = line.strip().strip("<>").strip()
            if not line or line.startswith(("at ", "...")) or "xception on server side" in line:
                continue
            lines.append(line)
    if not lines:
        return response.reason or "no error text"
    causes = [x for x in lines if x.startswith("Caused by:")]
    generic = {"Internal server error.", "Internal server error"}
    first = next((x for x in lines if x not in generic), lines[0])
    text = first if not causes or causes[-1] == first else f"{first} (root cause: {causes[-1].removeprefix('Caused by: ')})"
    return text[:500]


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ or exc.__context__:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return str(exc).splitlines()[0][:200]
