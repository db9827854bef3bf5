"""How a link to the broker ends: a stop that the cancel race swallowed is raised again, and a
link the broker drops leaves no exception behind."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from simulators.mosquitto import Mosquitto


async def test_a_swallowed_stop_is_raised_again() -> None:
    # Python 3.11's wait_for can swallow a cancel that arrives with the reply it awaited.
    from controller.mqtt.publisher import _raise_if_stopping

    @dataclass
    class Stopping:  # the one port it uses (controller/ports.py Lifecycle)
        stopping: asyncio.Event = field(default_factory=asyncio.Event)

    daemon = Stopping()
    reached: list[str] = []

    async def session() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            reached.append("swallowed")  # what the race inside wait_for does
        _raise_if_stopping(daemon)
        reached.append("went on")

    _raise_if_stopping(daemon)  # not stopping: nothing happens
    task = asyncio.create_task(session())
    await asyncio.sleep(0)
    daemon.stopping.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached == ["swallowed"]


async def test_a_link_the_broker_drops_leaves_no_exception_behind(broker: Mosquitto) -> None:
    """The broker dies under a connected client: leaving the client must not leave an
    unretrieved exception for asyncio to log (with a traceback) when it is collected."""
    import gc

    from controller.mqtt.client import Client

    seen: list[object] = []
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context.get("message")))
    try:
        client = Client("127.0.0.1", broker.port)
        async with client:
            await broker.kill()
            # The client reads the broker's end on loopback within a loop turn or two; nothing
            # public says so without reading the exception this test is about, so it waits
            # generously (with aiomqtt's own client this logs "never retrieved").
            await asyncio.sleep(0.5)
        del client
        gc.collect()
        await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert seen == []
