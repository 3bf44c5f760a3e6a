"""The shared real data (``../shared/data``) as the tests see it."""

from __future__ import annotations

import os

import pytest

#: Set (``.ci/run`` does) to make missing shared data fail the tests that need it instead of skipping them:
#: in CI the data is always there, so a skip would hide that half the suite did not run.
REQUIRE_SHARED_DATA = os.environ.get("SYNOPSIS_REQUIRE_SHARED_DATA", "") not in ("", "0")


def missing_shared_data(message: str) -> None:
    """Skip the test (under ``SYNOPSIS_REQUIRE_SHARED_DATA=1``: fail it): some shared data is absent."""
    if REQUIRE_SHARED_DATA:
        pytest.fail(f"{message}; SYNOPSIS_REQUIRE_SHARED_DATA is set", pytrace=False)
    pytest.skip(message)
