"""Paytables as data (docs/rules.md §8): names, lines and every pay as the rules post them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from controller.game.paytables import (
    CHAN_CHU_LINES,
    CHAN_CHU_PAYTABLES,
    ENVY_PAYTABLES,
    JACKS_BEAT_PAYTABLES,
    PUSH_ACE_HIGH,
    Paytable,
    PaytableError,
    chan_chu_paytable,
    envy_paytable,
    jacks_beat_paytable,
    push_ace_high_paytable,
)

# docs/rules.md §8 Chan Chu table, copied here by hand so that a typo in the module cannot hide.
_: None = None
CHAN_CHU_TABLE = {
    "any_7_straight_flush": (5000, 2000, _, _, _),
    "natural_7_straight_flush": (_, _, 5000, 8000, 2500),
    "royal_flush_royal_match": (_, _, 1000, 2000, 1000),
    "wild_7_straight_flush": (_, _, 750, 1000, 750),
    "super_full_house": (2000, 1000, _, _, _),
    "five_aces": (500, 300, 250, 400, 250),
    "natural_7_flush": (200, 125, _, _, _),
    "royal_flush": (100, 100, 100, 150, 125),
    "natural_7_straight": (50, 50, _, _, _),
    "straight_flush": (40, 40, 50, 50, 50),
    "four_of_a_kind": (20, 20, 20, 25, 25),
    "full_house": (5, 5, 5, 5, 5),
    "flush": (4, 4, 4, 4, 4),
    "three_of_a_kind": (3, 3, 3, 3, 3),
    "straight": (2, 2, 2, 2, 2),
    "three_pair": (-1, -1, 0, -1, -1),
}
ENVY_TABLE = {
    "natural_7_straight_flush": (1000, 5000, 1000),
    "royal_flush_royal_match": (250, 1000, 750),
    "wild_7_straight_flush": (100, 500, 250),
    "five_aces": (50, 250, 100),
    "royal_flush": (25, 50, 50),
    "straight_flush": (10, 20, 20),
    "four_of_a_kind": (5, 5, 5),
}
JACKS_BEAT_TABLE = {
    "five_aces": (1000, 1000, 1000, 1000),
    "royal_flush": (500, 500, 500, 500),
    "straight_flush": (250, 250, 200, 200),
    "four_of_a_kind": (100, 100, 100, 100),
    "full_house": (60, 50, 40, 50),
    "flush": (25, 25, 25, 30),
    "straight": (20, 20, 20, 25),
    "three_of_a_kind": (15, 15, 15, 15),
    "two_pair": (10, 10, 10, 10),
    "pair": (5, 5, 5, 5),
    "high_card": (5, 5, 5, 5),
}


def test_chan_chu_line_ids_are_the_contract() -> None:
    expected = (
        "any_7_straight_flush natural_7_straight_flush royal_flush_royal_match "
        "wild_7_straight_flush super_full_house five_aces natural_7_flush royal_flush "
        "natural_7_straight straight_flush four_of_a_kind full_house flush three_of_a_kind "
        "straight three_pair other"
    )
    assert " ".join(CHAN_CHU_LINES) == expected


@pytest.mark.parametrize("column, name", list(enumerate(["PT1", "PT2", "PT3", "PT4", "PT5"])))
def test_chan_chu_paytable_matches_rules(column: int, name: str) -> None:
    table = chan_chu_paytable(name)
    expected = {k: v[column] for k, v in CHAN_CHU_TABLE.items() if v[column] is not None}
    expected["other"] = -1
    assert dict(table.pays) == expected
    assert table.unit == "to_1"
    assert list(table) == [line for line in CHAN_CHU_LINES if line in expected]


def test_three_pair_pushes_only_in_pt3() -> None:
    assert chan_chu_paytable("PT3").pay("three_pair") == 0
    for name in ("PT1", "PT2", "PT4", "PT5"):
        assert chan_chu_paytable(name).pay("three_pair") == -1


@pytest.mark.parametrize("name", ["PT1", "PT2", "PT3", "PT4", "PT5"])
def test_chan_chu_lines_are_listed_highest_pay_first(name: str) -> None:
    pays = list(chan_chu_paytable(name).pays.values())
    assert pays == sorted(pays, reverse=True)


def test_posted_house_edges_are_seed_000s() -> None:
    edges = {n: t.posted_house_edge for n, t in CHAN_CHU_PAYTABLES.items()}
    assert edges == {"PT1": 4.35, "PT2": 5.84, "PT3": 8.00, "PT4": 7.77, "PT5": 8.49}


@pytest.mark.parametrize("column, name", list(enumerate(["PT3", "PT4", "PT5"])))
def test_envy_paytable_matches_rules(column: int, name: str) -> None:
    table = envy_paytable(name)
    assert dict(table.pays) == {line: row[column] for line, row in ENVY_TABLE.items()}
    assert table.unit == "dollars"


@pytest.mark.parametrize("column, name", list(enumerate("ABCD")))
def test_jacks_beat_paytable_matches_rules(column: int, name: str) -> None:
    table = jacks_beat_paytable(name)
    assert dict(table.pays) == {line: row[column] for line, row in JACKS_BEAT_TABLE.items()}


def test_push_ace_high_paytable() -> None:
    assert push_ace_high_paytable() is PUSH_ACE_HIGH
    assert dict(PUSH_ACE_HIGH.pays) == {
        "dealer_and_player_ace_high": 40,
        "dealer_ace_high_joker": 15,
        "dealer_ace_high": 5,
    }


def test_lookup_ignores_case_and_spaces() -> None:
    assert chan_chu_paytable(" pt3 ") is CHAN_CHU_PAYTABLES["PT3"]
    assert jacks_beat_paytable("b") is JACKS_BEAT_PAYTABLES["B"]
    assert envy_paytable("Pt5") is ENVY_PAYTABLES["PT5"]


def test_unknown_names_raise_a_clear_error() -> None:
    with pytest.raises(PaytableError) as err:
        chan_chu_paytable("PT9")
    assert str(err.value) == 'unknown Chan Chu paytable "PT9" (expected PT1, PT2, PT3, PT4, PT5)'
    assert isinstance(err.value, ValueError)
    for name in ("PT1", "PT2"):  # docs/rules.md §8: Envy exists only for PT3–PT5
        with pytest.raises(PaytableError, match=r'unknown Envy paytable "PT\d" \(expected PT3'):
            envy_paytable(name)
    with pytest.raises(PaytableError, match=r"expected A, B, C, D"):
        jacks_beat_paytable("E")
    with pytest.raises(PaytableError):
        chan_chu_paytable(3)  # type: ignore[arg-type]


def test_pay_of_a_line_the_table_lacks() -> None:
    with pytest.raises(PaytableError, match='PT3 has no line "super_full_house"'):
        chan_chu_paytable("PT3").pay("super_full_house")
    assert "super_full_house" not in chan_chu_paytable("PT3")
    assert "super_full_house" in chan_chu_paytable("PT1")


def test_paytables_are_immutable() -> None:
    table = chan_chu_paytable("PT3")
    with pytest.raises(TypeError):
        table.pays["flush"] = 100  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.name = "PT9"  # type: ignore[misc]
    source = {"flush": 4}
    own = Paytable("Chan Chu", "custom", "to_1", source)
    source["flush"] = 400
    assert own.pay("flush") == 4
    assert hash(own) == hash(Paytable("Chan Chu", "custom", "to_1", {"flush": 4}))


def test_to_dict_is_json() -> None:
    data = json.loads(json.dumps(envy_paytable("PT4").to_dict()))
    assert data["unit"] == "dollars"
    assert data["lines"][0] == {"line": "natural_7_straight_flush", "pays": 5000}
