"""The round's life (docs/rules.md §6): a deal opens it, packets or cards and the first-position
draw arrive in any order, a complete deal is checked and settled (controller/table/settle.py),
a silent deal times out, the dealer may void a round, a replayed deal is refused. No I/O."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from controller.game.deal import check_deal, position_from_dice, position_from_rng
from controller.messages import EnterDice, PositionDraw, Problem, VoidRound
from controller.table.alarms import Alarms
from controller.table.effects import (
    PACKET_SIZE,
    PACKETS,
    AlarmRaised,
    CommandReply,
    DealRecorded,
    Effect,
    RoundClosed,
    RoundOpened,
    RoundProgress,
)
from controller.table.results import problem_of
from controller.table.settle import SettlementMemo, closed_without_results, settle
from controller.table.state import (
    Phase,
    Round,
    TableEnv,
    TableState,
    deal_fingerprint,
    deal_key,
)
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    PacketDealt,
    PositionDrawn,
    StubVerified,
)

#: The alarms of a draw that was not used (an ``enter_dice`` reply says why).
DRAW_REFUSED = ("position_ignored", "position_invalid")


class Rounds:
    """Keeps ``state.rounds``: the current round, a draw held for the next deal, the deals
    remembered against a replay."""

    def __init__(self, state: TableState, env: TableEnv, alarms: Alarms) -> None:
        self.state = state
        self.env = env
        self.alarms = alarms
        self.settlements = SettlementMemo()

    # --- the deal -----------------------------------------------------------------------

    def open_round(self, device: str, shuffle_id: str = "") -> list[Effect]:
        s = self.state.rounds
        effects: list[Effect] = []
        if s.round is not None and not s.round.closed:
            effects += self.close_dead(
                s.round,
                [Problem(code="new_deal", detail="a new deal began before this one was complete")],
                "dead",
            )
        now = self.env.clock()
        r = Round(self.env.new_round_id(), s.next_seq, now, shuffle_id, device)
        r.dealer_id = self.state.floor.dealer_id
        s.next_seq += 1
        r.draw, s.pending_draw = s.pending_draw, None
        s.round = r
        effects.append(RoundOpened(r.round_id, r.round_seq, shuffle_id, now, r.draw, r.dealer_id))
        effects.append(progress(r))
        return effects

    def _current(self, device: str) -> tuple[Round, list[Effect]]:
        """The round a dealt card belongs to: the open one, or a new one if none is dealing."""
        open_round = self.state.open_round()
        if open_round is not None:
            return open_round, []
        effects = self.open_round(device)
        assert self.state.rounds.round is not None
        return self.state.rounds.round, effects

    def deal_started(self, event: DealStarted) -> list[Effect]:
        return self.open_round(event.device, event.shuffle_id)

    def packet(self, event: PacketDealt) -> list[Effect]:
        r, effects = self._current(event.device)
        r.packets.append((event.index, tuple(event.cards)))
        effects.append(progress(r))
        return effects + self._try_settle(r, ahead=True)

    def card(self, event: CardDealt) -> list[Effect]:
        r, effects = self._current(event.device)
        r.shoe_cards.append(event.card)
        effects.append(progress(r))
        return effects + self._try_settle(r, ahead=True)

    def stub(self, event: StubVerified) -> list[Effect]:
        r = self.state.open_round()
        if r is None:
            return [
                self.alarms.raise_alarm(
                    "stub_without_deal", "warning", "a stub arrived with no deal open", event.device
                )
            ]
        r.stub = tuple(event.cards)
        return self._try_settle(r)

    def deal_ended(self, event: DealEnded) -> list[Effect]:
        r = self.state.open_round()
        if r is None:
            return []
        r.ended = True
        return self._try_settle(r)

    # --- the first position -------------------------------------------------------------

    def position(self, event: PositionDrawn) -> list[Effect]:
        try:
            draw = _draw(event)
        except ValueError as exc:
            return [self.alarms.raise_alarm("position_invalid", "warning", str(exc), event.device)]
        r = self.state.open_round()
        if r is None:
            return self._hold(draw, event.device)
        if r.draw is not None:
            return [
                self.alarms.raise_alarm(
                    "position_ignored",
                    "warning",
                    f"first position already drawn ({r.draw.position}); a second draw is ignored",
                    event.device,
                    r.round_id,
                )
            ]
        r.draw = draw
        return [progress(r), *self._try_settle(r, ahead=True)]

    def _hold(self, draw: PositionDraw, device: str) -> list[Effect]:
        """Between deals the newest draw wins (the dealer re-rolled): the next deal uses it."""
        s = self.state.rounds
        replaced, s.pending_draw = s.pending_draw, draw
        if replaced is None:
            return []
        return [
            self.alarms.raise_alarm(
                "position_replaced",
                "info",
                f"a new first-position draw (position {draw.position}) replaced the unused "
                f"one (position {replaced.position}); the next deal uses position "
                f"{draw.position}",
                device,
            )
        ]

    def enter_dice(self, command: EnterDice) -> list[Effect]:
        """The dealer's dice, typed in (its round, if named, was checked by the table)."""
        effects = self.position(
            PositionDrawn(device="dealer", method="dice_manual", dice=command.dice)
        )
        rejected = [
            e for e in effects if isinstance(e, AlarmRaised) and e.payload.code in DRAW_REFUSED
        ]
        if rejected:
            return [
                CommandReply(command.request_id, command.kind, False, rejected[0].payload.detail),
                *effects,
            ]
        return [CommandReply(command.request_id, command.kind, True), *effects]

    # --- settling -----------------------------------------------------------------------

    def _try_settle(self, r: Round, *, ahead: bool = False) -> list[Effect]:
        if r.closed:
            return []
        if not r.complete():
            if ahead:
                self._work_out_ahead(r)
            return []
        packets = r.dealt_packets()
        check = check_deal(packets, r.stub_cards())
        if check.status != "ok":
            effects: list[Effect] = []
            if check.alarm:
                integrity = ("duplicate_card", "foreign_card", "second_joker")
                detail = "; ".join(p.detail for p in check.reasons if p.code in integrity)
                effects.append(
                    self.alarms.raise_alarm(
                        "deck_integrity", "critical", detail, r.source, r.round_id
                    )
                )
            reasons = [problem_of(p) for p in check.reasons]
            return effects + self.close_dead(r, reasons, check.status)
        fingerprint = deal_fingerprint(packets, r.stub_cards())
        repeated = self._repeat_of(r.shuffle_id, fingerprint)
        if repeated:
            return [
                self.alarms.raise_alarm(
                    "deck_integrity", "critical", repeated, r.source, r.round_id
                ),
                *self.close_dead(r, [Problem(code="replayed_deal", detail=repeated)], "dead"),
            ]
        if r.draw is None:
            return [progress(r)]
        self.state.rounds.deals.remember(r.round_seq, r.shuffle_id, fingerprint)
        floor = self.state.floor
        payload = settle(
            r,
            packets,
            self.env.settings,
            floor.occupied,
            floor.wagers,
            self.env.clock(),
            self.settlements,
        )
        r.phase = Phase.SETTLED
        return [DealRecorded(r.round_id, r.shuffle_id, fingerprint), RoundClosed(payload)]

    def _work_out_ahead(self, r: Round) -> None:
        """With every packet in and the first position known, only the stub is missing: work
        the settlement out now, so the stub's event (the one the dealer and the casino wait
        on) only checks the deck and takes it (``settlements`` holds it while the packets,
        the position, the settings, the seats and the wagers stay the same). A deal that
        cannot be settled is found and reported at the stub, as before."""
        packets = r.dealt_packets()
        if r.draw is None or len(packets) < PACKETS or any(len(p) != PACKET_SIZE for p in packets):
            return
        floor = self.state.floor
        try:
            self.settlements.get(
                packets, r.draw.position, self.env.settings, floor.occupied, floor.wagers
            )
        except Exception:  # not this event's to report: the stub's settlement finds it again
            return

    def _repeat_of(self, shuffle_id: str, fingerprint: str) -> str:
        """Why a deal repeats an earlier one ("" if it does not)."""
        deals = self.state.rounds.deals
        earlier = deals.get("deals", deal_key(fingerprint))
        if earlier is not None:
            return (
                f"replayed deal: the same cards in the same order as round #{earlier}; "
                "no real shuffle repeats a deck"
            )
        earlier = deals.get("shuffles", deal_key(shuffle_id)) if shuffle_id else None
        if earlier is not None:
            return f"replayed deal: shuffle id {shuffle_id} was already dealt in round #{earlier}"
        return ""

    def close_dead(
        self, r: Round, reasons: list[Problem], status: Literal["dead", "misdeal", "void"]
    ) -> list[Effect]:
        payload = closed_without_results(r, reasons, status, self.env.settings, self.env.clock())
        revises = r.settled
        if status == "void":
            r.phase = Phase.VOIDED_AFTER_SETTLEMENT if revises else Phase.VOID
        else:
            r.phase = Phase.DEAD
        return [RoundClosed(payload, revises_settled=revises)]

    def tick(self, now: datetime) -> list[Effect]:
        r = self.state.open_round()
        timeout = self.env.settings.deal_timeout
        if r is None or r.complete() or now - r.opened_at < timeout:
            return []
        detail = f"no card for {int(timeout.total_seconds())} s mid-deal"
        problem = Problem(
            code="deal_timeout", detail=detail + "; fewer than seven cards reached a position"
        )
        return [
            self.alarms.raise_alarm("deal_timeout", "critical", detail, r.source, r.round_id),
            *self.close_dead(r, [problem], "dead"),
        ]

    def void(self, command: VoidRound) -> list[Effect]:
        r = self.state.rounds.round
        if r is None or (command.round_id is not None and command.round_id != r.round_id):
            raise ValueError(f"no round {command.round_id or ''} to void".replace("  ", " "))
        if r.voided or (r.closed and not r.settled):
            raise ValueError(f"round {r.round_id} is already closed as dead or void")
        note = " after settlement: its results are void" if r.settled else ""
        by = f" by {command.by}" if command.by else ""
        return [
            CommandReply(command.request_id, "void_round", True, data={"round_id": r.round_id}),
            *self.close_dead(r, [Problem(code="void", detail=command.reason)], "void"),
            self.alarms.raise_alarm(
                "round_voided",
                "warning",
                f"round {r.round_id} voided{by}{note}: {command.reason}",
                None,
                r.round_id,
                by=command.by,
            ),
        ]


def _draw(event: PositionDrawn) -> PositionDraw:
    """The first-position draw an event gives; ValueError if it gives none."""
    if event.method in ("dice", "dice_manual"):
        if event.dice is None:
            raise ValueError("dice result without dice")
        position = position_from_dice(*event.dice)
    else:
        if event.number is None:
            raise ValueError("RNG result without a number")
        position = position_from_rng(event.number)
    # A dice draw carries its dice; ``number`` is the RNG's alone (readers may echo one).
    number = None if event.method in ("dice", "dice_manual") else event.number
    return PositionDraw(method=event.method, number=number, dice=event.dice, position=position)


def progress(r: Round) -> RoundProgress:
    """How far a deal has got, for the display."""
    packets = len(r.dealt_packets()) if r.packets else len(r.shoe_cards) // PACKET_SIZE
    if not r.complete():
        waiting = "cards"
    elif r.draw is None:
        waiting = "position"
    else:
        waiting = ""
    return RoundProgress(
        r.round_id,
        packets,
        sum(len(p) for _, p in r.packets) + len(r.shoe_cards),
        r.draw,
        waiting,
    )
