"""aiomqtt's client, leaving no exception behind when the broker drops the link.

aiomqtt 2.5 records an unexpected disconnection as the exception of a future; its ``__aexit__``
returns early on a link already lost without looking at that future, so asyncio logs "Future
exception was never retrieved" (with a traceback) when it is collected, e.g. as a demo exits
after its broker went away. Its public message iterator is what reads that exception: once the
client has left its context, the iterator raises ``MqttError`` at once, from the disconnection's
cause (or from nothing, after a clean DISCONNECT), and that retrieves it. Every subscriber of
ours (the demo's feed, ``paigow-table monitor``) is this one; the table's own link is
:mod:`controller.mqtt.session`.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

import aiomqtt

#: How long leaving may wait for the iterator to say the link is gone (it says so at once).
_SETTLE = 1.0


class Client(aiomqtt.Client):
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await super().__aexit__(exc_type, exc, tb)
        # Left cleanly: the iterator raises now, and reads a lost link's exception as it does
        # (a message still queued is read instead, and dropped: the client is gone).
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            async with asyncio.timeout(_SETTLE):
                async for _message in self.messages:
                    pass
