import json

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.policy.rounding import key_group_divisors


@pytest.mark.parametrize(
    ("kwargs", "source"),
    [
        ({"factor": -0.1}, "--factor"),
        ({"factor": float("nan")}, "--factor"),
        ({"threshold": 0.5}, "--threshold"),
        ({"min_parallelism": {"a": 0}}, "--min-parallelism"),
        ({"min_parallelism": {"a": 4}, "max_parallelism": {"a": 2}}, "--max-parallelism"),
        ({"job_max_parallelism": 0}, "--job-max-parallelism"),
        ({"decision_latency": -1.0}, "--decision-latency"),
        ({"steady_quantile": 1.0}, "--steady-quantile"),
        ({"scale_down_interval": float("nan")}, "--scale-down-interval"),
    ],
)
def test_bad_options_name_the_option(kwargs, source):
    with pytest.raises(InputError) as err:
        PolicyOptions(**kwargs)
    assert err.value.source == source


def test_options_serialise_and_describe_themselves():
    opts = PolicyOptions(factor=0.2, threshold=1.5, min_parallelism={"a": 2})
    assert json.loads(opts.to_json())["min_parallelism"] == {"a": 2}
    described = {name: (default, doc) for name, default, doc in PolicyOptions.describe()}
    assert described["factor"][0] == 0.0 and described["min_parallelism"][0] == {}
    assert all(doc for _, doc in described.values())


def test_key_group_divisors():
    assert key_group_divisors(12) == [1, 2, 3, 4, 6, 12]


def test_every_option_has_one_default_and_the_docs_table_is_current():
    from pathlib import Path

    from autoscaler.config import options as opt
    from autoscaler.config.jobs import JobConfig
    from autoscaler.config.sections import Approval, Stability

    keys = [o.key for o in opt.OPTIONS]
    assert len(keys) == len(set(keys)) and all(o.meaning for o in opt.OPTIONS)
    # the dataclasses' defaults are the declared ones
    assert PolicyOptions().factor == opt.FACTOR.default and Stability().cooldown == opt.COOLDOWN.default
    assert Approval().timeout == opt.APPROVAL_TIMEOUT.default
    assert JobConfig.__dataclass_fields__["savepoint_timeout"].default == opt.SAVEPOINT_TIMEOUT.default
    docs = Path(__file__).resolve().parents[2] / "docs" / "options.md"
    assert opt.options_table() in docs.read_text(), "docs/options.md is stale: python -m autoscaler.config.options"
