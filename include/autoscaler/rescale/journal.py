"""The journal of one rescale action: every step is written (atomically, fsynced) before and after
its side effect, so a retry with the same action id resumes where a crashed attempt stopped.

The journals lie in a local folder, guarded by ``flock``; or, when the store is on an object store, beside
it, where a retry on another host finds them, guarded by a lease every host sees (:mod:`.lease`).

Also the clock marks it keeps: a monotonic time that a later attempt (another process, the same
boot) can still measure from.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoscaler.errors import InputError, room_needed
from autoscaler.flink import ids
from autoscaler.rescale.lease import held
from autoscaler.store.files import StorePath, as_store_path

JOURNAL_VERSION = 1
# An action id names a file: these characters only, at most 200 (full-string match).
ACTION_ID_CHARS = "A-Za-z0-9_.:+=@-"
ACTION_ID_MAX = 200
ACTION_ID = re.compile(f"[A-Za-z0-9_][{ACTION_ID_CHARS}]{{0,{ACTION_ID_MAX - 1}}}")
_KEPT = re.compile(f"[{ACTION_ID_CHARS.replace('=', '')}]")  # all but "=", the escape character


def safe_name(text: str) -> str:
    """``text`` as an action id, injectively, so that two run ids never share a journal.

    Characters outside ACTION_ID_CHARS, "=" itself, a leading "." and a "." after a "." become
    ``=XX`` per UTF-8 byte (so ``run~1`` and ``run_1`` stay apart, and ``..`` cannot name a
    parent folder). A name that would not start with a letter, digit or "_" gets the prefix
    ``_=_``, which escaping never produces ("=" is always followed by two hex digits there).
    Longer than ACTION_ID_MAX: cut, with a hash of the whole text for uniqueness.
    """
    out: list[str] = []
    for char in text:
        after_dot = bool(out) and out[-1] == "."
        if _KEPT.fullmatch(char) and not (char == "." and (not out or after_dot)):
            out.append(char)
        else:
            out.extend(f"={byte:02X}" for byte in char.encode("utf-8"))
    name = "".join(out)
    if not name or not (name[0].isascii() and (name[0].isalnum() or name[0] == "_")):
        name = "_=_" + name
    if len(name) > ACTION_ID_MAX:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        name = f"{name[: ACTION_ID_MAX - 17]}={digest}"
    return name


@dataclass
class Journal:
    """The action's journal file; ``data`` is None until the first write."""

    path: StorePath
    data: dict[str, Any] | None = None

    def save(self) -> None:
        """Atomic: write a temp file, fsync, rename over the journal (a crash leaves old or new); on an
        object store, one PUT (the object is replaced whole)."""
        if not isinstance(self.path, Path):
            self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        # A full disk leaves the journal's last step in place: the action's retry resumes from it.
        with room_needed(str(self.path.parent), f"the rescale journal {self.path.name}"):
            try:
                with tmp.open("w", encoding="utf-8") as handle:
                    json.dump(self.data, handle, indent=1, sort_keys=True)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            finally:
                tmp.unlink(missing_ok=True)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def expect(self, mechanism: str, job_name: str, target: Mapping[str, int]) -> None:
        """A retry must ask for the same thing as the attempt it resumes."""
        assert self.data is not None
        recorded = (self.data.get("mechanism"), self.data.get("job_name"), self.data.get("target"))
        if recorded != (mechanism, job_name, dict(target)):
            raise InputError(
                str(self.path),
                f"action {self.data.get('action_id')!r} was journaled as {recorded[0]} of {recorded[1]!r} to "
                f"{recorded[2]}, not {mechanism} of {job_name!r} to {dict(target)}: use a new action id",
            )


@contextmanager
def open_journal(journal_dir: str | Path, action_id: str) -> Iterator[Journal]:
    """Open (and lock) the journal of ``action_id``: two attempts of one action never run at once."""
    if not isinstance(action_id, str) or not ACTION_ID.fullmatch(action_id) or ".." in action_id:
        raise InputError(
            "action id", f"{action_id!r} must be 1-200 characters of letters, digits and _ . : + = @ - (it names a file)"
        )
    directory = as_store_path(journal_dir)
    path = directory / f"{action_id}.json"
    if not isinstance(directory, Path):  # journals on an object store: hosts exclude each other by a lease
        with held(f"rescale-action:{action_id}", f"rescale action {action_id!r}"):
            yield Journal(path, _read(path))
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(directory), f"cannot create the rescale journal folder: {exc.strerror}") from None
    with (directory / f".{action_id}.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError("action id", f"another attempt of action {action_id!r} is still running") from None
        yield Journal(path, _read(path))


def _read(path: StorePath) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(str(path), f"the rescale journal is not valid JSON ({exc}): inspect it by hand") from None
    if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
        raise InputError(str(path), f"not a version-{JOURNAL_VERSION} rescale journal")
    return data


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def time_mark() -> dict[str, Any]:
    """A point in time a later attempt (another process) can still measure from."""
    return {"mono": time.monotonic(), "wall": time.time(), "boot": boot_id()}


def seconds_since(mark: Mapping[str, Any], mono_end: float | None = None) -> float:
    """Seconds from ``mark`` to ``mono_end`` (default now): monotonic on the same boot, else wall clock."""
    end = time.monotonic() if mono_end is None else mono_end
    if mark.get("boot") is not None and mark.get("boot") == boot_id():
        return max(0.0, end - float(mark["mono"]))
    return max(0.0, time.time() - (time.monotonic() - end) - float(mark["wall"]))


def utcnow() -> datetime:
    return datetime.now(UTC)


def pending_savepoint(journal_dir: str | Path, action_id: str) -> tuple[str, str]:
    """(job id, savepoint request id) of an action that stopped at "savepoint requested".

    For a deferrable task: poll ``GET /jobs/:job/savepoints/:request`` until COMPLETED, then
    call :func:`rescale_with_savepoint` again with the same action id.
    """
    path = as_store_path(journal_dir) / f"{action_id}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        stop, savepoint = data.get("stop") or {}, data.get("savepoint") or {}
        if data.get("result") or not stop.get("request_id") or savepoint.get("location") or savepoint.get("failure"):
            raise KeyError("no savepoint pending")
        return ids.job_id(data["old_job_id"]), ids.trigger_id(stop["request_id"])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise InputError(str(path), f"action {action_id!r} has no savepoint pending ({exc})") from None
