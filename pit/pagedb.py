"""The pit page's own database connection, in a thread of its own (never the ingest's): every
read and write of the page goes through :meth:`PageDatabase.call`; a failed call drops the
connection, so the next one reconnects (the database restarted, or went away for a while)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pit.db import name_thread
from pit.store import Store

T = TypeVar("T")


class PageDatabase:
    def __init__(self, make_store: Callable[[], Store]) -> None:
        self.make_store = make_store
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="pit-web-db", initializer=name_thread("pit-page-db")
        )
        self._store: Store | None = None
        self._probe: asyncio.Future[Any] | None = None

    def _open(self) -> Store:
        if self._store is None:
            self._store = self.make_store()
        return self._store

    async def call(self, fn: Callable[[Store], T]) -> T:
        def call() -> T:
            try:
                return fn(self._open())
            except Exception:
                if self._store is not None:  # the database went away: reconnect next time
                    self._store.close()
                    self._store = None
                raise

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def answers(self, within: float = 3.0) -> bool:
        """Whether the connection answers ``SELECT 1`` within ``within`` s (a probe still
        running from the last ask is waited for, not doubled)."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self.call(lambda s: s.one("SELECT 1")))
        try:
            await asyncio.wait_for(asyncio.shield(self._probe), within)
        except Exception:  # down, or too slow to count as up
            return False
        return True

    async def close(self) -> None:
        def close() -> None:
            if self._store is not None:
                self._store.close()
                self._store = None

        await asyncio.get_running_loop().run_in_executor(self._executor, close)
        self._executor.shutdown(wait=True)
