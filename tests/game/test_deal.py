"""The deal (docs/rules.md §6): positions from the RNG and the dice, packets, and every deal
check."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.game.cards import DECK, card_texts
from controller.game.deal import (
    DealCheck,
    DealError,
    assign_packets,
    check_deal,
    packet_positions,
    position_from_dice,
    position_from_rng,
)


def shuffled_deck(seed: int = 1) -> list[str]:
    texts = card_texts(DECK)
    random.Random(seed).shuffle(texts)
    return texts


def deal(seed: int = 1) -> tuple[list[list[str]], list[str]]:
    """Seven packets of seven and the four-card stub, from a shuffled deck."""
    deck = shuffled_deck(seed)
    return [deck[i * 7 : i * 7 + 7] for i in range(7)], deck[49:]


def codes(check: DealCheck) -> list[str]:
    return [p.code for p in check.reasons]


# --- positions ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 8))
def test_rng_names_the_first_position(n: int) -> None:
    assert position_from_rng(n) == n


@pytest.mark.parametrize("n", [0, 8, -1, True, "3", 3.0])
def test_rng_outside_1_to_7_is_refused(n: object) -> None:
    with pytest.raises(ValueError, match="position 1–7"):
        position_from_rng(n)  # type: ignore[arg-type]


DICE_SUMS = {
    3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 1, 9: 2, 10: 3,
    11: 4, 12: 5, 13: 6, 14: 7, 15: 1, 16: 2, 17: 3, 18: 4,
}  # fmt: skip


@pytest.mark.parametrize("total, position", sorted(DICE_SUMS.items()))
def test_dice_sum_names_a_position(total: int, position: int) -> None:
    throws = [(a, b, c) for a in range(1, 7) for b in range(1, 7) for c in range(1, 7)]
    for dice in [d for d in throws if sum(d) == total]:
        assert position_from_dice(*dice) == position


def test_the_dealer_is_8_and_15_on_the_dice() -> None:
    assert position_from_dice(2, 3, 3) == 1
    assert position_from_dice(5, 5, 5) == 1
    assert position_from_dice(6, 6, 6) == 4


@pytest.mark.parametrize("dice", [(0, 3, 3), (1, 7, 1), (1, 1, -2), (True, 2, 2)])
def test_a_die_outside_1_to_6_is_refused(dice: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match="must show 1–6"):
        position_from_dice(*dice)


@pytest.mark.parametrize(
    "first, positions",
    [
        (1, (1, 2, 3, 4, 5, 6, 7)),
        (2, (2, 3, 4, 5, 6, 7, 1)),
        (3, (3, 4, 5, 6, 7, 1, 2)),
        (4, (4, 5, 6, 7, 1, 2, 3)),
        (5, (5, 6, 7, 1, 2, 3, 4)),
        (6, (6, 7, 1, 2, 3, 4, 5)),
        (7, (7, 1, 2, 3, 4, 5, 6)),
    ],
)
def test_packets_go_counterclockwise_from_the_first(first: int, positions: tuple[int, ...]) -> None:
    assert packet_positions(first) == positions


def test_packet_positions_refuses_a_bad_first() -> None:
    with pytest.raises(ValueError):
        packet_positions(0)


# --- checks on a deal ---------------------------------------------------------------------


def test_a_good_deal_is_ok_with_or_without_the_stub() -> None:
    packets, stub = deal()
    for check in (check_deal(packets), check_deal(packets, stub)):
        assert check == DealCheck("ok", (), False)
        assert check.ok


def test_cards_may_be_card_objects() -> None:
    deck = list(DECK)
    random.Random(5).shuffle(deck)
    assert check_deal([deck[i * 7 : i * 7 + 7] for i in range(7)], deck[49:]).ok


def test_a_short_packet_kills_all_hands() -> None:
    packets, _stub = deal()
    packets[2] = packets[2][:6]
    check = check_deal(packets)
    assert (check.status, codes(check), check.alarm) == ("dead", ["short_packet"], False)
    assert check.reasons[0].detail == "packet 3 has 6 cards"
    assert check.reasons[0].packet == 3


def test_a_short_packet_whose_card_is_in_the_stub_is_still_dead() -> None:
    packets, stub = deal()
    stub = [*stub, packets[2][6]]
    packets[2] = packets[2][:6]
    check = check_deal(packets, stub)
    assert (check.status, codes(check)) == ("dead", ["short_packet"])


def test_a_short_packet_is_dead_even_when_its_card_is_not_in_the_stub() -> None:
    # docs/rules.md §6 rule 3 decides; a card the reader missed (a lost frame) is no deck fault.
    packets, stub = deal()
    packets[2] = packets[2][:6]
    check = check_deal(packets, stub)
    assert (check.status, codes(check)) == ("dead", ["short_packet"])
    assert not check.alarm
    packets, stub = deal()
    check = check_deal(packets[:6], stub)
    assert (check.status, codes(check)) == ("dead", ["missing_packet"])


def test_a_missing_packet_kills_all_hands() -> None:
    packets, _stub = deal()
    check = check_deal(packets[:5])
    assert (check.status, codes(check)) == ("dead", ["missing_packet", "missing_packet"])
    assert [p.detail for p in check.reasons] == [
        "packet 6 was not dealt",
        "packet 7 was not dealt",
    ]


def test_a_long_packet_is_a_misdeal() -> None:
    packets, stub = deal()
    packets[4] = [*packets[4], stub[0]]
    check = check_deal(packets)
    assert (check.status, codes(check), check.alarm) == ("misdeal", ["long_packet"], False)
    assert check.reasons[0].detail == "packet 5 has 8 cards"


def test_an_extra_packet_is_a_misdeal() -> None:
    packets, stub = deal()
    check = check_deal([*packets, stub])
    assert (check.status, codes(check), check.alarm) == ("misdeal", ["extra_packet"], False)
    assert check.reasons[0].packet == 8


def test_a_duplicate_card_is_a_misdeal_with_an_alarm() -> None:
    packets, _stub = deal()
    twice = packets[0][0]
    packets[3][1] = twice
    check = check_deal(packets)
    assert (check.status, codes(check), check.alarm) == ("misdeal", ["duplicate_card"], True)
    assert check.reasons[0].card == twice
    assert check.reasons[0].detail == f"{twice} appears 2 times: packet 1, packet 4"


def test_a_duplicate_between_deal_and_stub() -> None:
    packets, stub = deal()
    stub[0] = packets[6][6]
    check = check_deal(packets, stub)
    assert (check.status, codes(check), check.alarm) == (
        "misdeal",
        ["duplicate_card", "bad_stub"],
        True,
    )
    assert "the stub" in check.reasons[0].detail


@pytest.mark.parametrize("foreign", ["?7f", "", "1s", "Zz", 53, None])
def test_a_foreign_card_is_a_misdeal_with_an_alarm(foreign: object) -> None:
    packets, _stub = deal()
    packets[1][3] = foreign  # type: ignore[call-overload]
    check = check_deal(packets)
    assert (check.status, codes(check), check.alarm) == ("misdeal", ["foreign_card"], True)
    assert check.reasons[0].packet == 2


def test_a_second_joker_is_a_misdeal_with_an_alarm() -> None:
    texts = card_texts(DECK)  # unshuffled: the joker is the last card, in the stub
    packets = [texts[i * 7 : i * 7 + 7] for i in range(7)]
    packets[1][0] = "JK"
    packets[5][3] = "joker"  # another spelling of the joker is still a joker
    check = check_deal(packets)
    assert (check.status, codes(check), check.alarm) == ("misdeal", ["second_joker"], True)
    assert "2 jokers" in check.reasons[0].detail


def test_a_stub_of_the_wrong_size_is_a_misdeal() -> None:
    packets, stub = deal()
    check = check_deal(packets, stub[:3])
    assert (check.status, codes(check), check.alarm) == ("misdeal", ["bad_stub", "bad_stub"], False)
    assert check.reasons[0].detail == "the stub has 3 cards, not four"
    assert check.reasons[1].detail == f"the deal and the stub lack {stub[3]}"
    check = check_deal(packets, [])
    assert check.status == "misdeal" and codes(check)[0] == "bad_stub"


def test_every_problem_is_reported_and_any_misdeal_wins() -> None:
    packets, _stub = deal()
    packets[0] = packets[0][:5]  # dead
    packets[1][0] = "?7f"  # misdeal, alarm
    packets[2][0] = packets[3][0]  # misdeal, alarm
    check = check_deal(packets[:6])  # dead
    assert codes(check) == ["short_packet", "missing_packet", "foreign_card", "duplicate_card"]
    assert check.status == "misdeal"
    assert check.alarm
    assert [p.kind for p in check.reasons] == ["dead", "dead", "misdeal", "misdeal"]
    data = json.loads(json.dumps(check.to_dict()))
    assert data["status"] == "misdeal"
    assert data["reasons"][0] == {
        "code": "short_packet",
        "detail": "packet 1 has 5 cards",
        "packet": 1,
        "card": None,
        "kind": "dead",
        "alarm": False,
    }


# --- assigning packets to positions -------------------------------------------------------


@pytest.mark.parametrize("first", range(1, 8))
def test_assign_packets(first: int) -> None:
    packets, _stub = deal()
    hands = assign_packets(packets, first)
    assert list(hands) == [1, 2, 3, 4, 5, 6, 7]
    assert card_texts(hands[first]) == packets[0]
    assert card_texts(hands[first % 7 + 1]) == packets[1]
    assert card_texts(hands[(first + 5) % 7 + 1]) == packets[6]


def test_assign_packets_refuses_a_bad_deal() -> None:
    packets, _stub = deal()
    packets[6] = packets[6][:6]
    with pytest.raises(DealError, match="dead: packet 7 has 6 cards") as err:
        assign_packets(packets, 1)
    assert err.value.check.status == "dead"


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(53)), st.integers(1, 7))
def test_any_shuffle_deals_cleanly(order: list[int], first: int) -> None:
    cards = [DECK[c] for c in order]
    packets = [cards[i * 7 : i * 7 + 7] for i in range(7)]
    assert check_deal(packets, cards[49:]).ok
    hands = assign_packets(packets, first)
    assert sorted(c for hand in hands.values() for c in hand) == sorted(cards[:49])
    assert hands[first] == tuple(packets[0])
