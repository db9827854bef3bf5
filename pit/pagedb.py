"""The pit page's own database connection, in a thread of its own (never the ingest's): every
read and write of the page goes through :meth:`PageDatabase.call`; a failed call drops the
connection, so the next one reconnects (the database restarted, or went away for a while)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pit.db import Database, Limits, name_thread
from pit.pages import PageQueries
from pit.sessions import Sessions

T = TypeVar("T")


class PageStore:
    """What the page (and the CLI) reads and writes, on a connection of its own: its queries
    (``pages``) and its sessions, commands and acknowledgements (``sessions``). Never the
    ingest's store: nothing here judges, projects or holds a batch."""

    def __init__(self, url: str, limits: Limits | None = None) -> None:
        self.db = Database(url)
        self.pages = PageQueries(self.db, limits)
        self.sessions = Sessions(self.db)

    def close(self) -> None:
        self.db.close()


class PageDatabase:
    def __init__(self, make_store: Callable[[], PageStore]) -> None:
        self.make_store = make_store
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="pit-web-db", initializer=name_thread("pit-page-db")
        )
        self._store: PageStore | None = None
        self._probe: asyncio.Future[Any] | None = None
        #: told each call's time in seconds (``pit.metrics``), when the pit serves metrics
        self.timed: Callable[[float], None] | None = None

    def _open(self) -> PageStore:
        if self._store is None:
            self._store = self.make_store()
        return self._store

    async def call(self, fn: Callable[[PageStore], T]) -> T:
        def call() -> T:
            started = time.perf_counter()
            try:
                return fn(self._open())
            except Exception:
                if self._store is not None:  # the database went away: reconnect next time
                    self._store.close()
                    self._store = None
                raise
            finally:
                if self.timed is not None:
                    self.timed(time.perf_counter() - started)

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def answers(self, within: float = 3.0) -> bool:
        """Whether the connection answers ``SELECT 1`` within ``within`` s (a probe still
        running from the last ask is waited for, not doubled)."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self.call(lambda s: s.db.one("SELECT 1")))
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
