"""One census of all 154,143,080 hands for the whole test session (about 10 s on two cores)."""

from __future__ import annotations

import pytest

from controller.analysis.census import Census, full_census


@pytest.fixture(scope="session")
def census() -> Census:
    return full_census(workers=2)
