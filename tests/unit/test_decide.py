"""The rules between a DS2 proposal and a rescale: each one can hold, reduce or pass a proposal."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.config.jobs import parse_jobs
from autoscaler.decide.rules import NOOP, RESCALE, LastRescale, ScalingPlan, decide

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def job(**policy):
    entry = {
        "name": "wc",
        "flink_job_name": "wordcount",
        "jar": "build/ds2-testjob.jar",
        "parallelism_args": {"Count": "--count-parallelism", "Sink": "--sink-parallelism"},
        "policy": policy,
    }
    return parse_jobs({"jobs": [copy.deepcopy(entry)]}, "jobs.yaml")[0]


def job_with(**fields):
    """A job with top-level fields set (``job`` sets policy options)."""
    entry = {"name": "wc", "flink_job_name": "wordcount", "jar": "build/ds2-testjob.jar",
             "parallelism_args": {"Count": "--count-parallelism", "Sink": "--sink-parallelism"}} | fields  # fmt: skip
    return parse_jobs({"jobs": [entry]}, "jobs.yaml")[0]


def rows(count=(1, 4), sink=(1, 1), status="ok"):
    def row(op, name, current, target, is_source=False):
        return {
            "operator_id": op, "operator_name": name, "is_source": is_source, "status": status,
            "current_parallelism": current, "target_parallelism": target, "target_input_rate": 20000.0,
            "capacity_per_instance": 5660.0, "reason": f"{name} needs {target}",
        }  # fmt: skip

    return [row("s", "Source", 2, 2, True), row("c", "Count", *count), row("k", "Sink", *sink)]


def test_a_proposal_passes_and_targets_only_what_changes():
    plan = decide(job(), 10, rows(), decided_epochs_since_rescale=1, free_slots=6, now=NOW)
    assert plan.action == RESCALE and plan.target == {"Count": 4}
    assert plan.summary == "rescale Count 1→4"
    md = plan.markdown()
    assert "| Count | 1 → **4** | 20,000 | 5,660 | Count needs 4 |" in md and "| Source | 2 |" in md
    assert ScalingPlan.from_dict(plan.to_dict()).to_dict() == plan.to_dict()


def test_no_change_is_a_noop():
    plan = decide(job(), 10, rows(count=(4, 4)), decided_epochs_since_rescale=1)
    assert plan.action == NOOP and plan.summary == "the ds2_plus policy proposes no change" and plan.target == {}


@pytest.mark.parametrize(
    ("kwargs", "summary"),
    [
        ({"decidable": False, "not_decidable_reason": "warm-up window"}, "epoch not decidable: warm-up window"),
        ({"last_rescale": LastRescale(9, NOW)}, "warm-up: epoch 1 of 1 after the rescale at epoch 9 (held: Count 1→4)"),
        ({"last_rescale": LastRescale(8, None), "decided_epochs_since_rescale": 0}, "activation: 0 of 1 decided epochs"),
    ],
)
def test_holds(kwargs, summary):
    kwargs.setdefault("decided_epochs_since_rescale", 1)
    plan = decide(job(), 10, rows(), now=NOW, **kwargs)
    assert plan.action == NOOP and summary in plan.summary
    assert all(op.final == op.current for op in plan.operators)


def test_incomplete_metrics_hold():
    plan = decide(job(), 10, rows(status="incomplete"), decided_epochs_since_rescale=1)
    assert plan.action == NOOP and plan.summary.startswith("metrics incomplete for Count, Sink, Source")


def test_activation_and_cooldown():
    j = job(activation_epochs=3, cooldown="10m", warmup_epochs=0)
    epoch = j.epoch_of(NOW)  # the epoch that ended at NOW; the rescale took effect 4 minutes before
    last = LastRescale(epoch - 5, NOW - timedelta(minutes=4))
    assert "activation: 2 of 3" in decide(j, epoch, rows(), last_rescale=last, decided_epochs_since_rescale=2, now=NOW).summary
    held = decide(j, epoch, rows(), last_rescale=last, decided_epochs_since_rescale=3, now=NOW)
    assert held.action == NOOP and held.summary.startswith("cooldown: 240 s of 600 s")
    later = decide(j, epoch, rows(), last_rescale=last, decided_epochs_since_rescale=3, now=NOW + timedelta(minutes=7))
    assert later.action == RESCALE


def test_epochs_measured_before_a_late_rescale_took_effect_are_not_acted_on():
    """The cluster drill: the rescale of epoch e (Count 1 -> 6) took effect late, after epoch e+2 had
    ended (its worker died; the retry finished it). e+2's metrics were still measured at Count 1: its
    proposal is held, and a later epoch, measured after the rescale, is decided."""
    j = job()
    e = j.epoch_of(NOW)
    late = LastRescale(e, j.epoch_start(e + 3) + timedelta(seconds=7))
    held = decide(j, e + 2, rows(count=(1, 6)), last_rescale=late, decided_epochs_since_rescale=1, free_slots=1, now=NOW)
    assert held.action == NOOP and held.target == {}
    assert held.summary.startswith(f"measured before the rescale at epoch {e} took effect"), held.summary
    after = decide(j, e + 4, rows(count=(6, 8)), last_rescale=late, decided_epochs_since_rescale=1, free_slots=2, now=NOW)
    assert after.action == RESCALE and after.target == {"Count": 8}
    on_time = LastRescale(e, j.epoch_start(e + 1) + timedelta(seconds=7))  # as usual: right after its epoch
    assert decide(j, e + 2, rows(count=(4, 6)), last_rescale=on_time, decided_epochs_since_rescale=1, free_slots=2).target == {
        "Count": 6
    }


def test_warm_up_counts_from_the_epoch_a_late_rescale_took_effect_in():
    """The flaky CI run: Count 1 -> 4 decided at epoch e took effect 4 s into epoch e+3 (the runs were
    late), and the run of e+3 measured a short window 9 s after the restart, in the drain: its 4 -> 6 is
    a warm-up, not a decision. The next epoch is decided as usual."""
    j = job()
    e = j.epoch_of(NOW)
    late = LastRescale(e, j.epoch_start(e + 3) + timedelta(seconds=4))
    held = decide(j, e + 3, rows(count=(4, 6)), last_rescale=late, decided_epochs_since_rescale=1, free_slots=2, now=NOW)
    assert held.action == NOOP and held.target == {}
    assert held.summary.startswith(f"warm-up: epoch 1 of 1 after the rescale at epoch {e} took effect"), held.summary
    after = decide(j, e + 4, rows(count=(4, 6)), last_rescale=late, decided_epochs_since_rescale=1, free_slots=2, now=NOW)
    assert after.action == RESCALE and after.target == {"Count": 6}
    two = job(warmup_epochs=2)
    assert decide(two, e + 4, rows(count=(4, 6)), last_rescale=late, decided_epochs_since_rescale=1, free_slots=2).action == NOOP


def test_hysteresis_ignores_a_scale_down_by_one_but_not_by_two():
    plan = decide(job(ignore_scale_down_by=1), 10, rows(count=(4, 3)), decided_epochs_since_rescale=1)
    assert plan.action == NOOP and "scale-down by 1 ignored" in plan.summary
    assert decide(job(ignore_scale_down_by=1), 10, rows(count=(4, 2)), decided_epochs_since_rescale=1).target == {"Count": 2}
    assert decide(job(ignore_scale_down_by=0), 10, rows(count=(4, 3)), decided_epochs_since_rescale=1).target == {"Count": 3}
    assert decide(job(ignore_scale_down_by=1), 10, rows(count=(4, 5)), decided_epochs_since_rescale=1).target == {"Count": 5}


def test_only_the_ds2_reference_ignores_a_scale_down_by_one_by_default():
    # The reference's hysteresis; the other kinds hold scale-downs back by their own rules.
    assert job(kind="ds2").stability.ignore_scale_down_by == 1
    for kind in ("ds2_plus", "utilization", "rules"):
        assert job(kind=kind).stability.ignore_scale_down_by == 0
    assert decide(job(kind="ds2_plus"), 10, rows(count=(4, 3)), decided_epochs_since_rescale=1).target == {"Count": 3}


def test_decide_keeps_the_policys_bounded_proposal():
    # Bounds, alignment and the scale-down limit are the policy's (policy.base.bounded): decide
    # applies hysteresis only, so a proposal arrives and leaves within them.
    plan = decide(job(max_parallelism={"Count": 3}), 10, rows(count=(2, 3)), decided_epochs_since_rescale=1)
    assert plan.target == {"Count": 3}


def test_a_removed_option_is_named_with_its_replacement():
    from autoscaler.errors import InputError

    with pytest.raises(InputError, match=r"max_scale_down_step: removed: .*max_scale_down_factor"):
        job(max_scale_down_step=2)


def test_capacity_reduces_or_blocks():
    # The job holds 2 slots (its largest operator); 1 more is free: Count can reach 3, not 4.
    plan = decide(job(), 10, rows(), decided_epochs_since_rescale=1, free_slots=1)
    assert plan.action == RESCALE and plan.target == {"Count": 3}
    assert "4 task slots needed, 3 available (1 free + 2 held by the job)" in plan.summary
    blocked = decide(job(), 10, rows(count=(2, 4)), decided_epochs_since_rescale=1, free_slots=0)
    assert blocked.action == NOOP and blocked.summary.startswith("blocked: 4 task slots needed, 2 available")
    assert decide(job(), 10, rows(), decided_epochs_since_rescale=1, free_slots=None).target == {"Count": 4}


def test_a_target_cut_by_the_slot_check_stays_aligned_to_its_key_groups():
    """2 -> 8 with 128 key groups and 3 free slots: 5 available, and 5 would give some instances 26 key groups
    and others 25; the cut keeps the alignment the policy applied, to 4 (32 each)."""
    aligned = job(align_to_key_groups=True)
    plan = decide(aligned, 10, rows(count=(2, 8)), decided_epochs_since_rescale=1, free_slots=3, key_groups={"c": 128})
    assert plan.action == RESCALE and plan.target == {"Count": 4}
    assert "reduced 8→4: 8 task slots needed, 5 available" in plan.markdown() and "aligned to 128 key groups" in plan.markdown()
    # No aligned parallelism between the current one and the slots: no change, rather than an unaligned one.
    held = decide(aligned, 10, rows(count=(2, 8)), decided_epochs_since_rescale=1, free_slots=1, key_groups={"c": 128})
    assert held.action == NOOP and held.summary.startswith("blocked: 8 task slots needed, 3 available")
    # The job's own max parallelism stands in for an operator's unknown key groups; without alignment, 5.
    by_job = job(align_to_key_groups=True, job_max_parallelism=128)
    assert decide(by_job, 10, rows(count=(2, 8)), decided_epochs_since_rescale=1, free_slots=3).target == {"Count": 4}
    assert decide(job(), 10, rows(count=(2, 8)), decided_epochs_since_rescale=1, free_slots=3, key_groups={"c": 128}).target == {
        "Count": 5
    }


def test_a_source_changes_where_its_kind_proposed_it_and_a_row_without_a_target_stays():
    r = rows()
    r[0]["target_parallelism"] = 9  # a kind that sizes sources (policy.scale_sources) proposed it
    assert decide(job(), 10, r, decided_epochs_since_rescale=1).target["Source"] == 9
    r[0]["target_parallelism"] = None  # a row written before sources were sized
    assert "Source" not in decide(job(), 10, r, decided_epochs_since_rescale=1).target


def test_a_recommendation_only_job_records_the_rescale_and_never_acts():
    from autoscaler.decide.rules import RECOMMEND

    recommending = job_with(recommendation_only=True)
    plan = decide(recommending, 10, rows(), decided_epochs_since_rescale=1, free_slots=6, now=NOW)
    assert plan.action == RECOMMEND and plan.target == {"Count": 4}
    assert plan.summary == "recommended, not acted on (recommendation-only job): rescale Count 1→4"
    # The rules still hold it back as they would a rescale: a recommendation is what would be done.
    held = decide(recommending, 10, rows(), last_rescale=LastRescale(9, NOW), decided_epochs_since_rescale=1, now=NOW)
    assert held.action == NOOP


@pytest.mark.parametrize(
    ("periods", "at", "acted"),
    [
        (["11:30-12:30"], NOW, False),
        (["11:30-12:00"], NOW, True),  # the end is outside
        (["23:00-01:00"], NOW.replace(hour=0, minute=15), False),  # wraps midnight
        (["23:00-01:00"], NOW, True),
    ],
)
def test_an_excluded_period_records_the_recommendation_only(periods, at, acted):
    from autoscaler.decide.rules import RECOMMEND

    plan = decide(job_with(excluded_periods=periods), 10, rows(), decided_epochs_since_rescale=1, now=at)
    assert plan.action == (RESCALE if acted else RECOMMEND)
    if not acted:
        assert plan.summary == f"recommended, not acted on (excluded period {periods[0]} UTC): rescale Count 1→4"


def test_a_recommendation_is_recorded_as_recommended():
    from autoscaler.record.outcomes import RECOMMENDED, EpochRun, epoch_row

    run = EpochRun("a1", "savepoint-restart", {"Count": 1}, plan_summary="recommended, not acted on (...)",
                   plan_action="recommend")  # fmt: skip
    row = epoch_row("wc", 10, run)
    assert row["outcome"] == RECOMMENDED and row["message"].startswith("recommended, not acted on")


def test_a_job_failing_over_is_recorded_as_failing_over_and_held_like_a_restart(tmp_path):
    from autoscaler.decide.history import last_rescale
    from autoscaler.record import audit
    from autoscaler.record.outcomes import FAILING_OVER, SKIPPED, EpochRun, epoch_row

    found = "Flink job 'wc' (ab) is RESTARTING, not RUNNING; last failure: java.lang.IllegalStateException: boom"
    row = epoch_row("wc", 10, EpochRun("a1", "savepoint-restart", {}, failed_tasks=["collect"], failing_over=found))
    assert row["outcome"] == FAILING_OVER and row["message"].startswith(found)
    assert row["message"].endswith("nothing is decided or rescaled while it fails over")
    assert epoch_row("wc", 10, EpochRun("a1", "savepoint-restart", {}, failed_tasks=["collect"]))["outcome"] == SKIPPED
    audit.record_action(tmp_path, row)
    last = last_rescale(tmp_path, "wc", 11)
    assert (last.epoch, last.what) == (10, "failover")
    plan = decide(job(), 11, rows(), last_rescale=last, decided_epochs_since_rescale=1, free_slots=6, now=NOW)
    assert plan.action == NOOP and "warm-up: epoch 1 of 1 after the failover at epoch 10" in plan.summary


@pytest.mark.parametrize("bad", [0, -3, float("nan"), float("inf")])
def test_a_proposal_of_zero_negative_or_nan_is_refused_with_a_reason(bad):
    decisions = rows()
    decisions[1]["target_parallelism"] = bad
    plan = decide(job(), 10, decisions, decided_epochs_since_rescale=1, free_slots=6, now=NOW)
    assert plan.action == NOOP and plan.target == {}
    assert plan.summary == (
        f"the epoch's decisions cannot be acted on: decision of 'Count': target_parallelism is {bad!r}, not a parallelism >= 1"
    )


def test_activation_counts_the_epochs_whose_proposals_agree(tmp_path):
    import pyarrow as pa

    from autoscaler.decide.history import decided_epochs
    from autoscaler.store.parquet import epoch_block, write_epochs
    from autoscaler.store.schemas import DECISIONS

    def epoch_rows(epoch: int, count: tuple[int, int], status: str = "ok") -> list[dict]:
        base = {c.name: None for c in DECISIONS.columns} | {
            "job": "wc", "epoch": epoch, "epoch_block": epoch_block(epoch), "status": status, "instances_observed": 1,
            "reason": "r", "options": "{}", "run_id": "r1", "run_type": "live", "decided_at": NOW,
        }  # fmt: skip
        return [base | {"operator_id": "s", "operator_name": "Source", "is_source": True, "current_parallelism": 2,
                        "target_parallelism": 2},
                base | {"operator_id": "c", "operator_name": "Count", "is_source": False, "current_parallelism": count[0],
                        "target_parallelism": count[1]}]  # fmt: skip

    # 20: keep; 21: up; 22: incomplete; 23: up (more); 24: up.
    history = {20: (4, 4), 21: (4, 6), 23: (4, 7), 24: (4, 6)}
    rows = [r for e, c in history.items() for r in epoch_rows(e, c)] + epoch_rows(22, (4, 4), "incomplete")
    write_epochs(tmp_path, DECISIONS, "wc", pa.Table.from_pylist(rows, schema=DECISIONS.arrow_schema()))
    assert decided_epochs(tmp_path, "wc", -1, 24, 10) == 3  # 24, 23 and 21 propose a scale-up; 22 is skipped; 20 keeps
    assert decided_epochs(tmp_path, "wc", 22, 24, 10) == 2  # only after the rescale at 22
    assert decided_epochs(tmp_path, "wc", -1, 24, 2) == 2  # no more read than the rule needs
    assert decided_epochs(tmp_path, "wc", -1, 20, 10) == 1


def test_a_what_if_replays_the_whole_chain_and_counts_its_rescales():
    from autoscaler.decide.replay import replay

    def epoch_rows(epoch: int, count: tuple[int, int], status: str = "ok") -> list[dict]:
        return [r | {"epoch": epoch} for r in rows(count=count, status=status)]

    # Count at 1 (never rescaled: the job's real parallelism) where the policy asks for 4 each epoch.
    stored = [r for e in range(10, 16) for r in epoch_rows(e, (1, 4))]
    chain = replay(job(), stored)
    # Epoch 10 rescales 1 -> 4; from 11 on, at the simulated 4, a proposal of 4 is no change.
    assert [p.action for p in chain.plans] == [RESCALE, NOOP, NOOP, NOOP, NOOP, NOOP]
    assert chain.summary() == "1 rescales over 6 epochs (epoch 10: Count 1→4)"
    assert chain.plans[1].summary == "the ds2_plus policy proposes no change"
    # A policy still asking for more after the rescale is held by the warm-up, then acted on.
    growing = [r for e in range(10, 14) for r in epoch_rows(e, (1, 4) if e == 10 else (1, 6))]
    assert [p.summary for p in replay(job(), growing).plans][1:3] == [
        "warm-up: epoch 1 of 1 after the rescale at epoch 10 (held: Count 4→6)",
        "rescale Count 4→6",
    ]
    # Two agreeing epochs needed: 10 alone holds, 11 rescales.
    assert [p.action for p in replay(job(activation_epochs=2), stored).plans][:2] == [NOOP, RESCALE]
    # A proposal that flips every epoch never gathers two agreeing epochs.
    flipping = [r for e in range(10, 16) for r in epoch_rows(e, (1, 4) if e % 2 else (1, 1))]
    assert replay(job(activation_epochs=2), flipping).rescales == []


def test_a_what_if_sets_the_decide_rules_own_options_and_its_replay_counts_follow():
    """The what-if DAG took only the policy's options: warm-up, activation, hysteresis and cooldown, which decide
    how often the replayed chain rescales, kept the job's values whatever the run asked for."""
    from autoscaler.decide.replay import replay
    from ds2_airflow.dag_factory import what_if_params
    from ds2_airflow.operators.policy import what_if_stability
    from ds2_airflow.scaling import replayed_stability

    base = job()
    params = what_if_params([base])
    assert {"warmup_epochs", "activation_epochs", "ignore_scale_down_by", "cooldown"} <= set(params)
    asked = {"job": "wc", "activation_epochs": 2, "cooldown": 120, "factor": None}
    stability = what_if_stability(asked)
    assert stability == {"activation_epochs": 2, "cooldown": 120}
    replayed = dataclasses.replace(base, stability=replayed_stability(base, stability))
    assert replayed.stability.cooldown == timedelta(seconds=120)
    assert replayed.stability.warmup_epochs == base.stability.warmup_epochs

    # Proposals that flip 1 -> 4 -> 1 ... : the job's own rules (activation 1) rescale on every flip; the
    # what-if's (two agreeing epochs, 2 min between rescales) never do.
    flipping = [r | {"epoch": e} for e in range(10, 16) for r in rows(count=(1, 4) if e % 2 == 0 else (1, 1))]
    assert len(replay(base, flipping).rescales) > 0
    assert replay(replayed, flipping).rescales == []
