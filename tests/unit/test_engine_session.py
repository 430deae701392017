"""Every policy client names the one shared server-side session, whatever the connection's URL holds."""

from __future__ import annotations

import uuid

import pytest

from autoscaler.engine.spark.engine import SHARED_SESSION, address, with_session


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("sc://127.0.0.1:15002", f"sc://127.0.0.1:15002/;session_id={SHARED_SESSION}"),
        ("sc://127.0.0.1:15002/", f"sc://127.0.0.1:15002/;session_id={SHARED_SESSION}"),
        ("sc://h:1/;token=abc", f"sc://h:1/;token=abc;session_id={SHARED_SESSION}"),
        (
            "sc://h:1/;session_id=0f0e0d0c-0b0a-4908-8706-050403020100",
            "sc://h:1/;session_id=0f0e0d0c-0b0a-4908-8706-050403020100",
        ),
    ],
)
def test_the_shared_session_is_named_once_and_the_urls_parameters_are_kept(url, want):
    assert with_session(url) == want
    assert address(with_session(url)) == address(url)


def test_the_shared_session_id_is_a_version_4_uuid():
    # Spark Connect refuses any other: the client parses it with uuid.UUID(..., version=4).
    assert str(uuid.UUID(SHARED_SESSION, version=4)) == SHARED_SESSION
