"""The store on a real S3-compatible object store (S3Proxy): the local store's contract, kept by Delta
tables with writers on several "hosts" (processes with separate local folders) and a writer killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from autoscaler.errors import InputError
from autoscaler.record.outcomes import action_row
from autoscaler.store import delta
from autoscaler.store.parquet import epoch_span, read_block, read_epochs, stored_blocks, table_dir, write_epochs
from autoscaler.store.schemas import ACTIONS
from tests.conftest import ROOT
from tests.helpers import poll


def rows(epochs, message: str, job: str = "wc") -> pa.Table:
    made = [action_row(job, e, action_id=f"a{e}", mechanism="in-place", outcome="noop", message=message, parallelism={})
            for e in epochs]  # fmt: skip
    return pa.Table.from_pylist(made, schema=ACTIONS.arrow_schema())


def untimed(table: pa.Table) -> list[dict]:
    """Rows without the times they were made at (each write of the two layouts makes its own)."""
    return table.drop_columns(["started_at", "finished_at"]).to_pylist()


def messages(store, job: str = "wc") -> list[tuple[int, str]]:
    return [(r["epoch"], r["message"]) for r in read_epochs(store, ACTIONS, job, columns=["epoch", "message"]).to_pylist()]


def test_the_object_store_keeps_the_local_stores_contract(object_env, tmp_path):
    """The same writes give the same reads on both layouts: replace by epoch, subsets, spans, blocks."""
    url = object_env.store()
    for store in (tmp_path, url):
        write_epochs(store, ACTIONS, "wc", rows([*range(0, 5), 1030], "v1"))
        write_epochs(store, ACTIONS, "wc", rows([3, 4, 5], "v2"))  # replaces 3 and 4, adds 5
        write_epochs(store, ACTIONS, "wc", rows([3, 4, 5], "v2"))  # the same write again: one copy
        write_epochs(store, ACTIONS, "other", rows([4], "x", "other"))
    local, remote = read_epochs(tmp_path, ACTIONS, "wc"), read_epochs(url, ACTIONS, "wc")
    assert remote.schema == local.schema
    assert untimed(remote) == untimed(local)
    assert messages(url) == [(0, "v1"), (1, "v1"), (2, "v1"), (3, "v2"), (4, "v2"), (5, "v2"), (1030, "v1")]
    assert untimed(read_epochs(url, ACTIONS, "wc", [4, 1030, 7])) == untimed(read_epochs(tmp_path, ACTIONS, "wc", [4, 1030, 7]))
    assert read_epochs(url, ACTIONS, "wc", [], columns=["message"]).num_rows == 0
    assert epoch_span(url, ACTIONS, "wc") == epoch_span(tmp_path, ACTIONS, "wc") == (0, 1030)
    assert stored_blocks(url, ACTIONS, "wc") == stored_blocks(tmp_path, ACTIONS, "wc") == [0, 1]
    assert untimed(read_block(url, ACTIONS, "wc", 1)) == untimed(read_block(tmp_path, ACTIONS, "wc", 1))
    assert messages(url, "other") == [(4, "x")]
    assert read_epochs(object_env.store(), ACTIONS, "wc").num_rows == 0  # a store nobody wrote yet reads empty
    with pytest.raises(InputError, match="not on an object store"):
        table_dir(url, ACTIONS)  # what needs a local folder says so, and creates no folder named 's3:'
    with pytest.raises(InputError, match="not a store URL"):
        read_epochs("s3://Bad_Bucket/x", ACTIONS, "wc")


def test_a_block_is_compacted_and_keeps_every_row(object_env):
    url = object_env.store()
    for epoch in range(delta.COMPACT_AT_FILES + 3):
        write_epochs(url, ACTIONS, "wc", rows([epoch], f"m{epoch}"))
    assert len(delta.file_uris(url, ACTIONS, "wc")) < delta.COMPACT_AT_FILES
    assert messages(url) == [(e, f"m{e}") for e in range(delta.COMPACT_AT_FILES + 3)]


HOST = """
import sys
sys.path[:0] = [{root!r}, {include!r}]
from tests.integration.test_object_store import rows
from autoscaler.store.parquet import write_epochs
from autoscaler.store.schemas import ACTIONS
url, host, first, last, rounds = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
for r in range(rounds):
    for e in range(first, last, 5):
        write_epochs(url, ACTIONS, "wc", rows(range(e, min(e + 5, last)), f"{{host}}-{{r}}"))
        write_epochs(url, ACTIONS, host, rows([e], f"{{host}}-{{r}}", host))
