"""Settlement and positions, pure functions of a complete deal (docs/rules.md §6): the dealer
set by the House Way (or two Jacks), every seat's side wagers, and the positions a round's
packets went to. No state of their own, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from controller.game.cards import card_texts
from controller.game.deal import assign_packets
from controller.game.hands import HandValue, evaluate, is_ace_high_pai_gow
from controller.game.setting import Setting
from controller.game.wagers import (
    chan_chu,
    dealer_has_two_jacks,
    jacks_beat,
    push_ace_high,
    settle_envy,
)
from controller.messages import (
    DealerOut,
    EnvyAwardOut,
    EnvyOut,
    PositionCards,
    Problem,
    RoundPayload,
    SeatOut,
    Wagers,
)
from controller.table.effects import DEALER_POSITION, PACKETS
from controller.table.results import setting_out, side_out
from controller.table.state import Round, TableSettings


@dataclass(frozen=True)
class Settlement:
    """What a complete deal settles to, before it is a round's result: a pure function of the
    packets, the first position, the settings, the seats in play and their wagers
    (:func:`work_out`), so it may be worked out as soon as the last packet is in and taken at
    the stub if none of those changed (:class:`SettlementMemo`)."""

    dealer: tuple[int, ...]
    setting: Setting | None
    seat_cards: Mapping[str, tuple[int, ...]]
    positions: list[PositionCards]
    dealer_out: DealerOut
    seats: list[SeatOut]


def work_out(
    packets: Sequence[tuple[str, ...]],
    first: int,
    settings: TableSettings,
    occupied: Mapping[str, bool | None],
    wagers: Mapping[str, Wagers],
) -> Settlement:
    """The dealer set by the House Way (or two Jacks) and every seat in play settled."""
    s = settings
    by_position = assign_packets(list(packets), first)
    dealer = tuple(int(c) for c in by_position[DEALER_POSITION])
    two_jacks = dealer_has_two_jacks(dealer)
    setting = None if two_jacks else s.set_by_house_way(by_position[DEALER_POSITION])
    dealer_value = HandValue(evaluate(dealer, s.rules.wheel_high))
    seats = [
        (pos, s.seats[pos]) for pos in sorted(s.seats) if occupied.get(s.seats[pos]) is not False
    ]
    return Settlement(
        dealer=dealer,
        setting=setting,
        seat_cards={label: tuple(int(c) for c in by_position[pos]) for pos, label in seats},
        positions=positions(by_position, first, s),
        dealer_out=DealerOut(
            cards=card_texts(dealer),
            best_hand=dealer_value.name,
            two_jacks=two_jacks,
            ace_high_pai_gow=is_ace_high_pai_gow(dealer_value),
            setting=setting_out(setting) if setting else None,
        ),
        seats=seats_out(dealer, by_position, seats, settings, wagers),
    )


class SettlementMemo:
    """The last settlement worked out and what it was worked out from: :meth:`get` returns it
    only for the very same inputs (the settings object itself, equal packets, seats and
    wagers), else works it out anew. One entry: a deal is settled once."""

    def __init__(self) -> None:
        self._settings: TableSettings | None = None
        self._key: tuple[Any, ...] | None = None
        self._value: Settlement | None = None

    def get(
        self,
        packets: Sequence[tuple[str, ...]],
        first: int,
        settings: TableSettings,
        occupied: Mapping[str, bool | None],
        wagers: Mapping[str, Wagers],
    ) -> Settlement:
        key = (
            tuple(packets),
            first,
            tuple(sorted(occupied.items())),
            tuple(sorted(wagers.items())),
        )
        if self._value is not None and self._settings is settings and self._key == key:
            return self._value
        value = work_out(packets, first, settings, occupied, wagers)
        self._settings, self._key, self._value = settings, key, value
        return value


def settle(
    r: Round,
    packets: list[tuple[str, ...]],
    settings: TableSettings,
    occupied: Mapping[str, bool | None],
    wagers: Mapping[str, Wagers],
    closed_at: datetime,
    memo: SettlementMemo | None = None,
) -> RoundPayload:
    """The settled round's result; ``r`` keeps the dealer's and each seat's cards (players may
    set their own hands after) and is marked settled by the caller. ``memo``: where a
    settlement worked out ahead (at the last packet) is taken from if it still holds."""
    assert r.draw is not None
    s = settings
    if memo is None:
        worked = work_out(packets, r.draw.position, s, occupied, wagers)
    else:
        worked = memo.get(packets, r.draw.position, s, occupied, wagers)
    r.dealer_cards, r.dealer_setting = worked.dealer, worked.setting
    r.seat_cards.update(worked.seat_cards)
    return RoundPayload(
        round_id=r.round_id,
        round_seq=r.round_seq,
        status="settled",
        opened_at=r.opened_at,
        closed_at=closed_at,
        shuffle_id=r.shuffle_id,
        card_source=r.source,
        dealer_id=r.dealer_id,
        first_position=r.draw,
        positions=worked.positions,
        dealer=worked.dealer_out,
        seats=worked.seats,
        rules=s.describe_rules(),
        paytables=s.describe_paytables(),
    )


def seats_out(
    dealer: tuple[int, ...],
    by_position: Mapping[int, tuple[Any, ...]],
    seats: list[tuple[int, str]],
    settings: TableSettings,
    wagers: Mapping[str, Wagers],
) -> list[SeatOut]:
    """Every seat in play settled: Chan Chu, Jacks Beat, Push Ace High and Envy."""
    s, rules = settings, settings.rules
    envy = None
    if s.envy is not None:
        envy = settle_envy(
            {
                label: (by_position[pos], wagers.get(label, Wagers()).chan_chu)
                for pos, label in seats
            },
            s.envy,
        )
    out: list[SeatOut] = []
    for pos, label in seats:
        cards = tuple(int(c) for c in by_position[pos])
        w = wagers.get(label)
        cc = chan_chu(cards, s.chan_chu)
        jb = jacks_beat(dealer, cards, s.jacks_beat, rules)
        pah = push_ace_high(dealer, cards, rules)
        e = envy[label] if envy is not None else None
        out.append(
            SeatOut(
                seat=label,
                position=pos,
                cards=card_texts(cards),
                best_hand=HandValue(evaluate(cards, rules.wheel_high)).name,
                wagers=w,
                chan_chu=side_out(cc.line, cc.pays, w.chan_chu if w else None),
                jacks_beat=side_out(jb.line, jb.pays, w.jacks_beat if w else None),
                push_ace_high=side_out(pah.line, pah.pays, w.push_ace_high if w else None),
                envy=EnvyOut(
                    qualifies=e.qualifies,
                    total=e.total,
                    awards=[
                        EnvyAwardOut(from_seat=a.from_seat, line=a.line, amount=int(a.amount))
                        for a in e.awards
                    ],
                )
                if e
                else None,
            )
        )
    return out


def positions(
    by_position: Mapping[int, tuple[Any, ...]], first: int, settings: TableSettings
) -> list[PositionCards]:
    """Each position's cards and the packet (1–7 in dealing order) it got."""
    return [
        PositionCards(
            position=pos,
            seat="dealer" if pos == DEALER_POSITION else settings.seats.get(pos, str(pos)),
            cards=card_texts(cards),
            packet=((pos - first) % PACKETS) + 1,
        )
        for pos, cards in sorted(by_position.items())
    ]


