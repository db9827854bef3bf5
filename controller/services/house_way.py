"""The House Way's pattern table read once at start, in a thread (about a third of a second),
not at the first round's settlement, where it held that round's result back (issue 32)."""

from __future__ import annotations

import asyncio

from controller.ports import Host


class HouseWayWarmup:
    """Reads the way's table and ends; a way without one (the rule code) has nothing to read."""

    name = "house_way"

    async def run(self, host: Host) -> None:
        settings = host.table.settings
        if settings.way is not None:
            await asyncio.to_thread(settings.way.cache, settings.rules)
