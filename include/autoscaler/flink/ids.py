"""Validation of values that go into Flink REST URLs (job, vertex, trigger and jar ids)."""

from __future__ import annotations

import re

from autoscaler.errors import InputError

_HEX32 = re.compile(r"[0-9a-f]{32}")  # used with fullmatch: no trailing newline
_JAR_ID = re.compile(r"[0-9A-Za-z-]+_[0-9A-Za-z._-]+\.jar")
_TASKMANAGER_ID = re.compile(r"[0-9A-Za-z_.:-]{1,128}")  # a resource id: ours (tm-3) or Flink's (127.0.0.1:40123-1a2b3c)


def job_id(value: str) -> str:
    if not isinstance(value, str) or not _HEX32.fullmatch(value):
        raise InputError("Flink job id", f"{value!r} is not a Flink job id (32 lowercase hex digits)")
    return value


def vertex_id(value: str) -> str:
    if not isinstance(value, str) or not _HEX32.fullmatch(value):
        raise InputError("Flink vertex id", f"{value!r} is not a Flink vertex id (32 lowercase hex digits)")
    return value


def trigger_id(value: str) -> str:
    if not isinstance(value, str) or not _HEX32.fullmatch(value):
        raise InputError("Flink trigger id", f"{value!r} is not a Flink trigger/request id (32 lowercase hex digits)")
    return value


def jar_id(value: str) -> str:
    if not isinstance(value, str) or not _JAR_ID.fullmatch(value) or ".." in value:
        raise InputError("Flink jar id", f"{value!r} is not a jar id returned by /jars/upload (<uuid>_<name>.jar)")
    return value


def taskmanager_id(value: str) -> str:
    if not isinstance(value, str) or not _TASKMANAGER_ID.fullmatch(value) or ".." in value:
        raise InputError("Flink TaskManager id", f"{value!r} is not a TaskManager resource id (1-128 of [A-Za-z0-9_.:-])")
    return value


def subtask_index(value: int) -> int:
    if not isinstance(value, int) or value < 0:
        raise InputError("Flink subtask index", f"{value!r} is not a subtask index (integer >= 0)")
    return value
