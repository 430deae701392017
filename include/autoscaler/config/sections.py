"""A job's sections beyond its policy: stability, approval, alerts and excluded periods, each a value.

Their options are declared in :mod:`autoscaler.config.options`; :mod:`autoscaler.config.jobs` reads a job's
entry into these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from autoscaler.capacity.inventory import CapacityLimits
from autoscaler.config import options as opt
from autoscaler.config.fields import Fields


@dataclass(frozen=True)
class Stability:
    """What a DS2 proposal must get past before it is acted on (see :mod:`autoscaler.decide.rules`)."""

    warmup_epochs: int = opt.WARMUP_EPOCHS.default
    activation_epochs: int = opt.ACTIVATION_EPOCHS.default
    ignore_scale_down_by: int = 0  # the job's, else its kind's (options.kind_default)
    cooldown: timedelta = opt.COOLDOWN.default

    @property
    def cooldown_s(self) -> float:
        return self.cooldown.total_seconds()


@dataclass(frozen=True)
class Approval:
    required: bool = opt.APPROVAL_REQUIRED.default
    approvers: tuple[str, ...] = opt.APPROVERS.default
    timeout: timedelta | None = opt.APPROVAL_TIMEOUT.default  # None waits forever
    on_timeout: str = opt.ON_TIMEOUT.default

    @property
    def timeout_answer(self) -> str:
        return "Approve" if self.on_timeout == "approve" else "Reject"


@dataclass(frozen=True)
class Alerts:
    email: tuple[str, ...] = opt.ALERT_EMAIL.default
    smtp_conn_id: str = opt.ALERT_SMTP_CONN_ID.default
    quarantined_epochs: int = opt.ALERT_QUARANTINED_EPOCHS.default
    failover_epochs: int = opt.ALERT_FAILOVER_EPOCHS.default


@dataclass(frozen=True)
class CapacitySettings:
    """A job's ``capacity`` section: who adds TaskManagers (:mod:`autoscaler.capacity.provider`) and the limits."""

    provider: str = opt.CAPACITY_PROVIDER.default
    flink_data_dir: str | None = opt.CAPACITY_FLINK_DATA_DIR.default
    limits: CapacityLimits = field(default_factory=CapacityLimits)
    release_after: timedelta = opt.RELEASE_AFTER.default


def read_capacity(f: Fields) -> CapacitySettings:
    """A job's ``capacity`` section; ``f`` is done with it after."""
    settings = CapacitySettings(
        provider=f.option(opt.CAPACITY_PROVIDER),
        flink_data_dir=f.option(opt.CAPACITY_FLINK_DATA_DIR),
        limits=CapacityLimits(f.option(opt.MAX_TASKMANAGERS), f.option(opt.MAX_SLOTS), f.option(opt.CORES_PER_TASKMANAGER)),
        release_after=f.option(opt.RELEASE_AFTER),
    )
    f.done()
    return settings


@dataclass(frozen=True)
class RescaleSettings:
    """How ``mechanism: auto`` chooses (options ``rescale.*``, :mod:`autoscaler.rescale.mechanism`)."""

    min_own_rescales: int = opt.MIN_OWN_RESCALES.default
    max_downtime: timedelta | None = opt.MAX_DOWNTIME.default
    payback_horizon: timedelta = opt.PAYBACK_HORIZON.default


def read_rescale(f: Fields) -> RescaleSettings:
    settings = RescaleSettings(f.option(opt.MIN_OWN_RESCALES), f.option(opt.MAX_DOWNTIME), f.option(opt.PAYBACK_HORIZON))
    f.done()
    return settings


@dataclass(frozen=True)
class TuningSettings:
    """A job's ``tuning`` section: profiling copies and the multi-configuration model (:mod:`autoscaler.tuning`)."""

    site: str = opt.TUNING_SITE.default
    max_slots: int | None = opt.TUNING_MAX_SLOTS.default
    max_minutes: int = opt.TUNING_MAX_MINUTES.default
    warmup: timedelta = opt.TUNING_WARMUP.default
    measure: timedelta = opt.TUNING_MEASURE.default
    recovery_target: timedelta | None = opt.TUNING_RECOVERY_TARGET.default
    confidence: float = opt.TUNING_CONFIDENCE.default
    checkpoint_intervals: tuple[str, ...] = opt.TUNING_CHECKPOINT_INTERVALS.default
    memory_per_slot_mb: tuple[str, ...] = opt.TUNING_MEMORY_PER_SLOT.default
    managed_fractions: tuple[str, ...] = opt.TUNING_MANAGED_FRACTIONS.default
    min_taskmanager_mb: int = opt.TUNING_MIN_TM_MB.default
    name_flag: str | None = opt.TUNING_NAME_FLAG.default
    rate_flag: str | None = opt.TUNING_RATE_FLAG.default
    group_flag: str | None = opt.TUNING_GROUP_FLAG.default
    drop_flags: tuple[str, ...] = opt.TUNING_DROP_FLAGS.default

    @property
    def enabled(self) -> bool:
        return self.site != "none"


