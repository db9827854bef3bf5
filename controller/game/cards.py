"""Cards and the 53-card deck (docs/rules.md §1).

A card is a small int (0–52) so that hands can be evaluated with table look-ups: natural cards
are ``(rank - 2) * 4 + suit`` with ranks 2–14 (Ace = 14) and suits c d h s = 0–3; the joker is 52.
The 53 card objects are interned: ``parse_card("As") is ACE_OF_SPADES``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

RANK_CHARS: Final = "23456789TJQKA"
SUIT_CHARS: Final = "cdhs"
SUIT_SYMBOLS: Final = {"♣": "c", "♦": "d", "♥": "h", "♠": "s"}
SUIT_NAMES: Final = ("clubs", "diamonds", "hearts", "spades")
RANK_NAMES: Final = {
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    11: "jack",
    12: "queen",
    13: "king",
    14: "ace",
}
RANK_PLURALS: Final = {r: ("sixes" if r == 6 else name + "s") for r, name in RANK_NAMES.items()}

ACE: Final = 14
KING: Final = 13
QUEEN: Final = 12
JACK: Final = 11
TEN: Final = 10
JOKER_CODE: Final = 52


class CardError(ValueError):
    """A card's text is not a card of this deck; the message names the text and the fault."""


class Card(int):
    """One card of the 53-card deck. Compare and hash as its code (0–52)."""

    __slots__ = ()

    @property
    def is_joker(self) -> bool:
        return self == JOKER_CODE

    @property
    def rank(self) -> int:
        """2–14; the joker reports 14 (it groups with Aces, docs/rules.md §2)."""
        return ACE if self == JOKER_CODE else (self >> 2) + 2

    @property
    def suit(self) -> int:
        """0–3 for c d h s; -1 for the joker, which has no suit."""
        return -1 if self == JOKER_CODE else self & 3

    def __str__(self) -> str:
        if self == JOKER_CODE:
            return "JK"
        return RANK_CHARS[(self >> 2)] + SUIT_CHARS[self & 3]

    def __repr__(self) -> str:
        return f"Card({self})"


DECK: Final[tuple[Card, ...]] = tuple(Card(code) for code in range(53))
JOKER: Final = DECK[JOKER_CODE]
DECK_SIZE: Final = 53

_BY_TEXT: dict[str, Card] = {str(c): c for c in DECK}


def card(rank: int, suit: int) -> Card:
    """The natural card of rank 2–14 and suit 0–3."""
    if not 2 <= rank <= ACE or not 0 <= suit <= 3:
        raise CardError(f"no card of rank {rank} and suit {suit}")
    return DECK[(rank - 2) * 4 + suit]


def parse_card(text: str) -> Card:
    """Parse ``As``, ``td``, ``10h``, ``K♠``, ``JK``. Raises CardError naming the text."""
    if not isinstance(text, str):
        raise CardError(f"{text!r}: not a card text")
    exact = _BY_TEXT.get(text)
    if exact is not None:  # a card as the devices send it and the table writes it ("As", "JK")
        return exact
    raw = text.strip()
    if not raw:
        raise CardError(f"{text!r}: empty card")
    upper = raw.upper()
    if upper in ("JK", "JOKER", "JO", "🃏"):
        return JOKER
    if len(raw) < 2:
        raise CardError(f'"{raw}": too short for a card (rank then suit, e.g. "As")')
    rank_text, suit_text = raw[:-1], raw[-1]
    suit_char = SUIT_SYMBOLS.get(suit_text, suit_text.lower())
    rank_char = "T" if rank_text == "10" else rank_text.upper()
    if len(rank_char) != 1 or rank_char not in RANK_CHARS:
        raise CardError(f'"{raw}": unknown rank "{rank_text}"')
    if suit_char not in SUIT_CHARS:
        raise CardError(f'"{raw}": unknown suit "{suit_text}"')
    return _BY_TEXT[rank_char + suit_char]


def parse_cards(text: str | Iterable[str]) -> list[Card]:
    """Parse cards from whitespace/comma separated text or from an iterable of card texts."""
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    return [parse_card(item) for item in items]


def format_cards(cards: Iterable[int]) -> str:
    return " ".join(str(DECK[c]) for c in cards)


def card_texts(cards: Iterable[int]) -> list[str]:
    return [str(DECK[c]) for c in cards]


def check_distinct(cards: Sequence[int]) -> None:
    """Raise CardError if a card appears twice (a hand is a set of physical cards)."""
    if len(set(cards)) != len(cards):
        seen: set[int] = set()
        for c in cards:
            if c in seen:
                raise CardError(f'"{DECK[c]}": appears twice')
            seen.add(c)
