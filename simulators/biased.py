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

Issue 24's devices (shuffles that actually happen, mild biases):

- ``riffles_4`` … ``riffles_7``: k GSR riffles of the previous deal's whole order (k = 7 is
  what Bayer–Diaconis call enough for 52 cards).
- ``pickup_riffles_3``: three riffles of the order the cards came back in: the stub, then the
  hands picked up by position 1–7, each hand's seven cards in the order its player left them
  (uniformly rearranged).
- ``two_decks_3``: two decks in rotation, each riffled three times from its own last order (the
  deal before the previous).
- ``shelf_10``: a one-pass shelf shuffler with 10 shelves (Diaconis–Fulman–Holmes 2013): each
  card of the previous order goes to a uniform shelf, on top or at the bottom of its pile.
- ``kept_together_03``: each pair of neighbours of the previous order stays together with
  chance 0.3; the blocks are shuffled uniformly.
- ``rng_7_at_1_2``: the RNG box (every round) draws 7 with chance 1.2/7, the rest equally.
- ``die_6_at_019``: dice every round; the first die shows 6 with chance 0.19.
- ``joker_to_seat``: half the time, after the draw, the joker is swapped into the hand that
  goes to position 4.
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
    #: After the draw: the deck rearranged knowing the positions its packets go to.
    arrange: Callable[[random.Random, list[int], tuple[int, ...]], list[int]] | None = None
    positions: list[tuple[int, ...]] = field(default_factory=list)  # of the recent deals


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


