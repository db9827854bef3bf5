"""The narrow views of the journal that services use (controller/ports.py names them): the
MQTT publisher drains the ``Outbox`` (``journal.outbox``); the pages, the checkpoints, game
protection and the recall read the ``History`` (``journal.history``). Neither can open a
transaction: every write goes through the daemon (controller/recorder.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from controller.journal.store import HourCount, JournalStats, OutboxRow, RoundRecord


class Outbox(Protocol):
    """The journal's outbox, as the MQTT publisher drains it."""

    def message_seq(self) -> int: ...

    def pending(self, limit: int = 100) -> list[OutboxRow]: ...

    def pending_through(self, limit: int = 100) -> tuple[list[OutboxRow], int]: ...

    def on_commit(self, listener: Callable[[list[OutboxRow]], None]) -> Callable[[], None]: ...

    def count(self) -> int: ...

    def ack_many(self, msg_ids: Sequence[str]) -> int: ...

    def mark_attempts(self, msg_ids: Sequence[str]) -> None: ...

    def mark_replay(self) -> int: ...

    def requeue(self, first: int, last: int) -> tuple[int, int | None]: ...


class History(Protocol):
    """The journal's record, as the pages read it."""

    @property
    def table_id(self) -> str: ...

    def get_round(self, round_id: str) -> RoundRecord | None: ...

    def recent_rounds(self, limit: int = 50, offset: int = 0) -> list[RoundRecord]: ...

    def chain_position(self) -> tuple[int, str] | None:
        """The hash chain's head: the last event's row and link."""
        ...

    def round_counts_by_hour(self, since: datetime | None = None) -> list[HourCount]: ...

    def stats(self) -> JournalStats: ...

    def recent_command_ids(self, since: str) -> list[tuple[str, str]]: ...


class JournalView(Protocol):
    """The journal as a service sees it: its outbox and its history, and the file's ``path``
    (queries that take a while open it read-only in a thread)."""

    @property
    def path(self) -> str: ...

    @property
    def table_id(self) -> str: ...

    @property
    def outbox(self) -> Outbox: ...

    @property
    def history(self) -> History: ...

    def new_round_id(self) -> str: ...
