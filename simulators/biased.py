"""Biased table devices by name, for the protection bench and tests (docs/protection.md).

Each scenario is a shuffler and a first-position device: ``BIASED[name]()`` makes a fresh one
(scenarios remember earlier deals), and ``next_observation(scenario, rng, round_id)`` deals one
round as the controller would see it. All randomness comes from the ``random.Random`` passed in.

- ``fair``: a uniform shuffle; the draw alternates RNG box and dice, both fair.
- ``rng_favours_3``: the RNG box draws 3 at 1.5 times its share (3/14), the rest equally.
- ``loaded_die``: dice every round; the first die shows 6 a quarter of the time.
- ``stacked_joker``: the joker lands in packet 3 twice as often (14/53).
- ``stacked_aces``: each Ace lands in packet 3 about twice as often.
- ``repeat_order``: every 20th deal repeats one of the last 10, exactly or with up to 3 swaps.
- ``one_riffle``: each deal is one Gilbert–Shannon–Reeds riffle of the previous deal's order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from controller.game.cards import ACE, JOKER_CODE
from controller.game.deal import packet_positions, position_from_dice, position_from_rng
from controller.protection.observation import DealObservation, DrawMethod

DECK: Final = 53
PACKETS: Final = 7
PACKET_SIZE: Final = 7
DEALT: Final = PACKETS * PACKET_SIZE
TARGET_PACKET: Final = 2  # packet 3, counted from 1
ACES: Final = tuple((ACE - 2) * 4 + s for s in range(4))

Draw = tuple[DrawMethod, int | None, tuple[int, int, int] | None]


def fair_deck(rng: random.Random) -> list[int]:
    """A uniformly shuffled 53-card deck."""
    deck = list(range(DECK))
    rng.shuffle(deck)
    return deck


def fair_dice(rng: random.Random) -> tuple[int, int, int]:
    return (rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6))


def steer(
    deck: list[int], card: int, packet: int, rng: random.Random, keep: frozenset[int]
) -> None:
    """Move ``card`` into ``packet`` (0–6) with the chance that makes it land there twice as often
    as in a uniform deal (7/46 when it is elsewhere), swapping it with a card of that packet not
    in ``keep``."""
    where = deck.index(card)
    lo = packet * PACKET_SIZE
    if lo <= where < lo + PACKET_SIZE or rng.random() >= PACKET_SIZE / (DECK - PACKET_SIZE):
        return
    spots = [i for i in range(lo, lo + PACKET_SIZE) if deck[i] not in keep]
    if spots:
        j = rng.choice(spots)
        deck[where], deck[j] = deck[j], deck[where]


def riffle(order: list[int], rng: random.Random) -> list[int]:
    """One Gilbert–Shannon–Reeds riffle: cut binomially, then drop from each half with chance
    proportional to its size."""
    cut = sum(rng.random() < 0.5 for _ in order)
    left, right = order[:cut], order[cut:]
    out: list[int] = []
    i = j = 0
    while i < len(left) or j < len(right):
        a, b = len(left) - i, len(right) - j
        if rng.random() * (a + b) < a:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


@dataclass(slots=True)
class Scenario:
    """A shuffler (``deck``: the next deck order from the last ten and the number of deals
    before it) and a draw device (``draw``: from the number of deals before it)."""

    name: str
    deck: Callable[[random.Random, list[list[int]], int], list[int]]
    draw: Callable[[random.Random, int], Draw]
    history: list[list[int]] = field(default_factory=list)
    deals: int = 0


def alternating_draw(rng: random.Random, n: int) -> Draw:
    """The RNG box on even rounds, the dice reader on odd ones; both fair."""
    if n % 2 == 0:
        return "rng", rng.randint(1, 7), None
    return "dice", None, fair_dice(rng)


def favour_3(rng: random.Random, n: int) -> Draw:
    p3 = 1.5 / 7
    if rng.random() < p3:
        return "rng", 3, None
    return "rng", rng.choice((1, 2, 4, 5, 6, 7)), None


def loaded_die(rng: random.Random, n: int) -> Draw:
    first = 6 if rng.random() < 0.25 else rng.randint(1, 5)
    return "dice", None, (first, rng.randint(1, 6), rng.randint(1, 6))


def stacked(cards: tuple[int, ...]) -> Callable[[random.Random, list[list[int]], int], list[int]]:
    keep = frozenset(cards)

    def deal(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
        deck = fair_deck(rng)
        for card in cards:
            steer(deck, card, TARGET_PACKET, rng, keep)
        return deck

    return deal


def repeating(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
    if len(history) >= 10 and (n + 1) % 20 == 0:
        deck = list(rng.choice(history[-10:]))
        for _ in range(rng.randint(0, 3)):
            i, j = rng.randrange(DECK), rng.randrange(DECK)
            deck[i], deck[j] = deck[j], deck[i]
        return deck
    return fair_deck(rng)


def riffled(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
    return riffle(history[-1], rng) if history else fair_deck(rng)


def fair_shuffle(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
    return fair_deck(rng)


BIASED: Final[dict[str, Callable[[], Scenario]]] = {
    "fair": lambda: Scenario("fair", fair_shuffle, alternating_draw),
    "rng_favours_3": lambda: Scenario("rng_favours_3", fair_shuffle, favour_3),
    "loaded_die": lambda: Scenario("loaded_die", fair_shuffle, loaded_die),
    "stacked_joker": lambda: Scenario("stacked_joker", stacked((JOKER_CODE,)), alternating_draw),
    "stacked_aces": lambda: Scenario("stacked_aces", stacked(ACES), alternating_draw),
    "repeat_order": lambda: Scenario("repeat_order", repeating, alternating_draw),
    "one_riffle": lambda: Scenario("one_riffle", riffled, alternating_draw),
}


def scenario(name: str) -> Scenario:
    """A fresh scenario by name; ValueError lists the names."""
    try:
        return BIASED[name]()
    except KeyError:
        raise ValueError(
            f"unknown scenario {name!r}; expected one of {', '.join(BIASED)}"
        ) from None


def next_observation(
    sc: Scenario, rng: random.Random, round_id: str | None = None
) -> DealObservation:
    """Deal the scenario's next round: deck order → seven packets of seven and the stub (given
    sorted, as the controller knows it), the packets' positions from the draw."""
    deck = sc.deck(rng, sc.history, sc.deals)
    sc.history.append(deck)
    del sc.history[:-10]
    method, number, dice = sc.draw(rng, sc.deals)
    sc.deals += 1
    first = position_from_dice(*dice) if dice is not None else position_from_rng(number or 1)
    return DealObservation(
        round_id=round_id or f"{sc.name}-{sc.deals}",
        packets=tuple(tuple(deck[i * PACKET_SIZE : (i + 1) * PACKET_SIZE]) for i in range(PACKETS)),
        stub=tuple(sorted(deck[DEALT:])),
        positions=packet_positions(first),
        draw_method=method,
        number=number,
        dice=dice,
    )
