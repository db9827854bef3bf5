"""The House Way (docs/rules.md §7): every rule id with at least three hands, and its properties.

Each case gives the seven cards, the front the rules text asks for, and the rule id. Where the
front's ranks can be taken from several physical cards, the expected cards follow docs/rules.md §7's
tie-break (highest back, joker in back, then the lowest card codes: clubs before diamonds ...)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.game.cards import DECK, CardError, parse_cards
from controller.game.hands import evaluate, front_key
from controller.game.house_way import RULE_IDS, house_way, rule_family
from controller.game.setting import Rules, Setting

CASES: list[tuple[str, str, str]] = [
    # Five Aces
    ("Ac Ad Ah As JK Kc Kd", "Kc Kd", "5A-KK"),
    ("Ac Ad Ah As JK Kh Ks", "Kh Ks", "5A-KK"),
    ("As Ah JK Ad Ac Ks Kd", "Ks Kd", "5A-KK"),
    ("Ac Ad Ah As JK 3c 9d", "Ac Ad", "5A"),  # the joker stays in back
    ("Ac Ad Ah As JK Qc Qd", "Ac Ad", "5A"),  # Queens are not Kings
    ("Ac Ad Ah As JK Kc 2d", "Ac Ad", "5A"),  # one King is not two
    # Four of a Kind, Aces
    ("Ac Ad Ah As 7c 7d 2h", "7c 7d", "4K-A-PAIR"),
    ("Ac Ad Ah JK 9c 9d 3h", "9c 9d", "4K-A-PAIR"),  # A A A JK is four Aces
    ("Ac Ad Ah As Kc Kd Kh", "Kc Kd", "4K-A-PAIR"),  # the pair may come from a three
    ("Ac Ad Ah As 6c 6d 2h", "Ac Ad", "4K-A"),  # Sixes are below Sevens
    ("Ac Ad Ah JK 9c 5d 3h", "Ac Ad", "4K-A"),
    ("Ac Ad As JK 2s 7s 9s", "Ac Ad", "4K-A"),  # 4K beats the flush; As JK 2s 7s 9s stays in back
    # Four of a Kind, Jacks to Kings
    ("Kc Kd Kh Ks Tc Td 2h", "Tc Td", "4K-JK-PAIR"),
    ("Jc Jd Jh Js Ac Ad 3h", "Ac Ad", "4K-JK-PAIR"),
    ("Qc Qd Qh Qs JK Ac 5h", "Ac JK", "4K-JK-PAIR"),  # A JK is a pair of Aces
    ("Kc Kd Kh Ks 9c 9d 2h", "Kc Kd", "4K-JK"),
    ("Jc Jd Jh Js Ac 5d 3h", "Jc Jd", "4K-JK"),
    ("Kc Kd Kh Ks JK 3s 4s", "Kc Kd", "4K-JK"),
    # Four of a Kind, Sevens to Tens
    ("7c 7d 7h 7s 5c 5d Kh", "5c 5d", "4K-7T-PAIR"),
    ("Tc Td Th Ts Ac JK 2h", "Ac JK", "4K-7T-PAIR"),
    ("9c 9d 9h 9s 3c 3d 3h", "3c 3d", "4K-7T-PAIR"),
    ("8c 8d 8h 8s Ac 5d 2h", "Ac 5d", "4K-7T-ACE"),
    ("Tc Td Th Ts JK 9d 4h", "JK 9d", "4K-7T-ACE"),  # the joker alone is a singleton Ace
    ("7c 7d 7h 7s Ac Kd Qh", "Ac Kd", "4K-7T-ACE"),
    ("8c 8d 8h 8s Kc 5d 2h", "8c 8d", "4K-7T"),
    ("Tc Td Th Ts Kc Qd Jh", "Tc Td", "4K-7T"),
    ("9c 9d 9h 9s Kc Qc 3c", "9c 9d", "4K-7T"),
    # Four of a Kind, Twos to Sixes
    ("2c 2d 2h 2s 5c 5d Kh", "5c 5d", "4K-26-PAIR"),
    ("6c 6d 6h 6s Ac JK 9h", "Ac JK", "4K-26-PAIR"),
    ("4c 4d 4h 4s 3c 3d 3h", "3c 3d", "4K-26-PAIR"),
    ("6c 6d 6h 6s Ac Kd 2h", "Ac Kd", "4K-26"),
    ("2c 2d 2h 2s JK 7d 5h", "JK 7d", "4K-26"),
    ("5c 5d 5h 5s Kc Qd 9h", "Kc Qd", "4K-26"),
    # Full House
    ("Kc Kd Kh 5c 5d 5h 2s", "Kc Kd", "FH-33"),
    ("Ac Ad JK 9c 9d 9h 3s", "Ac Ad", "FH-33"),  # A A JK is the higher three; joker in back
    ("4c 4d 4h 3c 3d 3h Ks", "4c 4d", "FH-33"),
    ("5c 5d 5h Kc Kd Qc Qd", "Kc Kd", "FH-322"),
    ("Kc Kd Kh 5c 5d 3c 3d", "Kc Kd", "FH-322"),  # the highest pair comes from the three
    ("Ac Ad JK 7c 7d 2c 2d", "Ac Ad", "FH-322"),
    ("2c 2d 7h 7s 7c Kd 3h", "Kd 3h", "FH-22-K"),
    ("2c 2d 9h 9s 9c Ad Qh", "Ad Qh", "FH-22-K"),
    ("2c 2d Jh Js Jc JK 5h", "JK 5h", "FH-22-K"),
    ("2c 2d 7h 7s 7c Qd 3h", "2c 2d", "FH"),
    ("9c 9d 9h 4s 4c Ad Kh", "4c 4s", "FH"),
    ("Kc Kd Kh JK Ac 5d 6h", "Ac JK", "FH"),
    # Three of a Kind
    ("Ac Ad Ah Kc 9d 5h 2s", "Ac Kc", "3K-A"),
    ("Ac Ad JK Qc 9d 5h 2s", "Ac Qc", "3K-A"),  # a natural Ace in front, the joker in back
    ("As Ah Ad 8c 6d 4h 3s", "Ad 8c", "3K-A"),
    ("7c 7d 7h Kc 9d 5h 2s", "Kc 9d", "3K"),
    ("7c 7d 7h JK 9d 5h 2s", "JK 9d", "3K"),
    ("Kc Kd Kh Qc 9d 5h 2s", "Qc 9d", "3K"),
    # Two Pair
    ("Kc Kd 9h 9s 4c 4d 2h", "Kc Kd", "2P-3P"),
    ("Ac JK 9h 9s 4c 4d 2h", "Ac JK", "2P-3P"),
    ("5c 5d 4h 4s 3c 3d Ah", "5c 5d", "2P-3P"),
    ("Kc Kd 9h 9s 4c 3d 2h", "9h 9s", "2P-77"),
    ("8c 8d 7h 7s Kc 3d 2h", "7h 7s", "2P-77"),
    ("Tc Td 8h 8s Kc Qd 2h", "8h 8s", "2P-77"),
    ("Jc Jd 6h 6s Ac 3d 2h", "6h 6s", "2P-J6-A"),
    ("Kc Kd 6h 6s JK 3d 2h", "6h 6s", "2P-J6-A"),  # the joker is the singleton Ace
    ("Qc Qd 9h 9s Ac 3d 2h", "9h 9s", "2P-J6-A"),
    ("Ac Ad 5h 5s Kc 3d 2h", "5h 5s", "2P-AA"),
    ("Ac JK 3h 3s Kc 9d 2h", "3h 3s", "2P-AA"),
    ("Ac Ad 6h 6s Qc 9d 2h", "6h 6s", "2P-AA"),
    ("9c 9d 2h 2s Ac Kd 3h", "Ac Kd", "2P"),
    ("Tc Td 5h 5s Kc Qd 2h", "Kc Qd", "2P"),
    ("Jc Jd 5h 5s JK 9d 2h", "JK 9d", "2P"),  # Fives are below Sixes
    # One Pair, High Card
    ("9c 9d Ah Kc 7d 4h 2s", "Ah Kc", "1P"),
    ("Ac JK Kc 9d 7h 4s 2c", "Kc 9d", "1P"),
    ("2c 2d Qh Jc 9d 7h 4s", "Qh Jc", "1P"),
    ("Ac Kd 7h 5s 3c 2d 9h", "Kd 9h", "HC"),
    ("JK Kd 7h 5s 3c Td 9h", "Kd Td", "HC"),
    ("Qc Jd 9h 7s 5c 3d 2h", "Jd 9h", "HC"),
    # Complete Hand, deferred
    ("As Ah Ad JK 2s 3s 4s", "Ah Ad", "CH→4K/4K-A"),  # docs/rules.md §7's own example
    ("Ac Ad Ah JK 2c 3d 4h", "Ac Ad", "4K-A"),  # 4K beats the straight, which stays in back
    ("As Ah Ad JK Ks Qs Js", "Ah Ad", "CH→4K/4K-A"),  # keeps the royal As Ks Qs Js JK in back
    ("Ac Ad Ah JK Kh Qh Jh", "Ac Ad", "CH→4K/4K-A"),
    ("As Ad JK 2s 2d 3s 4s", "2d 2s", "CH→FH/FH"),
    ("Ac Ad JK 3c 3d 4c 5c", "3c 3d", "CH→FH/FH"),
    ("Ah Ac JK 4h 4c 3h 5h", "4c 4h", "CH→FH/FH"),
    ("Qs Qh 6s 6h 2s 8s 9s", "9s 8s", "CH→2P/2P"),  # docs/rules.md §7: 9-8 | Q Q 6 6 2
    ("Ac Ad 5h 5s 2c 3d 4h", "5h 5s", "CH→2P/2P-AA"),
    ("JK 9c 9d 8h 8s Tc 7d", "JK Tc", "CH→2P/2P"),  # the joker is the Ace, not the straight
    # Complete Hand, searched
    ("Ac Kc Qc Jc Tc 9c 2d", "Ac 2d", "CH-K"),
    ("5c 6c 7c 8c 9c Kd Ks", "Kd Ks", "CH-K"),
    ("2h 3d 4s 5c 6h Ac Kd", "Ac Kd", "CH-K"),
    ("Ah Kh Qh Jh Th 2c 3d", "2c 3d", "CH-RF"),
    ("JK Kd Qd Jd Td 4c 6h", "4c 6h", "CH-RF"),
    ("As Ks Qs Js Ts 5h 2c", "5h 2c", "CH-RF"),
    ("8c 9d Th Jc Qs 7h 2d", "Qs 2d", "CH-J"),
    ("Jc Td 9h 8s 7c 6d 2h", "Jc 2h", "CH-J"),
    ("Qh Jh 8h 5h 3h 2h 4d", "Qh 4d", "CH-J"),
    ("JK 9h Th Jh Qh 3c 4d", "3c 4d", "CH-SF"),
    ("5d 6d 7d 8d 9d 2c 3h", "2c 3h", "CH-SF"),
    ("4s 5s 6s 7s 8s 9s 2c", "9s 2c", "CH-SF"),
    ("2c 3d 4h 5s 6c 7d 8h", "8h 7d", "CH-SF5"),
    ("Kh 9h 7h 4h 2h 3c 5d", "3c 5d", "CH-SF5"),
    ("JK 3c 4d 5h 6s 9c Td", "Td 9c", "CH-SF5"),
]


@pytest.mark.parametrize(("cards", "front", "rule"), CASES, ids=[f"{r}:{c}" for c, _, r in CASES])
def test_house_way_rule(cards: str, front: str, rule: str) -> None:
    setting = house_way(parse_cards(cards))
    assert setting.rule == rule
    assert sorted(setting.front) == sorted(parse_cards(front))
    assert not setting.is_foul


def test_every_rule_id_has_at_least_three_cases() -> None:
    counts = Counter(
        rule_family(r) if not r.startswith("CH→") else r.split("/")[0] for _, _, r in CASES
    )
    counts.update(rule_family(r) for _, _, r in CASES if r.startswith("CH→"))
    for rule in RULE_IDS:
        assert counts[rule] >= 3, rule


def test_joker_choice_keeps_the_straight_flush_in_back() -> None:
    # docs/rules.md §7: A♥ A♦ in front leaves the wheel straight flush; A♠ A♥ would leave a
    # straight.
    setting = house_way(parse_cards("As Ah Ad JK 2s 3s 4s"))
    assert setting.back_value.name == "straight flush, five high (wheel)"


def test_wheel_switch_changes_complete_hand_choices() -> None:
    # With the wheel second highest, A-K in front keeps 2-6 in back either way; the switch must
    # still give a legal, complete setting.
    cards = parse_cards("Ac 2d 3h 4s 5c 6d Kh")
    for rules in (Rules(), Rules(wheel_rank="lowest")):
        setting = house_way(cards, rules)
        assert not setting.is_foul and setting.back_value.category >= 4


def test_wrong_input_is_refused() -> None:
    with pytest.raises(CardError):
        house_way(parse_cards("As Ks Qs"))
    with pytest.raises(CardError):
        house_way(parse_cards("As As Qs Js Ts 9s 8s"))


# --- properties over random hands ---------------------------------------------------------------

seven = st.lists(st.sampled_from(DECK), min_size=7, max_size=7, unique=True)


@settings(max_examples=3000, deadline=None)
@given(seven, st.randoms(use_true_random=False), st.booleans())
def test_house_way_properties(cards: list, rnd: random.Random, wheel_high: bool) -> None:  # type: ignore[type-arg]
    rules = Rules() if wheel_high else Rules(wheel_rank="lowest")
    setting = house_way(cards, rules)
    assert sorted(setting.cards) == sorted(cards)  # exactly the seven cards
    assert not setting.is_foul  # never a foul
    shuffled = list(cards)
    rnd.shuffle(shuffled)
    assert house_way(shuffled, rules) == setting  # ignores input order, deterministic
    assert house_way(cards, rules) == setting
    assert rule_family(setting.rule or "") in RULE_IDS


def test_house_way_on_a_seeded_sample_never_fouls_and_uses_every_rule() -> None:
    rng = random.Random(20261122)
    seen: Counter[str] = Counter()
    for _ in range(30000):
        cards = rng.sample(DECK, 7)
        setting = house_way(cards)
        assert front_key(*setting.front) <= evaluate(setting.back)
        seen[rule_family(setting.rule or "")] += 1
    common = {"1P", "HC", "2P", "2P-77", "3K", "FH", "CH-SF5", "CH-K"}
    assert common <= set(seen)


def test_setting_from_front_round_trips() -> None:
    cards = parse_cards("Ac Kd 7h 5s 3c 2d 9h")
    hw = house_way(cards)
    again = Setting.from_front(cards, hw.front)
    assert sorted(again.back) == sorted(hw.back)
