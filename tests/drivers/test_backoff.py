"""The reconnect backoff every transport shares."""

from __future__ import annotations

from drivers.base import Backoff


def test_backoff_doubles_up_to_the_cap_with_bounded_jitter() -> None:
    b = Backoff(initial=0.1, factor=2.0, cap=5.0, jitter=0.1)
    for attempt, expected in [(0, 0.1), (1, 0.2), (3, 0.8), (6, 5.0), (50, 5.0)]:
        assert expected * 0.9 <= b.delay(attempt) <= expected * 1.1


def test_a_device_away_for_hours_never_overflows() -> None:
    b = Backoff(initial=0.1, cap=1.0)
    assert 0.9 <= b.delay(10**6) <= 1.1
