"""Time: one clock type, the wall clock, and one ISO 8601 formatter for every timestamp we write.

Everything that needs the time is given a ``Clock`` (the daemon's, injectable in tests); nothing
else reads the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, timezone-aware UTC."""
    return datetime.now(UTC)


def iso(
    moment: datetime, timespec: Literal["milliseconds", "microseconds"] = "milliseconds"
) -> str:
    """UTC ISO 8601 with a ``Z``; fixed width, so text order is time order."""
    if moment.tzinfo is None:
        raise ValueError("the clock must return timezone-aware datetimes")
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
