"""Work is admitted before it is done (issue 40, F1): each message the pit takes off the broker is
charged to the table its topic names — messages and bytes, two token buckets — before it is
parsed, verified or stored. One over its table's budget costs its bytes and nothing more: it is
acknowledged with its batch, counted (``reject_counts``, reason ``flood``) and its table gets
one ``flood`` record alarm per burst; the other tables' messages keep their pace. Names the keys
file does not register share one small budget (anyone may make names up).

The defaults are many times what a table sends (a round's few messages of a few KB every
half-minute; docs/performance.md) and let a table replay a long backlog after an outage in a
burst; what a table sends beyond them is dropped here and asked of it again later (a gap, then
the pit's signed ``resend``), never lost. What it does not protect against: a flood that stays
within the budget of a name it uses (a table's own account flooding its own topic at the
budget's rate costs the pit that rate); the broker's own limits (``message_size_limit``, a
client's queue and in-flight window) guard what reaches the pit at all (docs/pit.md §8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pit.config import AdmissionConfig

#: The budget all names the keys file does not register share.
UNREGISTERED = "(unregistered names)"
#: Tables with a bucket at most (a flood of names: the oldest are forgotten, refilled anew).
BUCKETS = 20_000


@dataclass
class _Bucket:
    messages: float
    bytes: float
    at: float


@dataclass
class Dropped:
    """What admission dropped of one table since the last batch took it: count and times."""

    count: int = 0
    bytes: int = 0
    first: float = 0.0
    last: float = 0.0


@dataclass
class Admission:
    """Each table's budget (``[admission]``); ``registered``: whether a name has a key."""

    config: AdmissionConfig
    root: str
    registered: Callable[[str], bool] = lambda _name: True
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    #: what was dropped, by table, until ``take_dropped``
    dropped: dict[str, Dropped] = field(default_factory=dict)
    dropped_total: int = 0

    def table_of(self, topic: str) -> str:
        """The table a topic names, or the shared name of the unregistered ones."""
        name = topic[len(self.root) :].split("/", 1)[0] if topic.startswith(self.root) else ""
        return name if name and self.registered(name) else UNREGISTERED

    def admit(self, topic: str, size: int, now: float) -> bool:
        """Whether the message may be judged and stored; a False one is counted as dropped."""
        table = self.table_of(topic)
        c = self.config
        share = c.unregistered_share if table == UNREGISTERED else 1.0
        cap_m, cap_b = c.burst_messages * share, c.burst_bytes * share
        bucket = self._buckets.get(table)
        if bucket is None:
            if len(self._buckets) >= BUCKETS:
                for old in list(self._buckets)[: BUCKETS // 2]:
                    del self._buckets[old]
            bucket = self._buckets[table] = _Bucket(cap_m, cap_b, now)
        elapsed = max(0.0, now - bucket.at)
        bucket.at = now
        bucket.messages = min(cap_m, bucket.messages + elapsed * c.messages_per_s * share)
        bucket.bytes = min(cap_b, bucket.bytes + elapsed * c.bytes_per_s * share)
        if bucket.messages >= 1 and bucket.bytes >= size:
            bucket.messages -= 1
            bucket.bytes -= size
            return True
        d = self.dropped.setdefault(table, Dropped(first=now))
        d.count += 1
        d.bytes += size
        d.last = now
        self.dropped_total += 1
        return False

    def take_dropped(self) -> dict[str, Dropped]:
        """What was dropped since the last call (for the next batch's transaction)."""
        taken, self.dropped = self.dropped, {}
        return taken
