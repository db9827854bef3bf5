"""Simulated tables' feeds, made in-process with the table's own message models and envelope
(``controller.messages``), its hash-chain link (``controller.journal.store.chain_link``) and
checkpoint signature (``controller.journal.checkpoints.sign_checkpoint``): schema-valid,
sequenced, chained and checkpointed, and signed (``controller.feed_signature.FeedSigner``) as a
real table sends them. For the pit's benchmark (bench/pit.py) and tests, where a thousand real
daemons would not fit on the machine.

Each simulated table signs with its own Ed25519 key, derived from its table id
(:func:`sim_signer`) so that a test, the benchmark and the pit they start agree on it without
passing files around; :class:`SimulatedKeys` registers every such key with an in-process pit,
:func:`sim_keys_text` writes them as a ``[record] feed_keys_file``. Anyone can derive these
keys: they are for simulated tables only, never a real table's.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.feed_signature import FeedSigner, keyring
from controller.journal.checkpoints import sign_checkpoint
from controller.journal.store import chain_link
from controller.messages import (
    AlarmPayload,
    CheckpointPayload,
    DeviceIdentity,
    DevicePayload,
    Payload,
    PlayerPayload,
    RoundPayload,
    StatusPayload,
    envelope,
)
from pit.keys import FeedKeys, Keyring, keys_line

_RANKS = "23456789TJQKA"
_SUITS = "cdhs"
DECK = [r + s for r in _RANKS for s in _SUITS] + ["JK"]
SIDE_OUT = {"line": "other", "pays": -1, "wager": None, "win": None}


def _side(wager: int | None, pays: int) -> dict[str, Any]:
    win = None if wager is None else (wager * pays if pays > 0 else -wager)
    line = "other" if pays < 0 else "straight"
    return {"line": line, "pays": pays, "wager": wager, "win": win}


@dataclass
class SimTable:
    """One table's feed: ``next_round`` returns the envelopes a settled (or dead) round makes:
    the round, sometimes a player's setting or an alarm, and a signed checkpoint."""

    table_id: str
    site: str = "demo"
    key: bytes = b"\x00" * 32
    seed: int = 0
    seq: int = 0
    round_seq: int = 0
    event_id: int = 0
    chain: str = ""
    #: the last checkpoint's row and hash, which the next one names
    last_checkpoint: tuple[int, str] | None = None
    dealer_id: str = "D-100"
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.rng.seed(self.seed or hash(self.table_id))

    @property
    def prefix(self) -> str:
        return f"casino/{self.site}/paigow/{self.table_id}/"

    def _id(self) -> str:
        return f"{self.table_id}-{uuid.uuid4().hex[:26].upper()}"

    def _events(self, n: int, kind: str, round_id: str | None, at: str) -> None:
        """The journal's chained events the table would have written (the chain only)."""
        for _ in range(n):
            self.event_id += 1
            text = json.dumps({"n": self.event_id}, separators=(",", ":"))
            self.chain = chain_link(self.chain, self.event_id, round_id, at, kind, text)

    def _envelope(
        self, payload: Payload, now: datetime, *, sequenced: bool = True
    ) -> tuple[str, dict[str, Any]]:
        if sequenced:
            self.seq += 1
        topic = payload.topic if isinstance(payload, RoundPayload) else payload.TOPIC
        if isinstance(payload, DevicePayload):
            topic = f"device/{payload.device}"
        body = envelope(payload, msg_id=self._id(), table_id=self.table_id, seq=self.seq, time=now)
        return self.prefix + topic, body

    def status(self, now: datetime, state: str = "online") -> tuple[str, dict[str, Any]]:
        payload = StatusPayload(
            state=state,  # type: ignore[arg-type]
            table_open=True,
            devices={"shuffler": True, "rng": True},
            software_version="0.1.0",
            dealer_id=self.dealer_id,
        )
        return self._envelope(payload, now, sequenced=False)

    def devices(
        self, now: datetime, identities: Mapping[str, DeviceIdentity] | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The shuffler's and the RNG box's status, each with its identity if given."""
        known = identities or {}
        return [
            self._envelope(
                DevicePayload(device=d, online=True, detail="simulated", identity=known.get(d)),
                now,
            )
            for d in ("shuffler", "rng")
        ]

    def next_round(self, now: datetime, wager: int | None = 10) -> list[tuple[str, dict[str, Any]]]:
        """The envelopes of the next round: the round, sometimes a player's setting (one in
        five settled rounds) or an alarm (one in fifty), and a signed checkpoint."""
        self.round_seq += 1
        at = now.astimezone(UTC).isoformat().replace("+00:00", "Z")
        round_id = self._id()
        payload, seats = self._round(round_id, at, wager)
        self._events(12, "packet_dealt", round_id, at)
        out = [self._envelope(payload, now)]
        if seats and self.rng.random() < 0.2:
            out.append(self._envelope(self._player(round_id, seats[0]), now))
        if self.rng.random() < 0.02:
            alarm = AlarmPayload(
                code="deal_timeout", severity="warning", detail="simulated", alarm_id=self._id()
            )
            out.append(self._envelope(alarm, now))
        out.append(self._envelope(self._checkpoint(at), now))
        return out

    def _round(
        self, round_id: str, at: str, wager: int | None
    ) -> tuple[RoundPayload, list[dict[str, Any]]]:
        """A settled round of six seats, or (one in thirty-three) a dead one; and its seats."""
        cards = self.rng.sample(DECK, 49)
        dead = self.rng.random() < 0.03
        positions = [
            {"position": i + 1, "seat": "dealer" if i == 0 else str(i),
             "cards": cards[i * 7:(i + 1) * 7], "packet": i + 1}
            for i in range(7)
        ]  # fmt: skip
        seats = (
            [] if dead else [self._seat(i, cards[i * 7 : (i + 1) * 7], wager) for i in range(1, 7)]
        )
        payload = RoundPayload.model_validate(
            {
                "round_id": round_id,
                "round_seq": self.round_seq,
                "status": "dead" if dead else "settled",
                "reasons": [{"code": "short_packet", "detail": "packet 3 has 6 cards"}]
                if dead
                else [],
                "opened_at": at,
                "closed_at": at,
                "shuffle_id": f"sim-{self.round_seq:05d}",
                "card_source": "shuffler",
                "dealer_id": self.dealer_id,
                "first_position": {"method": "rng", "number": 1, "dice": None, "position": 1},
                "positions": positions,
                "dealer": None if dead else _dealer(cards[:7]),
                "seats": seats,
                "rules": {"wheel_rank": "second_highest", "ace_high_pushes_pai_gow": False},
                "paytables": {"chan_chu": "PT3", "jacks_beat": "B", "envy": "PT3"},
            }
        )
        return payload, seats

    def _seat(self, i: int, hand: list[str], wager: int | None) -> dict[str, Any]:
        pays = self.rng.choice([-1, -1, -1, -1, -1, 2, 3])
        return {
            "seat": str(i), "position": i + 1, "cards": hand, "best_hand": "a hand",
            "wagers": None, "chan_chu": _side(wager, pays), "jacks_beat": _side(None, -1),
            "push_ace_high": _side(None, -1),
            "envy": {"qualifies": False, "total": 0, "awards": []},
        }  # fmt: skip

    def _player(self, round_id: str, seat: dict[str, Any]) -> PlayerPayload:
        """Seat 1's own setting of the round."""
        return PlayerPayload.model_validate(
            {
                "round_id": round_id, "seat": "1",
                "setting": {"front": seat["cards"][:2], "back": seat["cards"][2:],
                            "rule": None, "front_hand": "f", "back_hand": "b"},
                "house_way": False, "foul": False,
                "pai_gow": {"outcome": self.rng.choice(["win", "push", "lose"]),
                            "reason": "sim", "back": "win", "front": "lose"},
                "setting_id": f"{round_id}/1/1",
            }
        )  # fmt: skip

    def _checkpoint(self, at: str) -> CheckpointPayload:
        """The signed checkpoint of the chain's head, naming the one before it."""
        body: dict[str, Any] = {
            "table_id": self.table_id,
            "event_id": self.event_id,
            "chain": self.chain,
            "made_at": at,
        }
        if self.last_checkpoint is not None:
            body["prev_event_id"], body["prev_chain"] = self.last_checkpoint
        self.last_checkpoint = (self.event_id, self.chain)
        return CheckpointPayload(
            **body, key_id="checkpoint.key", hmac=sign_checkpoint(self.key, body)
        )


