"""The deal (docs/rules.md §6): who gets the first packet, and the checks on every deal.

Positions are 1–7, counted counterclockwise, position 1 being the dealer. Packets are numbered
1–7 in the order they were dealt (the first packet goes to the position the RNG or dice chose);
in Python sequences packet number n is index n - 1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from controller.game.cards import DECK, DECK_SIZE, JOKER, Card, CardError, parse_card

POSITIONS: Final = 7
PACKET_SIZE: Final = 7
STUB_SIZE: Final = 4
DEALT: Final = POSITIONS * PACKET_SIZE  # 49; the stub is the other four cards of the deck

DealStatus = Literal["ok", "dead", "misdeal"]
CardInput = str | int

# docs/rules.md §6 rule 3: a short deal kills the hands; every other fault is a misdeal.
DEAD_CODES: Final = frozenset({"short_packet", "missing_packet"})
MISDEAL_CODES: Final = frozenset(
    {"long_packet", "extra_packet", "duplicate_card", "foreign_card", "second_joker", "bad_stub"}
)
ALARM_CODES: Final = frozenset({"duplicate_card", "foreign_card", "second_joker"})


def _position(n: object, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= POSITIONS:
        raise ValueError(f"{what} must be a position 1–{POSITIONS}, got {n!r}")
    return n


def position_from_rng(n: int) -> int:
    """docs/rules.md §6: the RNG's number 1–7 is the position that receives the first packet."""
    return _position(n, "the RNG number")


def position_from_dice(d1: int, d2: int, d3: int) -> int:
    """docs/rules.md §6: three dice summing to s name position ((s - 1) mod 7) + 1 (dealer: 1, 8,
    15)."""
    for i, d in enumerate((d1, d2, d3), start=1):
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 6:
            raise ValueError(f"die {i} must show 1–6, got {d!r}")
    return (d1 + d2 + d3 - 1) % POSITIONS + 1


def packet_positions(first: int) -> tuple[int, ...]:
    """docs/rules.md §6: the position receiving packet 1, 2, … 7 (index 0–6): first, first + 1, …
    counterclockwise, wrapping from 7 to 1."""
    start = _position(first, "the first position")
    return tuple((start - 1 + i) % POSITIONS + 1 for i in range(POSITIONS))


@dataclass(frozen=True, slots=True)
class DealProblem:
    """One fault of a deal: a machine-readable ``code``, a person's ``detail``, and where it was
    (``packet`` 1–7+ in dealing order, or None for the stub or the deal as a whole)."""

    code: str
    detail: str
    packet: int | None = None
    card: str | None = None

    @property
    def kind(self) -> Literal["dead", "misdeal"]:
        return "dead" if self.code in DEAD_CODES else "misdeal"

    @property
    def alarm(self) -> bool:
        return self.code in ALARM_CODES

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "detail": self.detail,
            "packet": self.packet,
            "card": self.card,
            "kind": self.kind,
            "alarm": self.alarm,
        }


@dataclass(frozen=True, slots=True)
class DealCheck:
    """The verdict on a deal: "ok", "dead" (docs/rules.md §6 rule 3) or "misdeal"; every problem
    found;
    ``alarm`` when the deck's integrity is in doubt (a duplicate, foreign or second joker)."""

    status: DealStatus
    reasons: tuple[DealProblem, ...]
    alarm: bool

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, object]:
        return {
            "status": self.status,
            "alarm": self.alarm,
            "reasons": [p.to_dict() for p in self.reasons],
        }


def _parse(item: object) -> Card | None:
    """The card, or None for a foreign card (text the parser rejects, or a code off the deck)."""
    if isinstance(item, str):
        try:
            return parse_card(item)
        except CardError:
            return None
    if isinstance(item, int) and not isinstance(item, bool) and 0 <= item < DECK_SIZE:
        return DECK[item]
    return None


def _where(packet: int | None) -> str:
    return "the stub" if packet is None else f"packet {packet}"


def _text(item: object) -> str:
    return item if isinstance(item, str) else repr(item)


_PACKET_CODES: Final = frozenset({"short_packet", "long_packet", "missing_packet", "extra_packet"})


def check_deal(
    packets: Sequence[Sequence[CardInput]], stub: Sequence[CardInput] | None = None
) -> DealCheck:
    """docs/rules.md §6 checks on every deal; reports every problem found, in dealing order.

    ``packets`` holds the cards of each packet in dealing order (card texts or Card codes); a text
    that does not parse is a foreign card. ``stub`` is the four undealt cards when the device
    reports them (None: not reported, not checked). When every packet holds seven cards, the stub
    must hold four and deal and stub together every card of the deck; a short, long or missing
    packet already decides the deal, so the stub is not judged then.
    """
    problems = _packet_problems(packets)
    sources: list[tuple[int | None, Sequence[CardInput]]] = list(enumerate(packets, start=1))
    if stub is not None:
        sources.append((None, stub))
    seen: dict[Card, list[int | None]] = defaultdict(list)
    problems += _foreign_cards(sources, seen)
    problems += _repeated_cards(seen)
    # With a short, long or missing packet the deal is already dead or misdealt, and what the
    # reader missed (a lost frame) is not evidence of a broken deck: judge the stub only then.
    packets_sound = not any(p.code in _PACKET_CODES for p in problems)
    if stub is not None and packets_sound:
        problems += _stub_problems(stub, seen)
    return _verdict(problems)


