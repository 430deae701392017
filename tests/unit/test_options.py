import json

import pytest

from autoscaler.errors import InputError
from autoscaler.options import PolicyOptions, key_group_divisors


@pytest.mark.parametrize(
    ("kwargs", "source"),
    [
        ({"factor": -0.1}, "--factor"),
        ({"factor": float("nan")}, "--factor"),
        ({"threshold": 0.5}, "--threshold"),
        ({"min_parallelism": {"a": 0}}, "--min-parallelism"),
        ({"min_parallelism": {"a": 4}, "max_parallelism": {"a": 2}}, "--max-parallelism"),
        ({"job_max_parallelism": 0}, "--job-max-parallelism"),
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
