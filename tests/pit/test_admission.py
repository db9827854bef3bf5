"""pit.admission's budgets as properties (issue 40): whatever one name sends, what is admitted of
it never exceeds its burst plus its rate over the time elapsed, in messages and in bytes; another
name's budget is untouched by it; names with no registered key share one small budget; and every
message not admitted is counted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pit.admission import UNREGISTERED, Admission
from pit.config import AdmissionConfig

ROOT = "casino/demo/paigow/"
CONFIG = AdmissionConfig(
    burst_messages=50, messages_per_s=10, burst_bytes=100_000, bytes_per_s=20_000
)

arrivals = st.lists(
    st.tuples(st.floats(0, 2.0), st.integers(0, 60_000)),  # (seconds since the last, bytes)
    min_size=1,
    max_size=300,
)


@given(arrivals)
def test_what_one_table_gets_in_never_exceeds_its_budget(flood: list[tuple[float, int]]) -> None:
    admission = Admission(CONFIG, ROOT)
    now, admitted, admitted_bytes = 1000.0, 0, 0
    for gap, size in flood:
        now += gap
        if admission.admit(f"{ROOT}PG-07/round", size, now):
            admitted += 1
            admitted_bytes += size
    elapsed = now - 1000.0
    assert admitted <= CONFIG.burst_messages + CONFIG.messages_per_s * elapsed + 1e-6
    assert admitted_bytes <= CONFIG.burst_bytes + CONFIG.bytes_per_s * elapsed + 1e-6
    dropped = admission.take_dropped()
    assert sum(d.count for d in dropped.values()) == len(flood) - admitted
    assert set(dropped) <= {"PG-07"}
    # Another table, flooded or not beside it, still has its whole budget.
    assert admission.admit(f"{ROOT}PG-01/round", CONFIG.burst_bytes, now)


@given(st.lists(st.text("ABCXYZ0123456789-", min_size=1, max_size=8), min_size=1, max_size=200))
def test_made_up_names_share_one_small_budget(names: list[str]) -> None:
    admission = Admission(CONFIG, ROOT, registered=lambda name: name.startswith("PG-"))
    admitted = sum(admission.admit(f"{ROOT}{n}/status", 10, 0.0) for n in names)
    assert admitted <= CONFIG.burst_messages * CONFIG.unregistered_share + 1
    assert set(admission.take_dropped()) <= {UNREGISTERED}
