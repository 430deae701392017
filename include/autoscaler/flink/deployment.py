"""How a Flink job is (re)deployed: its jar, its arguments and how parallelism reaches it.

Flink 2.3 silently ignores ``pipeline.jobvertex-parallelism-overrides`` (FLINK-38770; measured here
through the jar-run configuration and through SQL ``SET``, on both schedulers). So per-operator
parallelism reaches a job restarted from a savepoint in one of two ways:

- with no ``parallelism_args`` (any job as it is, e.g. a SQL job): the job restarts unchanged and
  the adaptive scheduler then takes each vertex to its parallelism (per-vertex resource
  requirements, :mod:`autoscaler.rescale.restart`);
- with ``parallelism_args``: the job's own program arguments set each operator's parallelism (a
  job written for it, such as the test job; works on either scheduler).

Pure Python: no Airflow import.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autoscaler.errors import InputError
from autoscaler.flink import ids
from autoscaler.flink.client import FlinkRestClient


@dataclass(frozen=True)
class JobDeployment:
    """Everything needed to submit (or resubmit from a savepoint) one streaming job.

    - ``job_name``: the Flink job name; every restart gets a new job id, so the running job
      is always found by this name. ``base_args`` must make the job carry it.
    - ``jar_path``: the local jar, pinned by its SHA-256 (see :func:`resolve_jar`); or ``jar_id``:
      a jar already uploaded (``<uuid>_<name>.jar``), pinned by that id.
    - ``base_args``: program arguments that do not depend on parallelism. Options that must be
      the same on every restart belong here (for the test job: ``--schedule-start-ms``, so the
      rate schedule continues instead of starting over).
    - ``parallelism_args``: operator NAME (as Flink shows it, e.g. ``"Count"``) -> program
      argument flag (``"--count-parallelism"``). Empty (the default): the job takes no such flags
      and the adaptive scheduler sets each vertex's parallelism after the restart.
    - ``savepoint_dir``: where stop-with-savepoint writes (``file://``/``s3://`` URI, or an
      absolute local path); ``savepoint_format``: canonical or native (option ``savepoint_format``).
    """

    job_name: str
    savepoint_dir: str
    parallelism_args: Mapping[str, str] = field(default_factory=dict)
    base_args: Sequence[str] = field(default=())
    jar_path: str | Path | None = None
    jar_id: str | None = None
    entry_class: str | None = None
    allow_non_restored_state: bool = False
    savepoint_format: str = "canonical"

    def __post_init__(self) -> None:
        src = "job deployment"
        if self.savepoint_format not in ("canonical", "native"):
            raise InputError(src, f"savepoint_format must be canonical or native, got {self.savepoint_format!r}")
        if not isinstance(self.job_name, str) or not self.job_name.strip():
            raise InputError(src, "job_name must be a non-empty string (the Flink job name)")
        if (self.jar_path is None) == (self.jar_id is None):
            raise InputError(src, "give exactly one of jar_path (a local jar) or jar_id (an uploaded jar)")
        if self.jar_id is not None:
            ids.jar_id(self.jar_id)
        if self.jar_path is not None:
            object.__setattr__(self, "jar_path", Path(self.jar_path))
        if isinstance(self.base_args, str) or not all(isinstance(a, str) for a in self.base_args):
            raise InputError(src, "base_args must be a list of strings (one program argument each)")
        object.__setattr__(self, "base_args", tuple(self.base_args))
        if not isinstance(self.parallelism_args, Mapping):
            raise InputError(src, "parallelism_args must map operator names to program-argument flags (or be empty)")
        flags: dict[str, str] = {}
        for name, flag in self.parallelism_args.items():
            if not isinstance(name, str) or not name.strip():
                raise InputError(src, f"parallelism_args: operator name {name!r} must be a non-empty string")
            if not isinstance(flag, str) or not flag.startswith("--") or len(flag) < 3 or any(c.isspace() for c in flag):
                raise InputError(src, f"parallelism_args[{name!r}]: flag {flag!r} must look like '--name' (no spaces)")
            if flag in flags:
                raise InputError(src, f"parallelism_args: flag {flag} is used for both {flags[flag]!r} and {name!r}")
            flags[flag] = name
        object.__setattr__(self, "parallelism_args", dict(self.parallelism_args))
        for arg in self.base_args:
            if arg.split("=", 1)[0] in flags:
                raise InputError(src, f"base_args sets {arg.split('=', 1)[0]}, which parallelism_args controls: remove it")
        if not isinstance(self.savepoint_dir, str) or not self.savepoint_dir.strip():
            raise InputError(src, "savepoint_dir must be a URI (file://, s3://, ...) or an absolute path")
        if "://" not in self.savepoint_dir and not self.savepoint_dir.startswith("/"):
            raise InputError(src, f"savepoint_dir {self.savepoint_dir!r} must be a URI or an absolute path")
        if not isinstance(self.allow_non_restored_state, bool):
            raise InputError(src, "allow_non_restored_state must be true or false")

    @property
    def savepoint_uri(self) -> str:
        """``savepoint_dir`` as a URI Flink accepts (an absolute path becomes ``file://...``)."""
        return self.savepoint_dir if "://" in self.savepoint_dir else f"file://{self.savepoint_dir}"


def program_args(deployment: JobDeployment, parallelism: Mapping[str, int]) -> list[str]:
    """The full argument list of a (re)start: ``base_args`` + ``flag value`` per operator given.

    Operators are rendered in the order of ``parallelism_args`` so the same target always gives
    the same command line (it is journaled and compared).
    """
    unknown = [name for name in parallelism if name not in deployment.parallelism_args]
    if unknown:
        raise InputError(
            "target parallelism",
            f"no program argument is known for operator(s) {unknown}: parallelism_args maps only "
            f"{sorted(deployment.parallelism_args)}",
        )
    args = list(deployment.base_args)
    for name, flag in deployment.parallelism_args.items():
        if name in parallelism:
            args += [flag, str(check_parallelism(name, parallelism[name]))]
    return args


def check_parallelism(name: str, value: object) -> int:
    """A parallelism must be an int >= 1 (not a bool, not a float that happens to be whole)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError("target parallelism", f"operator {name!r}: parallelism must be an integer >= 1, got {value!r}")
    return value


def uploads_record(jar_path: Path) -> Path:
    """Where the jar ids this project uploaded for ``jar_path`` are recorded, with the content hash."""
    return jar_path.with_name(f".{jar_path.name}.uploads.json")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_record(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) else {}


def resolve_jar(client: FlinkRestClient, deployment: JobDeployment) -> str:
    """The uploaded jar id to run, pinned by content: ``jar_id``, or an upload of ``jar_path`` itself.

    Jars on the cluster are only known by file name, and anyone who can reach the REST API can
    upload one: reusing "the newest jar of that name" would run a planted jar. So an upload of
    ``jar_path`` is reused only when this project made it (its id is in the jar's uploads record,
    ``.<jar>.uploads.json`` beside it) from a file with the same SHA-256 as the jar now; otherwise
    the jar is uploaded again. Looked up on every (re)start because uploads vanish when the
    cluster's upload folder is wiped; reusing keeps a rescale's downtime free of the upload.
    """
    if deployment.jar_id is not None:
        return deployment.jar_id
    return pinned_upload(client, Path(deployment.jar_path))  # type: ignore[arg-type]  # exactly one is set


def pinned_upload(client: FlinkRestClient, path: Path) -> str:
    """The id of this project's upload of the jar at ``path`` with its content now (see :func:`resolve_jar`)."""
    if not path.is_file():
        raise InputError(str(path), "the job's jar does not exist")
    digest, record_path = _sha256(path), uploads_record(path)
    record = _read_record(record_path)
    ours = [j for j in client.jars() if record.get(str(j.get("id"))) == digest]
    if ours:
        return ids.jar_id(max(ours, key=lambda j: j.get("uploaded", 0))["id"])
    jar_id = client.upload_jar(path)
    alive = {str(j.get("id")) for j in client.jars()}
    record = {k: v for k, v in record.items() if k in alive} | {jar_id: digest}
    try:
        tmp = record_path.with_name(f"{record_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(record_path)
    except OSError:
        pass  # a read-only jar folder: the next (re)start uploads again, which is safe, only slower
    return jar_id
