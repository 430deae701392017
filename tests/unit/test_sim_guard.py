"""The frontier guard: no kind's simulated point moves unless the code behind it changed (and was recorded)."""

from __future__ import annotations

from autoscaler.lab.sim import guard


def test_no_frontier_point_moves_without_its_code_changing():
    record, now = guard.read_record(), guard.guard_points()
    assert set(record) == set(now), "the guard's variants changed: run 'scripts/ds2_sim.py guard --record'"
    changed = [label for label, p in now.items() if record[label]["fingerprint"] != p["fingerprint"]]
    assert not changed, (
        f"the code behind {', '.join(changed)} changed since its point was recorded: run "
        "'.venv/bin/python scripts/ds2_sim.py guard --record' and commit the point with the change"
    )
    moved = {label: (record[label], p) for label, p in now.items() if record[label] != p}
    assert not moved, f"points moved while their code did not: {moved}"


def test_the_fingerprint_follows_a_kinds_own_code(tmp_path, monkeypatch):
    before = {kind: guard.fingerprint(kind) for kind in ("ds2", "ds2_plus")}
    copy = tmp_path / "autoscaler" / "policy"
    copy.mkdir(parents=True)
    module = guard.INCLUDE / "autoscaler" / "policy" / "ds2.py"
    (copy / "ds2.py").write_text(module.read_text() + "\n# changed\n")
    real = guard.Path.read_bytes

    def read_bytes(path):  # ds2.py as if edited
        return (copy / "ds2.py").read_bytes() if path == module else real(path)

    monkeypatch.setattr(guard.Path, "read_bytes", read_bytes)
    assert guard.fingerprint("ds2") != before["ds2"]
    assert guard.fingerprint("ds2_plus") == before["ds2_plus"]
