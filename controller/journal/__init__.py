"""The table's journal: SQLite in WAL mode, the source of truth (docs/architecture.md).

store.py    the schema, ``Journal`` and its one write API, ``Transaction``: the event and
            everything it caused, in one transaction; the outbox; ids and sequence numbers
history.py  the rounds as the supervisor reads them back
maintenance.py  check, salvage and archive the file (docs/journal.md); retention.py runs the
            archive in the daemon
"""

from controller.journal.schema import MIGRATIONS, SCHEMA_VERSION, Migration
from controller.journal.store import (
    CLOSED_STATUSES,
    EventRecord,
    HourCount,
    Journal,
    JournalError,
    JournalStats,
    MessageStamp,
    OutboxMessage,
    OutboxRow,
    Payload,
    PayloadBuilder,
    RoundRecord,
    RoundStatus,
    Synchronous,
    Transaction,
    VoidedRound,
    to_json,
)

__all__ = [
    "CLOSED_STATUSES",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "EventRecord",
    "HourCount",
    "Journal",
    "JournalError",
    "JournalStats",
    "MessageStamp",
    "Migration",
    "OutboxMessage",
    "OutboxRow",
    "Payload",
    "PayloadBuilder",
    "RoundRecord",
    "RoundStatus",
    "Synchronous",
    "Transaction",
    "VoidedRound",
    "to_json",
]