_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_.-]*")
_TUNING = (opt.TUNING_SITE, opt.TUNING_MAX_SLOTS, opt.TUNING_MAX_MINUTES, opt.TUNING_WARMUP, opt.TUNING_MEASURE,
           opt.TUNING_RECOVERY_TARGET, opt.TUNING_CONFIDENCE, opt.TUNING_CHECKPOINT_INTERVALS, opt.TUNING_MEMORY_PER_SLOT,
           opt.TUNING_MANAGED_FRACTIONS, opt.TUNING_MIN_TM_MB, opt.TUNING_NAME_FLAG, opt.TUNING_RATE_FLAG,
           opt.TUNING_GROUP_FLAG, opt.TUNING_DROP_FLAGS)  # fmt: skip


def read_tuning(f: Fields) -> TuningSettings:
    """A job's ``tuning`` section; ``f`` is done with it after. Flags are matched in full (they reach a command line)."""
    values = {o.name: f.option(o) for o in _TUNING}
    for o in (opt.TUNING_NAME_FLAG, opt.TUNING_RATE_FLAG, opt.TUNING_GROUP_FLAG):
        if values[o.name] is not None and not _FLAG.fullmatch(values[o.name]):
            raise f.error(o.name, f"{values[o.name]!r} is not a program argument like --name")
    for flag in values["drop_flags"]:
        if not _FLAG.fullmatch(flag):
            raise f.error("drop_flags", f"{flag!r} is not a program argument like --name")
    if values["confidence"] >= 1:
        raise f.error("confidence", f"must be below 1 (a probability), got {values['confidence']}")
    f.done()
    return TuningSettings(**values)


# An address as a mail header holds it: no spaces, commas or angle brackets (they would add recipients).
_EMAIL = re.compile(r"[^@\s,;<>\"']+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*")
_PERIOD = re.compile(r"(?P<a>(?:[01]\d|2[0-3]):[0-5]\d)-(?P<b>(?:[01]\d|2[0-3]):[0-5]\d)")


@dataclass(frozen=True)
class ExcludedPeriod:
    """A daily UTC window with no rescale, ``start`` to ``end`` (minutes of the day; it wraps midnight when end < start)."""

    text: str
    start: int
    end: int

    @classmethod
    def parse(cls, text: str) -> ExcludedPeriod:
        match = _PERIOD.fullmatch(text)
        if match is None:
            raise ValueError(f"{text!r} is not a daily UTC window HH:MM-HH:MM")
        start, end = (int(t[:2]) * 60 + int(t[3:]) for t in (match["a"], match["b"]))
        if start == end:
            raise ValueError(f"{text!r} is empty: start and end are equal")
        return cls(text, start, end)

    def contains(self, when: datetime) -> bool:
        minute = when.astimezone(UTC).hour * 60 + when.astimezone(UTC).minute
        return self.start <= minute < self.end if self.start < self.end else minute >= self.start or minute < self.end


def read_approval(f: Fields) -> Approval:
    """A job's ``approval`` section; ``f`` is done with it after."""
    timeout = f.get(opt.APPROVAL_TIMEOUT.name)
    approval = Approval(
        required=f.option(opt.APPROVAL_REQUIRED),
        approvers=f.option(opt.APPROVERS),
        timeout=None if timeout in ("none", "never") else f.option(opt.APPROVAL_TIMEOUT),
        on_timeout=f.option(opt.ON_TIMEOUT),
    )
    f.done()
    return approval


def read_alerts(f: Fields) -> Alerts:
    """A job's ``alerts`` section, each address checked; ``f`` is done with it after."""
    email = f.option(opt.ALERT_EMAIL)
    for i, address in enumerate(email):
        if not _EMAIL.fullmatch(address):
            raise f.error(f"email[{i}]", f"{address!r} is not an e-mail address")
    alerts = Alerts(email=email, smtp_conn_id=f.option(opt.ALERT_SMTP_CONN_ID),
                    quarantined_epochs=f.option(opt.ALERT_QUARANTINED_EPOCHS),
                    failover_epochs=f.option(opt.ALERT_FAILOVER_EPOCHS))  # fmt: skip
    f.done()
    return alerts
