"""The table's journal: SQLite in WAL mode, the source of truth (docs/architecture.md).

store.py    ``Journal``, the owner of the one connection, with its parts by role
            (``rounds``, ``outbox``, ``history``, ``kept``, ``upkeep``) and its one write API,
            ``Transaction``: the event and everything it caused, in one transaction; ids and
            sequence numbers
views.py    the outbox and the history as the services see them
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
