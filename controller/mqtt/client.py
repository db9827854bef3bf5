"""aiomqtt's client, leaving no exception behind when the broker drops the link.

aiomqtt 2.5 records an unexpected disconnection as the exception of a future; its ``__aexit__``
returns early on a link already lost without looking at that future, so asyncio logs "Future
exception was never retrieved" (with a traceback) when it is collected, e.g. as a demo exits
after its broker went away. Every client of ours is this one.
"""

from __future__ import annotations

from types import TracebackType

import aiomqtt


class Client(aiomqtt.Client):
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await super().__aexit__(exc_type, exc, tb)
        finally:
            lost = self._disconnected
            if lost.done() and not lost.cancelled():
                lost.exception()  # the reason is already reported where the link was used
