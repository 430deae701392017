"""Committed means durable: a writer killed (SIGKILL) at every step of a commit loses no committed
row, a concurrent reader never sees an epoch missing, and a torn block is set aside, not fatal."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from autoscaler.record.outcomes import action_row
from autoscaler.store.commit import STEPS
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import ACTIONS

ROOT = Path(__file__).resolve().parents[2]
EPOCHS = [*range(0, 250), *range(1024, 1274)]  # 500 rows in two blocks


def rows(epochs, message: str) -> pa.Table:
    made = [action_row("wc", e, action_id=f"a{e}", mechanism="in-place", outcome="noop", message=message, parallelism={})
            for e in epochs]  # fmt: skip
    return pa.Table.from_pylist(made, schema=ACTIONS.arrow_schema())


def messages(store: Path) -> dict[int, str]:
    return {r["epoch"]: r["message"] for r in read_epochs(store, ACTIONS, "wc").to_pylist()}


WRITER = """
import sys
sys.path[:0] = [{root!r}, {include!r}]
from tests.unit.test_store_commit import rows
from autoscaler.store.parquet import write_epochs
from autoscaler.store.schemas import ACTIONS
write_epochs(sys.argv[1], ACTIONS, "wc", rows([*range(0, 10), *range(1024, 1034)], "v2"))
"""


def write_in_a_process(store: Path, env: dict[str, str]) -> int:
    code = WRITER.format(root=str(ROOT), include=str(ROOT / "include"))
    import os

    return subprocess.run([sys.executable, "-c", code, str(store)], env={**os.environ, **env}, timeout=120).returncode


CRASHES = [(step, False) for step in STEPS if step != "trashed"] + [(step, True) for step in STEPS if step != "exchanged"]


@pytest.mark.parametrize(("step", "fallback"), CRASHES, ids=[f"{s}-{'two-renames' if f else 'exchange'}" for s, f in CRASHES])
def test_a_writer_killed_at_any_step_loses_no_committed_row(tmp_path, step, fallback):
    write_epochs(tmp_path, ACTIONS, "wc", rows(EPOCHS, "v1"))
    env = {"DS2_STORE_FAILPOINT": step, **({"DS2_STORE_NO_EXCHANGE": "1"} if fallback else {})}
    assert write_in_a_process(tmp_path, env) == -9  # killed at that step
    seen = messages(tmp_path)
    assert sorted(seen) == EPOCHS  # every committed epoch is still there
    for block in ([*range(0, 10)], [*range(1024, 1034)]):
        assert len({seen[e] for e in block}) == 1  # each block is old or new, never a mix
    # The next write finds the store healthy and clears what the killed one left.
    write_epochs(tmp_path, ACTIONS, "wc", rows([5], "v3"))
    assert messages(tmp_path)[5] == "v3" and sorted(messages(tmp_path)) == EPOCHS
    # Left: at most the previous version of each block (deleted at its next commit), nothing else.
    assert len(list(tmp_path.rglob(".staging-*"))) <= 2 and not list(tmp_path.rglob(".trash-*"))


def test_a_reader_never_sees_an_epoch_missing_while_blocks_are_replaced(tmp_path):
    write_epochs(tmp_path, ACTIONS, "wc", rows(EPOCHS, "v0"))
    counts: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            counts.append(read_epochs(tmp_path, ACTIONS, "wc").num_rows)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(200):
            write_epochs(tmp_path, ACTIONS, "wc", rows(EPOCHS[i % 2 :: 2], f"v{i}"))
    finally:
        done.set()
        reader.join()
    assert counts and set(counts) == {len(EPOCHS)}


def test_a_torn_block_is_set_aside_and_the_rest_stays_readable_and_writable(tmp_path, caplog):
    write_epochs(tmp_path, ACTIONS, "wc", rows(EPOCHS, "v1"))
    block = next(p for p in tmp_path.rglob("*.parquet") if "epoch_block=0" in str(p))
    block.write_bytes(block.read_bytes()[:100])  # torn: a crash of a writer without fsync
    assert sorted(messages(tmp_path)) == list(range(1024, 1274))  # the other block is still read
    assert "cannot be read" in caplog.text and list(tmp_path.rglob(".torn/epoch_block=0-*"))
    write_epochs(tmp_path, ACTIONS, "wc", rows([3], "v2"))  # and the job's table takes writes again
    assert messages(tmp_path)[3] == "v2"