def _dealer(cards: list[str]) -> dict[str, Any]:
    """The dealer's hand, set: the first two cards in front."""
    return {
        "cards": cards,
        "best_hand": "a hand",
        "two_jacks": False,
        "ace_high_pai_gow": False,
        "setting": {
            "front": cards[:2], "back": cards[2:], "rule": "NP",
            "front_hand": "a front", "back_hand": "a back",
        },
    }  # fmt: skip


@lru_cache(maxsize=4096)
def sim_signer(table_id: str) -> FeedSigner:
    """The simulated table's feed key (module text: derived from its id, for simulations)."""
    seed = hashlib.sha256(b"paigow-simfeed-key/" + table_id.encode("utf-8")).digest()
    return FeedSigner(Ed25519PrivateKey.from_private_bytes(seed))


class SimulatedKeys(FeedKeys):
    """Every simulated table's key registered (any table id: its :func:`sim_signer`), unless
    the keys given or read (``FeedKeys``: a real table daemon's) name the table."""

    def for_table(self, table_id: str) -> Keyring | None:
        registered = super().for_table(table_id)
        if registered is not None:
            return registered
        return keyring([sim_signer(table_id).public_key])


def sim_keys_text(table_ids: list[str]) -> str:
    """A ``[record] feed_keys_file`` registering these simulated tables' keys."""
    return "".join(keys_line(t, sim_signer(t).public_key) for t in table_ids)


def unsigned(body: dict[str, Any]) -> bytes:
    """The message's bytes without a signature (what the pit refuses)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def wire(body: dict[str, Any], signer: FeedSigner | None = None) -> bytes:
    """The message's bytes as the table publishes them: signed by ``signer``, by default the
    simulated key of the table it names."""
    if signer is None:
        signer = sim_signer(str(body.get("table_id")))
    return signer.sign(body)
