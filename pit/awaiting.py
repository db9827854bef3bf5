"""Messages that wait for their key (issue 39; docs/pit.md §4): a message refused only because
the key that signed it is not registered for its table — the table started before IT added its
line, or the wrong config's key was registered first — is kept whole in ``awaiting_key`` beside
its reject. When the keys file gains that key (``FeedKeys.refresh`` sees its content change),
the next batch judges those messages again, oldest first, ahead of its own: the ones the key
vouches for are stored as if they had just come, so the casino's copy begins where the table's
feed began, with no hole. Meanwhile the table's tile and page say how many wait.

Bounded: at most ``per_table`` messages wait for one table (a flood under a made-up name cannot
fill the database); past that a refused message is only a reject, and the hole it leaves is
the table's to fill on the pit's ``resend`` like any lost seq. What it does not do: judge a
message again for any other refusal (a forgery stays a reject), or register a key by itself."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pit.db import Incoming

#: How many waiting messages one batch takes (the rest come with the next batches).
TAKE = 2000

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
Execute = Callable[[str, Sequence[Any]], Any]
#: A table's registered keys by key id, or None (``FeedKeys.for_table``).
KeysOf = Callable[[str], Mapping[str, Any] | None]


class AwaitingKeys:
    """The ``awaiting_key`` table, through the store's connection (``all`` and ``x``)."""

    def __init__(self, query: Query, execute: Execute, per_table: int = 20_000) -> None:
        self.query = query
        self.execute = execute
        self.per_table = per_table

    def keep(self, item: Incoming, table_id: str, key_id: str) -> bool:
        """Keep a message refused for its unregistered key; False past the table's bound."""
        rows = self.query("SELECT count(*) FROM awaiting_key WHERE table_id = ?", (table_id,))
        if rows and int(rows[0][0]) >= self.per_table:
            return False
        self.execute(
            "INSERT INTO awaiting_key (id, table_id, key_id, topic, received_at, retained, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                uuid.uuid4().hex,
                table_id,
                key_id,
                item.topic,
                item.received_at,
                int(item.retained),
                item.payload.decode("utf-8", "replace"),
            ),
        )
        return True

    def due(self, registered: KeysOf) -> list[tuple[str, Incoming]]:
        """The waiting messages whose key is now registered for their table (``registered``:
        a table's keys by key id, or None), oldest first, at most :data:`TAKE`: (row id,
        the message as it came)."""
        pairs = self.query("SELECT DISTINCT table_id, key_id FROM awaiting_key", ())
        found: list[tuple[str, Incoming]] = []
        for table_id, key_id in pairs:
            if key_id not in (registered(str(table_id)) or {}):
                continue
            for row_id, topic, received_at, retained, body in self.query(
                "SELECT id, topic, received_at, retained, body FROM awaiting_key "
                "WHERE table_id = ? AND key_id = ? ORDER BY received_at LIMIT ?",
                (table_id, key_id, TAKE),
            ):
                item = Incoming(str(topic), str(body).encode(), bool(retained), float(received_at))
                found.append((str(row_id), item))
        found.sort(key=lambda f: f[1].received_at)
        return found[:TAKE]

    def taken(self, row_ids: Sequence[str]) -> None:
        """Remove the messages a batch judged again (in its transaction)."""
        for row_id in row_ids:
            self.execute("DELETE FROM awaiting_key WHERE id = ?", (row_id,))
