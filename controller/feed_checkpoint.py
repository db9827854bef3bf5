"""A checkpoint's place in the signed feed (docs/mqtt.md "Checkpoints"): the bytes its HMAC
covers and whether a new checkpoint follows the last one a receiver holds. Pure functions of
the standard library: the journal checks its checkpoints' links at every start, with or
without MQTT, and must not load the Ed25519 library for it (``controller.feed_signature``
re-exports these as part of the feed's contract)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

#: What a checkpoint's HMAC covers; the link to the previous checkpoint, when it names one.
CHECKPOINT_FIELDS: Final = ("table_id", "event_id", "chain", "made_at")
CHECKPOINT_LINK_FIELDS: Final = ("prev_event_id", "prev_chain")


def checkpoint_hmac_bytes(body: Mapping[str, Any]) -> bytes:
    """The bytes a checkpoint's HMAC covers: ``table_id``, ``event_id``, ``chain``,
    ``made_at`` and, when it names a previous checkpoint (either field not null),
    ``prev_event_id`` and ``prev_chain``, as JSON with sorted keys and no spaces. KeyError for
    a body without the first four. (A first checkpoint, naming none, is signed as before the
    link existed.)"""
    signed = {name: body[name] for name in CHECKPOINT_FIELDS}
    if any(body.get(name) is not None for name in CHECKPOINT_LINK_FIELDS):
        signed.update({name: body.get(name) for name in CHECKPOINT_LINK_FIELDS})
    return json.dumps(signed, sort_keys=True, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True, slots=True)
class BrokenLink:
    """Why a checkpoint does not follow the last one held. ``kind``: ``rewritten`` (it names
    the same row with another hash: the history up to it changed), ``cut`` (it names an earlier
    checkpoint, or none: the journal lost its tail), ``skipped`` (it names a later checkpoint
    the receiver does not hold: one is missing from the receiver's copy), ``backwards`` (its
    own row is not after the last one's)."""

    kind: Literal["rewritten", "cut", "skipped", "backwards"]
    detail: str


def _body(checkpoint: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = checkpoint.get("payload", checkpoint)
    return payload if isinstance(payload, Mapping) else checkpoint


def checkpoint_link(last: Mapping[str, Any] | None, new: Mapping[str, Any]) -> BrokenLink | None:
    """Whether ``new`` (a checkpoint message or its payload, its signature already checked)
    follows ``last``, the newest checkpoint the receiver holds of that table (None: it holds
    none): None if it does, else the ``BrokenLink``. The same checkpoint again follows."""
    if last is None:
        return None
    old, body = _body(last), _body(new)
    row, chain = old.get("event_id"), old.get("chain")
    if body.get("event_id") == row and body.get("chain") == chain:
        return None
    prev_row, prev_chain = body.get("prev_event_id"), body.get("prev_chain")
    if not isinstance(body.get("event_id"), int) or not isinstance(row, int):
        return BrokenLink("backwards", "a checkpoint without its event_id")
    if body["event_id"] <= row:
        return BrokenLink(
            "backwards", f"its row {body['event_id']} is not after the last one's ({row})"
        )
    if prev_row == row:
        if prev_chain == chain:
            return None
        return BrokenLink(
            "rewritten",
            f"row {row} now has another hash than its checkpoint had: the journal was "
            "rewritten up to it",
        )
    if isinstance(prev_row, int) and prev_row > row:
        return BrokenLink(
            "skipped", f"it follows a checkpoint at row {prev_row} that is not held (last: {row})"
        )
    named = f"row {prev_row}" if prev_row is not None else "no checkpoint"
    return BrokenLink(
        "cut", f"it follows {named}, not the last one at row {row}: the journal lost its tail"
    )
