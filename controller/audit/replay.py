"""A journaled round dealt again by the rules engine (docs/audit.md, "verify"): a fresh
:class:`~controller.table.Table` set up with the round's own rules, paytables, seats and wagers,
and with the dealer its journal says dealt it, is fed the round's device events and the dealer's
typed-in dice, and what it closes must be what was recorded and sent. This sits above both the
journal and the table: the journal's own checks (``controller/journal/audit.py``) import neither
the table nor the rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.game.deal import DEAD_CODES, MISDEAL_CODES
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.game.setting import Rules
from controller.game.way import Way, load_way, shipped_ways
from controller.kept_state import DEALER_KEY
from controller.messages import EnterDice, Wagers
from controller.table import KeptTableState, RoundClosed, Table, TableSettings
from drivers.events import PositionDrawn, parse_event

#: Rounds the audit recomputes: decided by their own cards and draw alone.
_RECOMPUTED_REASONS = DEAD_CODES | MISDEAL_CODES
_DEAL_KINDS = frozenset(
    {"deal_started", "packet_dealt", "card_dealt", "stub_verified", "deal_ended", "position_drawn"}
)
_VOLATILE = ("opened_at", "closed_at")


def recompute_round(
    result: dict[str, Any],
    events: list[tuple[str, dict[str, Any]]],
    ways: Mapping[str, Way] | None = None,
) -> str:
    """Deal the round again from its journaled device events through the rules engine (a fresh
    :class:`~controller.table.Table` set up with the round's own rules, paytables, seats and
    wagers) and compare with what was recorded and sent. Returns "" when they agree, else the
    first field that differs."""
    table = _table_for(result, ways or {}, events)
    closed = _deal_again(table, events)
    if closed is None:
        return "the events do not complete a deal"
    for key in sorted(set(closed) | set(result)):
        if key in _VOLATILE:
            continue
        if closed.get(key) != result.get(key):
            return key
    return ""


def _table_for(
    result: dict[str, Any], ways: Mapping[str, Way], events: list[tuple[str, dict[str, Any]]]
) -> Table:
    """A fresh table set up as the recorded round was: its rules, paytables, seats and wagers,
    the dealer signed in when it opened, its id, sequence number and closing time."""
    closed_at = datetime.fromisoformat(str(result.get("closed_at")))
    table = Table(
        _settings_for(result, ways),
        new_round_id=lambda: str(result["round_id"]),
        clock=lambda: closed_at,
        next_round_seq=int(result.get("round_seq", 1)),
        kept=KeptTableState(dealer_id=_dealer_of(events)),
    )
    # The seats it settled are the seats that played: none at all when every seat was set
    # unoccupied (a dead round settles none either way).
    played = {str(s["seat"]) for s in result.get("seats", [])}
    table.occupied.update({label: label in played for label in table.occupied})
    for seat in result.get("seats", []):
        if seat.get("wagers"):
            table.wagers[str(seat["seat"])] = Wagers.model_validate(seat["wagers"])
    return table


def _settings_for(result: dict[str, Any], ways: Mapping[str, Way]) -> TableSettings:
    """The settings of the table that played the recorded round (its rules, paytables, seats)."""
    rules = result.get("rules") or {}
    tables = result.get("paytables") or {}
    seats = {
        int(p["position"]): str(p["seat"])
        for p in result.get("positions", [])
        if int(p["position"]) != 1
    }
    if not seats:  # a dead round that never reached positions: its packets, in dealing order
        seats = {pos: str(pos - 1) for pos in range(2, 8)}
    return TableSettings(
        table_id=str(result.get("round_id", "")).rsplit("-", 1)[0],
        seats=seats,
        rules=Rules(
            wheel_rank=rules.get("wheel_rank", "second_highest"),
            ace_high_pushes_pai_gow=bool(rules.get("ace_high_pushes_pai_gow", False)),
        ),
        chan_chu=chan_chu_paytable(tables.get("chan_chu", "PT1")),
        jacks_beat=jacks_beat_paytable(tables.get("jacks_beat", "A")),
        envy=envy_paytable(tables["envy"]) if tables.get("envy") else None,
        way=_way_of(rules, ways),
    )


def _dealer_of(events: list[tuple[str, dict[str, Any]]]) -> str | None:
    """Who dealt the round: its own ``round_opened`` row says (the dealer signed in as it
    opened); a journal from before that row holds the chained record of the dealer signed in
    that the journal's audit puts before the round's rows."""
    dealer: str | None = None
    for kind, payload in events:
        if kind == "round_opened":
            return payload.get("dealer_id") or None
        if kind == "state_kept" and payload.get("name") == DEALER_KEY:
            dealer = str(payload.get("value") or "") or None
    return dealer


def _way_of(rules: dict[str, Any], ways: Mapping[str, Way]) -> Way | None:
    """The House Way the round was dealt by (journaled in its rules since ways became files;
    before, the filed way's rule code): one the auditor gave (``audit verify --way FILE``) or a
    shipped one, with the digest it had then."""
    name = rules.get("house_way")
    if not name:
        return None
    digest = str(rules.get("house_way_digest", ""))
    if digest in ways:
        return ways[digest]
    if name in shipped_ways() and load_way(name).digest == digest:
        return load_way(name)
    raise ValueError(
        f"the round was dealt by the way {name!r} (sha256 {digest}): give its file with "
        "audit verify --way FILE"
    )


def _deal_again(table: Table, events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The journaled device events fed to ``table``: the first round it closes, as sent (JSON);
    None when they close none."""
    closed: dict[str, Any] | None = None
    for kind, payload in events:
        if kind == "position_assigned":
            event: Any = PositionDrawn(
                device="journal",
                method=payload["method"],
                number=payload.get("number"),
                dice=payload.get("dice"),
            )
        elif kind == "command.enter_dice":  # the dealer's dice typed in mid-deal
            event = EnterDice(dice=payload["dice"])
        elif kind in _DEAL_KINDS:
            event = parse_event(payload)
        else:
            continue
        for effect in table.handle(event):
            if isinstance(effect, RoundClosed) and closed is None:
                closed = effect.payload.model_dump(mode="json")
    return closed


class RulesReplay:
    """The rules engine as the journal's audit deals a round again with; ``ways``: way files
    the casino dealt by (shipped ways are found by name)."""

    def __init__(self, ways: Sequence[Way] = ()) -> None:
        self.ways = {w.digest: w for w in ways}

    def applies(self, recorded: dict[str, Any]) -> bool:
        codes = {r.get("code") for r in recorded.get("reasons", [])}
        return codes <= _RECOMPUTED_REASONS

    def differs(self, recorded: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> str:
        return recompute_round(recorded, events, self.ways)