"""


def host_process(url: str, env: dict[str, str], data_dir: Path, host: str, *args: int) -> subprocess.Popen:
    """A writer on its own "host": a process with its own local data folder, sharing only the object store."""
    code = HOST.format(root=str(ROOT), include=str(ROOT / "include"))
    data_dir.mkdir()
    environment = {**os.environ, **env, "DS2_DATA_DIR": str(data_dir)}
    return subprocess.Popen([sys.executable, "-c", code, url, host, *map(str, args)], env=environment, cwd=data_dir,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_two_hosts_writing_one_job_at_once_neither_lose_nor_duplicate_a_row(object_env, tmp_path):
    """Two processes with separate local folders write interleaved epochs of one job (the same blocks,
    so their commits conflict) and a job each, three rounds: every epoch is there once, from its last round."""
    url = object_env.store()
    a = host_process(url, object_env.env, tmp_path / "host-a", "host-a", 0, 60, 3)
    b = host_process(url, object_env.env, tmp_path / "host-b", "host-b", 60, 120, 3)
    for p in (a, b):
        assert p.wait(300) == 0, p.stderr.read()
    seen = messages(url)
    assert [e for e, _ in seen] == list(range(120))  # none lost, none doubled
    assert all(m == ("host-a-2" if e < 60 else "host-b-2") for e, m in seen)
    assert [e for e, _ in messages(url, "host-a")] == list(range(0, 60, 5))
    assert [e for e, _ in messages(url, "host-b")] == list(range(60, 120, 5))
    assert not any((tmp_path / h / "s3:").exists() for h in ("host-a", "host-b"))  # nothing went to a local folder


def test_two_hosts_writing_the_same_epochs_at_once_leave_one_copy_of_each(object_env, tmp_path):
    """Both write epochs 0-59 of one job three times, at once (a retried task on a second host): each
    epoch's rows are one host's whole write, never both hosts' rows for one epoch."""
    url = object_env.store()
    hosts = [host_process(url, object_env.env, tmp_path / h, h, 0, 60, 3) for h in ("host-a", "host-b")]
    for p in hosts:
        assert p.wait(300) == 0, p.stderr.read()
    seen = messages(url)
    assert [e for e, _ in seen] == list(range(60))
    assert {m for _, m in seen} <= {"host-a-2", "host-b-2"}


def test_a_writer_killed_mid_write_leaves_whole_epochs(object_env, tmp_path):
    """SIGKILL while a host writes: every epoch is in the table whole (five rows' write, one commit) or not at all."""
    url = object_env.store()
    writer = host_process(url, object_env.env, tmp_path / "host", "host", 0, 10_000, 1)
    try:
        poll("the writer's first commits", lambda: len(messages(url)) >= 20, 120, 0.2)
    finally:
        writer.send_signal(signal.SIGKILL)  # also when the poll failed: the test stops what it started
        writer.wait(30)
    seen = messages(url)
    epochs = [e for e, _ in seen]
    assert epochs == list(range(len(epochs)))  # written in order: a prefix, no gap, no double
    assert len(epochs) % 5 == 0  # whole writes only
    write_epochs(url, ACTIONS, "wc", rows([len(epochs)], "after"))  # the table takes the next write
    assert messages(url)[-1] == (len(epochs), "after")


