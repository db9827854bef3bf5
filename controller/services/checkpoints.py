"""Signed checkpoints of the journal's hash chain on MQTT (docs/audit.md), a service: just after
every round's close (once its messages had their turn) and, while events come, every ``[mqtt]
checkpoint_interval`` seconds, the chain's head signed with the checkpoint key is journaled (a
``checkpoint`` event) and queued on ``<prefix>checkpoint``. The casino keeps anchors the table
cannot rewrite, up to the last round closed. Nothing is signed while the table is in a journal
fault (nothing can be journaled).

Each checkpoint names the one before it: the row it anchored and the hash the journal holds
there now, read from the journal each time (``ChainReader``), so a history rewritten or cut
under the running table, or while it was stopped, shows at the next checkpoint
(controller/feed_signature.py ``checkpoint_link``).

What it does not protect against: a key stolen from the table computer signs whatever the thief
likes, links included; a cut after the last checkpoint is not seen by the link (the feed's
``seq`` shows it); the casino must keep its copy of the checkpoints (``audit verify --feed``) to
prove a tail that was cut.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import datetime
from typing import Any, Protocol

import structlog

from controller.clock import iso
from controller.journal.checkpoints import ChainReader, sign_checkpoint
from controller.messages import CheckpointPayload
from controller.ports import EffectSource, EventRecorder, OutboxStore, TableView
from controller.services.later import SETTLE_S
from controller.table import Effect, RoundClosed

log = structlog.get_logger(__name__)


class CheckpointHost(EffectSource, OutboxStore, TableView, EventRecorder, Protocol):
    """What checkpoints use: closed rounds, the chain's head, a journaled event of their own."""


class CheckpointService:
    name = "checkpoints"

    def __init__(self, key: bytes, key_id: str, *, interval: float, tick: float = 1.0) -> None:
        self._key = key
        self._key_id = key_id
        self.interval = interval
        self.tick = tick
        #: When the last checkpoint was made, and its own row in the journal.
        self.last: tuple[datetime, int] | None = None
        #: The row the last checkpoint anchored (its event_id) and its hash: the next names it.
        self._previous: int | None = None
        self._previous_chain: str | None = None
        self._reader: ChainReader | None = None
        self._host: CheckpointHost | None = None
        self._closed = asyncio.Event()  # a round closed since the last checkpoint
        #: The chain's head at each close not yet checkpointed.
        self._closes: deque[tuple[int, str]] = deque()

    async def run(self, host: CheckpointHost) -> None:
        self._host = host
        journal = str(host.config.journal.path)
        if journal != ":memory:":
            self._reader = ChainReader(journal)
            self._previous = self._reader.last_checkpoint()
        host.subscribe(self._on_effect)
        try:
            while True:
                await self._next(host)
        finally:
            # A table stopping right after a round still anchors its close.
            self._flush(host)
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    async def _next(self, host: CheckpointHost) -> None:
        """Wait for a close or the tick, then checkpoint."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closed.wait(), self.tick)
        if not self._closed.is_set():
            self.checkpoint(host, host.clock())
            return
        # A checkpoint is a durable commit of its own: after the round's messages had their
        # turn, never inside the listener (controller/services/later.py). Each close gets its
        # own, of the chain as it stood at that close.
        self._closed.clear()
        await asyncio.sleep(SETTLE_S)
        while self._closes:
            at_close = self._closes.popleft()
            self.checkpoint(host, host.clock(), every_round=True, position=at_close)

    def _flush(self, host: CheckpointHost) -> None:
        """The checkpoints of the closes not yet anchored, now (at stop)."""
        try:
            while self._closes:
                position = self._closes.popleft()
                self.checkpoint(host, host.clock(), every_round=True, position=position)
        except Exception as exc:  # the journal may be gone already: say so, stop anyway
            log.error("checkpoint_at_stop_failed", error=str(exc), pending=len(self._closes))

    def _on_effect(self, effect: Effect) -> None:
        # Every close anchored outside the table: the casino's copy proves the tail.
        if isinstance(effect, RoundClosed) and self._host is not None:
            position = self._host.journal.history.chain_position()  # one indexed read
            if position is not None:
                self._closes.append(position)
                self._closed.set()

    def _link(self) -> dict[str, Any]:
        """What the new checkpoint names of the one before it: its row, and the hash the
        journal holds there now (None when the row is gone: a cut tail). A journal in memory
        has no reader; its hash there is the one the last checkpoint had."""
        previous = self._previous
        if previous is None:
            return {"prev_event_id": None, "prev_chain": None}
        if self._reader is not None:
            chain = self._reader.chain_at(previous)
        else:
            chain = self._previous_chain
        return {"prev_event_id": previous, "prev_chain": chain}

    def checkpoint(
        self,
        host: CheckpointHost,
        now: datetime,
        *,
        every_round: bool = False,
        position: tuple[int, str] | None = None,
    ) -> None:
        """A checkpoint now of the chain's head (or of ``position``, the head at a round's
        close), if events came since the last (and, between rounds, if the interval passed)."""
        if host.table.fault is not None:
            return
        last = self.last
        if not every_round and last is not None and (now - last[0]).total_seconds() < self.interval:
            return
        position = position or host.journal.history.chain_position()
        if position is None or (last is not None and position[0] == last[1]):
            return
        body: dict[str, Any] = {
            "table_id": host.config.table.id,
            "event_id": position[0],
            "chain": position[1],
            "made_at": iso(now, "microseconds"),
            **self._link(),
        }
        payload = CheckpointPayload(
            **body, key_id=self._key_id, hmac=sign_checkpoint(self._key, body)
        )
        row = host.record_own("checkpoint", payload)
        if row is not None:
            self.last = (now, row)  # its own row: nothing new until another event
            self._previous, self._previous_chain = position
