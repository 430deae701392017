"""How a block of the store is committed: durably, and in one atomic step readers cannot split.

A writer builds the new version of a block in a hidden staging folder next to it, fsyncs its
files and the folder, then **exchanges** the two folders with one ``renameat2(RENAME_EXCHANGE)``
(Linux >= 3.15): a reader lists and opens either the old version or the new one, never neither
and never a mix -- also a reader that lists files itself, like Spark. The old version, now in the
staging folder, is deleted afterwards; a crash before that leaves only a hidden folder that the
next write removes. Where the filesystem cannot exchange, two renames are used instead, and a
crash between them is repaired by the next writer or reader (:func:`recover`).

``DS2_STORE_FAILPOINT=<step>`` makes the process kill itself (SIGKILL) at that step, and
``DS2_STORE_NO_EXCHANGE=1`` forces the two-rename fallback: the tests prove with them that no
committed row is lost at any point of a commit.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import shutil
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

RENAME_EXCHANGE = 2  # linux/fs.h
AT_FDCWD = -100
STEPS = ("staged", "synced", "exchanged", "trashed")  # the failpoints of a commit ("trashed": the fallback)
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def failpoint(step: str) -> None:
    if os.environ.get("DS2_STORE_FAILPOINT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


def fsync_path(path: Path) -> None:
    """fsync a file or a folder (a folder's entry list: renames and new files in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False when the system or filesystem cannot."""
    if _renameat2 is None or os.environ.get("DS2_STORE_NO_EXCHANGE") == "1":  # the latter: to test the fallback
        return False
    if _renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def staging_for(final: Path) -> Path:
    return final.with_name(f".staging-{final.name}-{uuid.uuid4().hex}")


def _trash_for(final: Path) -> Path:
    return final.with_name(f".trash-{final.name}-{uuid.uuid4().hex}")


def swap_in(staged: Path, final: Path) -> None:
    """Make ``staged`` (a complete folder) the committed version of ``final``, durably and atomically."""
    failpoint("staged")
    for f in staged.iterdir():
        if f.is_file():
            fsync_path(f)
    fsync_path(staged)
    final.parent.mkdir(parents=True, exist_ok=True)
    failpoint("synced")
    if not final.exists():
        os.rename(staged, final)
    elif _exchange(staged, final):
        failpoint("exchanged")
        # The old version now sits in the staging folder. It is deleted at the block's next commit
        # (clean_leftovers), not now: a reader that opened the folder just before the exchange
        # still lists it meanwhile.
    else:  # two renames; recover() restores the old version after a crash between them
        trash = _trash_for(final)
        os.rename(final, trash)
        failpoint("trashed")
        os.rename(staged, final)
        fsync_path(final.parent)
        shutil.rmtree(trash, ignore_errors=True)
    fsync_path(final.parent)


def recover(final: Path) -> None:
    """Undo a crash of the two-rename fallback (or of older versions of this code): when ``final``
    is missing and a ``.trash-`` copy of it exists, that copy is the last committed version."""
    if final.exists():
        return
    trashed = sorted(final.parent.glob(f".trash-{final.name}-*"), key=lambda p: p.stat().st_mtime)
    if trashed:
        os.rename(trashed[-1], final)
        fsync_path(final.parent)
        log.warning("store: restored %s from %s (a commit had been interrupted)", final, trashed[-1].name)


def clean_leftovers(final: Path) -> None:
    """Remove what interrupted commits left beside ``final`` (caller holds the store lock)."""
    for stray in final.parent.glob(f".staging-{final.name}-*"):
        shutil.rmtree(stray, ignore_errors=True)
    if final.exists():
        for stray in final.parent.glob(f".trash-{final.name}-*"):
            shutil.rmtree(stray, ignore_errors=True)


def set_aside(block: Path, why: str) -> Path:
    """Move an unreadable block out of the store (into ``.torn/`` beside it) so reads and writes go on."""
    target = block.parent / ".torn" / f"{block.name}-{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(block, target)
    fsync_path(block.parent)
    log.warning("store: %s cannot be read (%s); set aside as %s", block, why, target)
    return target
