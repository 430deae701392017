"""The store's files beside its tables (boundary snapshots, topologies): in its folder, or objects beside its
Delta tables when the store is a URL (:mod:`autoscaler.store.delta`), so that a task on another host finds them.

An object is written with one PUT, which the object store makes visible whole or not at all; a local file
is written to a temporary name and renamed. Objects are reached with fsspec (``s3fs``, through
``universal_pathlib``, the path API Airflow's ``ObjectStoragePath`` is built on), with the credentials of
the environment, as the tables are.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from autoscaler.errors import room_needed
from autoscaler.store.delta import check_store_url, is_store_url

StorePath = Any  # a pathlib.Path, or a upath.UPath for an object (same methods: read_text, write_text, exists, ...)


def store_path(root: str | PurePath, *parts: str) -> StorePath:
    """``root/parts``: a local path, or the object's path when ``root`` is the store's URL."""
    if is_store_url(root):
        from upath import UPath  # on use: the local store, the default, needs no fsspec

        return UPath(check_store_url(str(root))).joinpath(*parts)
    return Path(root).joinpath(*parts)


def as_store_path(path: str | PurePath | StorePath) -> StorePath:
    """A path given as text (an argument, a config value): an object's URL, or a local path; a path as it is."""
    if not isinstance(path, str):
        return path
    if is_store_url(path):
        from upath import UPath

        return UPath(path)
    return Path(path)


def write_text_atomic(path: StorePath, text: str) -> None:
    """Write ``text`` whole: a crash leaves the previous content, never half of it."""
    if not isinstance(path, Path):
        path.write_text(text, encoding="utf-8")  # one PUT
        return
    tmp = path.with_name(f".{path.name}.tmp")
    with room_needed(str(path.parent), path.name):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)  # a partial file holds the space it took


def modified_at(path: StorePath) -> float:
    """When the file or object was last written (seconds since the epoch)."""
    if isinstance(path, Path):
        return path.stat().st_mtime
    info = path.fs.info(path.path)
    stamp = info.get("LastModified") or info.get("mtime")
    return stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)