def _packet_problems(packets: Sequence[Sequence[CardInput]]) -> list[DealProblem]:
    """Packets beyond the seven positions, of the wrong size, or not dealt."""
    problems: list[DealProblem] = []
    for n, packet in enumerate(packets, start=1):
        if n > POSITIONS:
            problems.append(
                DealProblem("extra_packet", f"packet {n} was dealt beyond the seven positions", n)
            )
        elif len(packet) < PACKET_SIZE:
            problems.append(DealProblem("short_packet", f"packet {n} has {len(packet)} cards", n))
        elif len(packet) > PACKET_SIZE:
            problems.append(DealProblem("long_packet", f"packet {n} has {len(packet)} cards", n))
    for n in range(len(packets) + 1, POSITIONS + 1):
        problems.append(DealProblem("missing_packet", f"packet {n} was not dealt", n))
    return problems


def _foreign_cards(
    sources: Sequence[tuple[int | None, Sequence[CardInput]]],
    seen: dict[Card, list[int | None]],
) -> list[DealProblem]:
    """The foreign cards among ``sources`` (packet number, or None for the stub, and its cards),
    in dealing order; every card of the deck found is added to ``seen`` with where it was."""
    problems: list[DealProblem] = []
    for packet_no, items in sources:
        for item in items:
            parsed = _parse(item)
            if parsed is None:
                problems.append(
                    DealProblem(
                        "foreign_card",
                        f'{_where(packet_no)} holds "{_text(item)}", not a card of this deck',
                        packet_no,
                        _text(item),
                    )
                )
            else:
                seen[parsed].append(packet_no)
    return problems


def _repeated_cards(seen: Mapping[Card, list[int | None]]) -> list[DealProblem]:
    """A second joker, and every card found more than once."""
    problems: list[DealProblem] = []
    for found, places in seen.items():
        if len(places) < 2:
            continue
        where = ", ".join(_where(p) for p in places)
        if found == JOKER:
            problems.append(
                DealProblem("second_joker", f"{len(places)} jokers: {where}", places[1], "JK")
            )
        else:
            problems.append(
                DealProblem(
                    "duplicate_card",
                    f"{found} appears {len(places)} times: {where}",
                    places[1],
                    str(found),
                )
            )
    return problems


def _stub_problems(
    stub: Sequence[CardInput], seen: Mapping[Card, list[int | None]]
) -> list[DealProblem]:
    """A stub of the wrong size, and the cards of the deck neither dealt nor in the stub."""
    problems: list[DealProblem] = []
    if len(stub) != STUB_SIZE:
        problems.append(DealProblem("bad_stub", f"the stub has {len(stub)} cards, not four"))
    missing = [c for c in DECK if c not in seen]
    if missing:
        problems.append(
            DealProblem(
                "bad_stub",
                "the deal and the stub lack " + " ".join(str(c) for c in missing),
            )
        )
    return problems


def _verdict(problems: list[DealProblem]) -> DealCheck:
    if not problems:
        return DealCheck("ok", (), False)
    status: DealStatus = "dead" if all(p.kind == "dead" for p in problems) else "misdeal"
    return DealCheck(status, tuple(problems), any(p.alarm for p in problems))


class DealError(ValueError):
    """A deal that cannot be assigned; carries the DealCheck that says why."""

    def __init__(self, check: DealCheck) -> None:
        super().__init__(
            f"the deal is {check.status}: " + "; ".join(p.detail for p in check.reasons)
        )
        self.check = check


def assign_packets(
    packets: Sequence[Sequence[CardInput]], first: int
) -> dict[int, tuple[Card, ...]]:
    """Position (1–7, in order) → its seven cards, for a deal that passes ``check_deal``
    (DealError otherwise). docs/rules.md §6: packet 1 goes to ``first``, then counterclockwise."""
    positions = packet_positions(first)
    check = check_deal(packets)
    if not check.ok:
        raise DealError(check)
    by_position: dict[int, tuple[Card, ...]] = {}
    for position, packet in zip(positions, packets, strict=True):
        cards: list[Card] = []
        for item in packet:
            parsed = _parse(item)
            if parsed is None:
                raise AssertionError("check_deal passed a foreign card")
            cards.append(parsed)
        by_position[position] = tuple(cards)
    return dict(sorted(by_position.items()))