def test_quarantine_moves_an_epoch_out_of_the_object_store_and_back(object_env):
    """Validation's quarantine on the object store: the epoch leaves the metrics table (one commit), its rows
    and result are kept beside it, a second rejection keeps the first copy, and a release restores it."""
    from autoscaler.store.schemas import METRICS
    from autoscaler.topology import Operator, Topology
    from autoscaler.validate.quarantine import quarantine_epoch, quarantined_epochs, read_quarantine, release_quarantine
    from tests.helpers import metrics_rows, window

    url = object_env.store()
    topo = Topology.from_edges([Operator("src", "Source", 1), Operator("cnt", "Count", 2)], [("src", "cnt")])
    epoch = {"src": window(1, 2000.0, 1000.0), "cnt": window(2, 1500.0, 500.0)}
    write_epochs(url, METRICS, "t", metrics_rows(topo, {7: epoch, 8: epoch}))
    quarantine_epoch(url, "t", 7, {"success": False, "why": "first"})
    assert sorted(set(read_epochs(url, METRICS, "t").column("epoch").to_pylist())) == [8]
    assert quarantined_epochs(url, "t") == [7]
    rows, result = read_quarantine(url, "t", 7)
    assert rows.num_rows == 3 and result["why"] == "first" and rows.schema == METRICS.arrow_schema()
    quarantine_epoch(url, "t", 7, {"success": False, "why": "again"})  # nothing left in the store: the copy stays
    assert read_quarantine(url, "t", 7)[0].num_rows == 3 and read_quarantine(url, "t", 7)[1]["why"] == "again"
    assert release_quarantine(url, "t", 7) == 3
    assert sorted(set(read_epochs(url, METRICS, "t").column("epoch").to_pylist())) == [7, 8]
    assert quarantined_epochs(url, "t") == [] and read_quarantine(url, "t", 7) is None


LEASE_HOLDER = """
import sys, time
sys.path[:0] = [{include!r}]
from autoscaler.rescale.journal import open_journal
with open_journal(sys.argv[1], "act-1") as journal:
    journal.data = {{"version": 1, "action_id": "act-1", "step": "held"}}
    journal.save()
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def lease_env(postgres_server, monkeypatch):
    from sqlalchemy.engine import make_url

    url = postgres_server.script("url", "ds2lease").stdout.strip().splitlines()[-1]
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    monkeypatch.setenv("DS2_LEASE_DSN", dsn)
    return dsn


def test_a_journal_on_the_object_store_is_held_by_one_attempt_on_any_host(object_env, lease_env, tmp_path):
    """The journal of an action lies beside the store; a second attempt (another host) fails at once while the
    first holds its PostgreSQL lease, and takes it over as soon as the first is killed (no expiry to wait)."""
    from autoscaler.rescale.journal import open_journal
    from autoscaler.rescale.reconcile import unfinished

    journals = f"{object_env.store()}/journal"
    env = {**os.environ, "DS2_DATA_DIR": str(tmp_path / "host-a")}
    holder = subprocess.Popen([sys.executable, "-c", LEASE_HOLDER.format(include=str(ROOT / "include")), journals],
                              env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match="held by another process"):
            with open_journal(journals, "act-1"):
                pass
        [found] = unfinished(journals)  # the reconciler lists it from any host
        assert found.action_id == "act-1" and found.idle_s < 120
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)

        def taken_over() -> bool:
            try:
                with open_journal(journals, "act-1") as journal:
                    return journal.data["step"] == "held"
            except InputError:
                return False  # the server has not ended the killed session yet

        assert poll("the lease after its holder was killed", taken_over, 30, 0.2)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_without_a_lease_database_a_shared_journal_is_refused(object_env, monkeypatch):
    from autoscaler.rescale.journal import open_journal

    monkeypatch.delenv("DS2_LEASE_DSN", raising=False)
    with pytest.raises(InputError, match="none is set: set lease_conn_id"):
        with open_journal(f"{object_env.store()}/journal", "act-2"):
            pass
