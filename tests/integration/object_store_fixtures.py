"""A real S3-compatible object store for the tests (``scripts/s3proxy.sh``): its own instance, stopped by its pid file.

``object_store`` (session): S3Proxy on a free loopback port in a temp data dir, with credentials of its own;
:attr:`ObjectStore.env` is what a client process needs (the ``AWS_*`` variables), :meth:`ObjectStore.store`
a fresh store URL in its bucket.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import free_port

S3PROXY_SH = ROOT / "scripts" / "s3proxy.sh"


@dataclass
class ObjectStore:
    data_dir: Path
    env: dict[str, str]  # the AWS_* client variables (from its client env file)

    def store(self, name: str = "store") -> str:
        """A store URL of its own in the bucket."""
        return f"s3://ds2/{name}-{uuid.uuid4().hex[:8]}"


def read_client_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))


@pytest.fixture(scope="session")
def object_store(tmp_path_factory) -> Iterator[ObjectStore]:
    data_dir = tmp_path_factory.mktemp("s3proxy")
    env = {**os.environ, "S3PROXY_DATA_DIR": str(data_dir), "S3PROXY_PORT": str(free_port())}
    subprocess.run([str(S3PROXY_SH), "up"], check=True, cwd=ROOT, env=env)
    try:
        client = read_client_env(data_dir / "client.env")
        yield ObjectStore(data_dir, {k: v for k, v in client.items() if k.startswith("AWS_")})
    finally:
        subprocess.run([str(S3PROXY_SH), "down"], check=False, cwd=ROOT, env=env)


@pytest.fixture
def object_env(object_store: ObjectStore, monkeypatch) -> ObjectStore:
    """The object store's client variables in this process's environment (where delta-rs reads them)."""
    for key, value in object_store.env.items():
        monkeypatch.setenv(key, value)
    return object_store
