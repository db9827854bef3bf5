"""Work a service does after a round, kept off the path from the last card to the commit to the
publish (issue 32): a listener only notes what happened; the service's own task waits until the
round's messages have had their turn on the loop and no deal is under way, then does the work.

Why: every listener runs inside the consumer's callback, after the commit but before the MQTT
publisher and the page's stream get the loop. Game protection's statistics (up to hundreds of
milliseconds for some rounds), its saved state (~150 KB, every 25 rounds) and a checkpoint's own
durable commit there held the round's message back by as much.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from controller.ports import TableView

#: How long the round's messages get before deferred work runs (the publisher needs a few turns
#: of the loop: read the outbox, write the packet when the socket is writable).
SETTLE_S = 0.05
#: Deferred work waits for a deal under way at most this long, then runs anyway.
LONGEST_S = 10.0


class IdleHost(TableView, Protocol):
    """What waiting for a quiet moment needs: whether a round is open."""


def dealing(host: IdleHost) -> bool:
    """Whether a round is open (its cards are coming): deferred work waits for its close."""
    current = host.table.round
    return current is not None and not getattr(current, "closed", True)


async def quiet_moment(
    host: IdleHost, *, settle: float = SETTLE_S, longest: float = LONGEST_S
) -> None:
    """Return once ``settle`` seconds passed with no round open (or after ``longest``)."""
    deadline = time.monotonic() + longest
    await asyncio.sleep(settle)
    while dealing(host) and time.monotonic() < deadline:
        await asyncio.sleep(settle)