def dead_positions(r: Round, settings: TableSettings) -> list[PositionCards]:
    """The packets of a round closed without results, where they went if the position is
    known (else ``packet N``)."""
    out: list[PositionCards] = []
    for packet, cards in enumerate(r.dealt_packets(), start=1):
        # Packets are counted 1–7 in dealing order everywhere, as dealers count them.
        pos = ((r.draw.position + packet - 2) % PACKETS) + 1 if r.draw else packet
        label = (
            "dealer"
            if r.draw and pos == DEALER_POSITION
            else (settings.seats.get(pos, str(pos)) if r.draw else f"packet {packet}")
        )
        out.append(PositionCards(position=pos, seat=label, cards=list(cards), packet=packet))
    return out


def closed_without_results(
    r: Round,
    reasons: list[Problem],
    status: Literal["dead", "misdeal", "void"],
    settings: TableSettings,
    closed_at: datetime,
) -> RoundPayload:
    """The result of a round closed dead, misdealt or void."""
    return RoundPayload(
        round_id=r.round_id,
        round_seq=r.round_seq,
        status=status,
        reasons=reasons,
        opened_at=r.opened_at,
        closed_at=closed_at,
        shuffle_id=r.shuffle_id,
        card_source=r.source,
        dealer_id=r.dealer_id,
        first_position=r.draw,
        positions=dead_positions(r, settings),
        rules=settings.describe_rules(),
        paytables=settings.describe_paytables(),
    )