def riffles(k: int, lag: int = 1) -> Callable[[random.Random, list[list[int]], int], list[int]]:
    """k GSR riffles of the deck order ``lag`` deals back (a fair deck until there is one)."""

    def deal(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
        if len(history) < lag:
            return fair_deck(rng)
        order = list(history[-lag])
        for _ in range(k):
            order = riffle(order, rng)
        return order

    return deal


def pickup(order: list[int], positions: tuple[int, ...] | None, rng: random.Random) -> list[int]:
    """The order the cards come back in: the stub, then the hands by position 1–7 (as dealt if
    the positions are not known), each hand's cards in an order its player chose (uniform)."""
    packets = [order[k * PACKET_SIZE : (k + 1) * PACKET_SIZE] for k in range(PACKETS)]
    by_position = (
        [packets[positions.index(p)] for p in range(1, PACKETS + 1)] if positions else packets
    )
    out = list(order[DEALT:])
    for hand in by_position:
        hand = list(hand)
        rng.shuffle(hand)
        out += hand
    return out


def pickup_riffles(
    sc: Scenario, k: int
) -> Callable[[random.Random, list[list[int]], int], list[int]]:
    def deal(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
        if not history:
            return fair_deck(rng)
        order = pickup(history[-1], sc.positions[-1] if sc.positions else None, rng)
        for _ in range(k):
            order = riffle(order, rng)
        return order

    return deal


def shelf_shuffle(order: list[int], shelves: int, rng: random.Random) -> list[int]:
    """One pass of a shelf shuffler: each card in turn to a uniform shelf, on top of its pile or
    at the bottom (even chances); the piles stacked shelf by shelf."""
    piles: list[list[int]] = [[] for _ in range(shelves)]
    tops: list[list[int]] = [[] for _ in range(shelves)]
    for c in order:
        s = rng.randrange(shelves)
        (tops if rng.random() < 0.5 else piles)[s].append(c)
    return [c for s in range(shelves) for c in (*reversed(tops[s]), *piles[s])]


def shelved(shelves: int) -> Callable[[random.Random, list[list[int]], int], list[int]]:
    def deal(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
        return shelf_shuffle(history[-1], shelves, rng) if history else fair_deck(rng)

    return deal


def kept_together(chance: float) -> Callable[[random.Random, list[list[int]], int], list[int]]:
    """Neighbours of the previous order stay together with ``chance``; blocks shuffled."""

    def deal(rng: random.Random, history: list[list[int]], n: int) -> list[int]:
        if not history:
            return fair_deck(rng)
        blocks: list[list[int]] = []
        for c in history[-1]:
            if blocks and rng.random() < chance:
                blocks[-1].append(c)
            else:
                blocks.append([c])
        rng.shuffle(blocks)
        return [c for b in blocks for c in b]

    return deal


def rng_favours(number: int, ratio: float) -> Callable[[random.Random, int], Draw]:
    others = tuple(x for x in range(1, PACKETS + 1) if x != number)

    def draw(rng: random.Random, n: int) -> Draw:
        if rng.random() < ratio / PACKETS:
            return "rng", number, None
        return "rng", rng.choice(others), None

    return draw


def die_loaded(face: int, chance: float) -> Callable[[random.Random, int], Draw]:
    others = tuple(x for x in range(1, 7) if x != face)

    def draw(rng: random.Random, n: int) -> Draw:
        first = face if rng.random() < chance else rng.choice(others)
        return "dice", None, (first, rng.randint(1, 6), rng.randint(1, 6))

    return draw


def to_seat(
    card: int, position: int, chance: float
) -> Callable[[random.Random, list[int], tuple[int, ...]], list[int]]:
    """With ``chance``, swap ``card`` into the packet that goes to ``position``."""

    def arrange(rng: random.Random, deck: list[int], positions: tuple[int, ...]) -> list[int]:
        if rng.random() >= chance:
            return deck
        lo = positions.index(position) * PACKET_SIZE
        where = deck.index(card)
        if not lo <= where < lo + PACKET_SIZE:
            j = lo + rng.randrange(PACKET_SIZE)
            deck[where], deck[j] = deck[j], deck[where]
        return deck

    return arrange


def _pickup_scenario() -> Scenario:
    sc = Scenario("pickup_riffles_3", fair_shuffle, alternating_draw)
    sc.deck = pickup_riffles(sc, 3)
    return sc


BIASED: Final[dict[str, Callable[[], Scenario]]] = {
    "fair": lambda: Scenario("fair", fair_shuffle, alternating_draw),
    "rng_favours_3": lambda: Scenario("rng_favours_3", fair_shuffle, favour_3),
    "loaded_die": lambda: Scenario("loaded_die", fair_shuffle, loaded_die),
    "stacked_joker": lambda: Scenario("stacked_joker", stacked((JOKER_CODE,)), alternating_draw),
    "stacked_aces": lambda: Scenario("stacked_aces", stacked(ACES), alternating_draw),
    "repeat_order": lambda: Scenario("repeat_order", repeating, alternating_draw),
    "one_riffle": lambda: Scenario("one_riffle", riffled, alternating_draw),
    "riffles_4": lambda: Scenario("riffles_4", riffles(4), alternating_draw),
    "riffles_5": lambda: Scenario("riffles_5", riffles(5), alternating_draw),
    "riffles_6": lambda: Scenario("riffles_6", riffles(6), alternating_draw),
    "riffles_7": lambda: Scenario("riffles_7", riffles(7), alternating_draw),
    "pickup_riffles_3": _pickup_scenario,
    "two_decks_3": lambda: Scenario("two_decks_3", riffles(3, lag=2), alternating_draw),
    "shelf_10": lambda: Scenario("shelf_10", shelved(10), alternating_draw),
    "kept_together_03": lambda: Scenario("kept_together_03", kept_together(0.3), alternating_draw),
    "rng_7_at_1_2": lambda: Scenario("rng_7_at_1_2", fair_shuffle, rng_favours(7, 1.2)),
    "die_6_at_019": lambda: Scenario("die_6_at_019", fair_shuffle, die_loaded(6, 0.19)),
    "joker_to_seat": lambda: Scenario(
        "joker_to_seat", fair_shuffle, alternating_draw, arrange=to_seat(JOKER_CODE, 4, 0.5)
    ),
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
    method, number, dice = sc.draw(rng, sc.deals)
    sc.deals += 1
    first = position_from_dice(*dice) if dice is not None else position_from_rng(number or 1)
    positions = packet_positions(first)
    if sc.arrange is not None:
        deck = sc.arrange(rng, list(deck), positions)
    sc.history.append(deck)
    del sc.history[:-10]
    sc.positions.append(positions)
    del sc.positions[:-10]
    return DealObservation(
        round_id=round_id or f"{sc.name}-{sc.deals}",
        packets=tuple(tuple(deck[i * PACKET_SIZE : (i + 1) * PACKET_SIZE]) for i in range(PACKETS)),
        stub=tuple(sorted(deck[DEALT:])),
        positions=positions,
        draw_method=method,
        number=number,
        dice=dice,
    )
