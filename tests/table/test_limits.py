"""The device limiter (controller/table/limits.py): noise and floods cost a bounded amount."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.table.limits import DeviceLimiter
from drivers.events import DeviceFault, FrameError, PacketDealt

T0 = datetime(2026, 11, 24, tzinfo=UTC)


def _frame_error(device: str = "shuffler") -> FrameError:
    return FrameError(device=device, error="checksum", detail="crc")


def test_line_noise_is_one_event_per_interval_and_one_summary() -> None:
    limiter = DeviceLimiter(interval=60, events_per_minute=600)
    admitted = sum(
        limiter.admit(_frame_error(), T0 + timedelta(milliseconds=i)) for i in range(51_200)
    )
    assert admitted == 1
    assert limiter.flush(T0 + timedelta(seconds=30)) == []  # the interval is not over
    [summary] = limiter.flush(T0 + timedelta(seconds=61))
    assert summary.device == "shuffler" and summary.frame_errors == 51_199
    assert limiter.admit(_frame_error(), T0 + timedelta(seconds=62))  # a new interval
    assert limiter.holding() == 0


def test_the_summary_counts_the_bytes_the_held_errors_discarded() -> None:
    """200 KB of noise as 1 KB garbled runs: one passes (its alarm), the rest are counted with
    their bytes, before the device's first good frame as after it (drivers/stream.py)."""
    limiter = DeviceLimiter(interval=60, events_per_minute=600)
    noise = FrameError(device="shuffler", error="garbled", detail="1000 bytes", discarded=1000)
    admitted = sum(limiter.admit(noise, T0 + timedelta(milliseconds=i)) for i in range(200))
    assert admitted == 1
    [summary] = limiter.flush(T0 + timedelta(seconds=61))
    assert summary.frame_errors == 199 and summary.bytes_discarded == 199_000
    assert summary.record()["bytes_discarded"] == 199_000
    assert limiter.flush(T0 + timedelta(seconds=122)) == []  # counted once, then a new interval


def test_each_device_has_its_own_budget() -> None:
    limiter = DeviceLimiter(interval=60, events_per_minute=600)
    assert limiter.admit(_frame_error("shuffler"), T0)
    assert limiter.admit(_frame_error("rng"), T0)
    assert limiter.admit(DeviceFault(device="rng", code="jam"), T0)
    assert not limiter.admit(DeviceFault(device="rng", code="jam"), T0)


def test_a_flood_of_valid_frames_is_held_to_the_rate() -> None:
    limiter = DeviceLimiter(interval=60, events_per_minute=600)
    packet = PacketDealt(device="shuffler", index=0, cards=())
    # 10,000 frames in one second: a minute's burst passes, the rest is counted.
    admitted = sum(
        limiter.admit(packet, T0 + timedelta(microseconds=i * 100)) for i in range(10_000)
    )
    assert 600 <= admitted <= 611  # the burst, plus ten a second refilled
    [summary] = limiter.flush(T0 + timedelta(seconds=60))
    assert summary.dropped == 10_000 - admitted
    assert dict(summary.dropped_kinds) == {"packet_dealt": 10_000 - admitted}


def test_a_real_deal_rate_is_never_held_back() -> None:
    limiter = DeviceLimiter(interval=60, events_per_minute=600)
    packet = PacketDealt(device="shuffler", index=0, cards=())
    # A deal every 20 s of ten frames each, for an hour.
    times = [
        T0 + timedelta(seconds=20 * d, milliseconds=50 * f) for d in range(180) for f in range(10)
    ]
    assert all(limiter.admit(packet, t) for t in times)


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=400),
    kinds=st.lists(st.sampled_from(["frame", "fault", "packet"]), min_size=1, max_size=400),
)
def test_nothing_is_lost_from_the_count_and_errors_pass_once_per_interval(
    gaps: list[int], kinds: list[str]
) -> None:
    limiter = DeviceLimiter(interval=1.0, events_per_minute=60)
    now = T0
    admitted = held = 0
    errors_in_window = 0
    window_start: datetime | None = None  # the limiter's: from the device's first event
    for gap, kind in zip(gaps, kinds, strict=False):
        now += timedelta(milliseconds=gap)
        for s in limiter.flush(now):
            held += s.frame_errors + s.faults + s.dropped
        if window_start is None or (now - window_start).total_seconds() >= 1.0:
            window_start, errors_in_window = now, 0
        event = {
            "frame": _frame_error(),
            "fault": DeviceFault(device="shuffler", code="x"),
            "packet": PacketDealt(device="shuffler", index=0, cards=()),
        }[kind]
        ok = limiter.admit(event, now)
        admitted += ok
        if ok and kind == "frame":
            errors_in_window += 1
            assert errors_in_window <= 1
    held += limiter.holding()
    assert admitted + held == min(len(gaps), len(kinds))
