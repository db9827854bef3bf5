"""The round state machine through every path of docs/rules.md §6, with no I/O."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import pytest

from controller.game.cards import DECK, parse_cards
from controller.game.house_way import house_way
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.game.setting import Rules
from controller.messages import (
    CloseTable,
    EnterDice,
    PlayerSetting,
    SetSeats,
    SetWagers,
    StatusRequest,
    VoidRound,
    Wagers,
)
from controller.table import (
    AlarmRaised,
    CommandReply,
    PlayerSettled,
    RoundClosed,
    RoundOpened,
    Table,
    TableSettings,
    Tick,
)
from controller.table.settle import SettlementMemo, work_out
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    DeviceFault,
    DeviceOffline,
    DeviceOnline,
    PacketDealt,
    PositionDrawn,
    StubVerified,
)

SEATS = {2: "1", 3: "2", 4: "3", 5: "4", 6: "5", 7: "6"}
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def make_table(envy: bool = True, rules: Rules | None = None) -> tuple[Table, Clock]:
    counter = itertools.count(1)
    clock = Clock()
    settings = TableSettings(
        table_id="PG-01",
        seats=SEATS,
        rules=rules or Rules(),
        chan_chu=chan_chu_paytable("PT3"),
        jacks_beat=jacks_beat_paytable("B"),
        envy=envy_paytable("PT3") if envy else None,
        deal_timeout=timedelta(seconds=30),
    )
    return Table(settings, new_round_id=lambda: f"PG-01-r{next(counter)}", clock=clock), clock


def shuffled(seed: int) -> list[str]:
    deck = [str(c) for c in DECK]
    random.Random(seed).shuffle(deck)
    return deck


def packet_events(deck: list[str], device: str = "shuffler", shuffle_id: str | None = None) -> list:  # type: ignore[type-arg]
    """A whole deal of ``deck``; its shuffle id is new for every different deck (a real
    shuffler's is unique: a repeated one is refused as a replay)."""
    sid = shuffle_id if shuffle_id is not None else "S-" + "".join(deck[:3])
    events: list = [DealStarted(device=device, shuffle_id=sid)]  # type: ignore[type-arg]
    events += [
        PacketDealt(device=device, index=i, cards=tuple(deck[7 * i : 7 * i + 7])) for i in range(7)
    ]
    events += [StubVerified(device=device, cards=tuple(deck[49:])), DealEnded(device=device)]
    return events


def run(table: Table, events: list) -> list:  # type: ignore[type-arg]
    out: list = []  # type: ignore[type-arg]
    for e in events:
        out += table.handle(e)
    return out


def closed(effects: list) -> list[RoundClosed]:  # type: ignore[type-arg]
    return [e for e in effects if isinstance(e, RoundClosed)]


def rng(n: int) -> PositionDrawn:
    return PositionDrawn(device="rng", method="rng", number=n)


@pytest.mark.parametrize("first", range(1, 8))
@pytest.mark.parametrize("position_first", [True, False])
def test_a_whole_deal_settles_with_the_house_way_for_the_dealer(
    first: int, position_first: bool
) -> None:
    table, _ = make_table()
    deck = shuffled(first)
    events = packet_events(deck)
    events = [rng(first), *events] if position_first else [*events, rng(first)]
    effects = run(table, events)
    [result] = closed(effects)
    p = result.payload
    assert p.status == "settled" and p.first_position and p.first_position.position == first
    # Packet 0 goes to the first position, then counterclockwise (docs/rules.md §6).
    dealer_packet = (1 - first) % 7
    dealer_cards = deck[7 * dealer_packet : 7 * dealer_packet + 7]
    assert p.dealer is not None and p.dealer.cards == dealer_cards
    if p.dealer.two_jacks:
        assert p.dealer.setting is None
    else:
        expected = house_way(parse_cards(dealer_cards)).to_dict()
        assert p.dealer.setting is not None and p.dealer.setting.model_dump() == expected
    assert [s.position for s in p.seats] == [2, 3, 4, 5, 6, 7]
    for seat in p.seats:
        packet = (seat.position - first) % 7
        assert seat.cards == deck[7 * packet : 7 * packet + 7]
    assert any(isinstance(e, RoundOpened) for e in effects)


def test_settles_only_when_the_position_is_known() -> None:
    table, _ = make_table()
    effects = run(table, packet_events(shuffled(3)))
    assert closed(effects) == []
    assert table.round is not None and not table.round.closed
    effects = table.handle(EnterDice(dice=(6, 6, 3)))  # 15 → the dealer, position 1
    [result] = closed(effects)
    assert result.payload.first_position is not None
    assert (
        result.payload.first_position.position == 1
        and result.payload.first_position.method == "dice_manual"
    )


@pytest.mark.parametrize(
    ("dice", "position"), [((1, 1, 1), 3), ((2, 3, 3), 1), ((6, 6, 6), 4), ((1, 2, 5), 1)]
)
def test_dice_from_the_reader(dice: tuple[int, int, int], position: int) -> None:
    table, _ = make_table()
    effects = run(
        table, [PositionDrawn(device="dice", method="dice", dice=dice), *packet_events(shuffled(4))]
    )
    [result] = closed(effects)
    assert (
        result.payload.first_position is not None
        and result.payload.first_position.position == position
    )


def test_the_dealer_with_two_jacks_sets_no_hand_and_jacks_beat_pays() -> None:
    table, _ = make_table()
    rest = [str(c) for c in DECK if str(c) not in ("Jc", "Jd")]
    random.Random(9).shuffle(rest)
    deck = [
        "Jc",
        "Jd",
        *rest[:5],
        *rest[5:],
    ]  # packet 0 holds two Jacks; RNG 1 gives it to the dealer
    [result] = closed(run(table, [rng(1), *packet_events(deck)]))
    p = result.payload
    assert p.dealer is not None and p.dealer.two_jacks and p.dealer.setting is None
    assert all(s.jacks_beat.pays >= 5 for s in p.seats)
    assert all(s.push_ace_high.line == "lose" for s in p.seats)


def _dead(deck_events: list) -> tuple[str, list[str], list]:  # type: ignore[type-arg]
    table, _ = make_table()
    effects = run(table, [rng(2), *deck_events])
    [result] = closed(effects)
    return result.payload.status, [r.code for r in result.payload.reasons], effects


def test_short_packet_means_all_hands_dead() -> None:
    deck = shuffled(5)
    events = packet_events(deck)
    events[3] = PacketDealt(device="shuffler", index=2, cards=tuple(deck[14:20]))
    status, codes, _ = _dead(events)
    assert status == "dead" and "short_packet" in codes


def test_missing_packet_is_dead() -> None:
    events = packet_events(shuffled(6))
    del events[5]
    status, codes, _ = _dead(events)
    assert status == "dead" and "missing_packet" in codes


def test_eight_cards_is_a_misdeal() -> None:
    deck = shuffled(7)
    events = packet_events(deck)
    events[1] = PacketDealt(device="shuffler", index=0, cards=(*deck[0:7], deck[49]))
    status, codes, _ = _dead(events)
    assert status == "misdeal" and "long_packet" in codes


@pytest.mark.parametrize(
    ("replacement", "code"),
    [("same", "duplicate_card"), ("?7f", "foreign_card"), ("JK", "second_joker")],
)
def test_deck_integrity_misdeals_raise_a_critical_alarm(replacement: str, code: str) -> None:
    deck = shuffled(8)
    if replacement == "JK":
        deck.remove("JK")
        deck.insert(0, "JK")
        cards = list(deck[7:14])
        cards[0] = "JK"
    else:
        cards = list(deck[7:14])
        cards[0] = deck[0] if replacement == "same" else replacement
    events = packet_events(deck)
    events[2] = PacketDealt(device="shuffler", index=1, cards=tuple(cards))
    status, codes, effects = _dead(events)
    assert status == "misdeal" and code in codes
    alarms = [e.payload for e in effects if isinstance(e, AlarmRaised)]
    assert any(a.code == "deck_integrity" and a.severity == "critical" for a in alarms)


def test_stub_of_three_cards_is_a_misdeal() -> None:
    deck = shuffled(10)
    events = packet_events(deck)
    events[8] = StubVerified(device="shuffler", cards=tuple(deck[49:52]))
    status, codes, _ = _dead(events)
    assert status == "misdeal" and "bad_stub" in codes


def test_a_shoe_deals_card_by_card_and_the_controller_forms_packets() -> None:
    table, _ = make_table()
    deck = shuffled(11)
    events = [
        DealStarted(device="shoe"),
        *[CardDealt(device="shoe", card=c) for c in deck],
        DealEnded(device="shoe"),
    ]
    [result] = closed(run(table, [rng(4), *events]))
    p = result.payload
    assert p.status == "settled"
    dealer_packet = (1 - 4) % 7
    assert (
        p.dealer is not None and p.dealer.cards == deck[7 * dealer_packet : 7 * dealer_packet + 7]
    )


def test_a_shoe_that_stops_short_is_dead() -> None:
    table, _ = make_table()
    deck = shuffled(12)
    events = [
        DealStarted(device="shoe"),
        *[CardDealt(device="shoe", card=c) for c in deck[:48]],
        DealEnded(device="shoe"),
    ]
    [result] = closed(run(table, [rng(4), *events]))
    assert result.payload.status == "dead" and "short_packet" in [
        r.code for r in result.payload.reasons
    ]


def test_silence_mid_deal_times_out_as_dead_with_an_alarm() -> None:
    table, clock = make_table()
    deck = shuffled(13)
    run(table, packet_events(deck)[:4])
    assert table.handle(Tick(clock.now + timedelta(seconds=10))) == []
    effects = table.handle(Tick(clock.now + timedelta(seconds=31)))
    [result] = closed(effects)
    assert result.payload.status == "dead" and result.payload.reasons[0].code == "deal_timeout"
    assert any(isinstance(e, AlarmRaised) and e.payload.code == "deal_timeout" for e in effects)


def test_a_new_deal_closes_an_incomplete_round() -> None:
    table, _ = make_table()
    run(table, packet_events(shuffled(14))[:3])
    first_id = table.round.round_id if table.round else ""
    effects = run(table, [*packet_events(shuffled(15)), rng(5)])
    results = closed(effects)
    assert [r.payload.status for r in results] == ["dead", "settled"]
    assert (
        results[0].payload.round_id == first_id and results[0].payload.reasons[0].code == "new_deal"
    )
    assert results[1].payload.round_seq == results[0].payload.round_seq + 1


def test_void_a_settled_round_and_a_dealing_round() -> None:
    table, _ = make_table()
    run(table, [rng(1), *packet_events(shuffled(16))])
    effects = table.handle(VoidRound(reason="cards exposed", request_id="r1"))
    reply = next(e for e in effects if isinstance(e, CommandReply))
    assert reply.ok and reply.request_id == "r1"
    [result] = closed(effects)
    assert result.payload.status == "void" and result.payload.reasons[0].detail == "cards exposed"
    again = table.handle(VoidRound())
    assert isinstance(again[0], CommandReply) and not again[0].ok
    run(table, packet_events(shuffled(17))[:2])
    [result] = closed(table.handle(VoidRound(reason="jam")))
    assert result.payload.status == "void"


def test_player_setting_after_the_dealer_settles_the_pai_gow_wager() -> None:
    table, _ = make_table()
    table.handle(SetWagers(seat="1", wagers=Wagers(pai_gow=25, chan_chu=5)))
    # Before the dealer is set, a player cannot set (rule 4).
    early = table.handle(PlayerSetting(seat="1", house_way=True))
    assert isinstance(early[0], CommandReply) and not early[0].ok
    [result] = closed(run(table, [rng(1), *packet_events(shuffled(18))]))
    seat1 = next(s for s in result.payload.seats if s.seat == "1")
    assert seat1.wagers is not None and seat1.chan_chu.wager == 5
    effects = table.handle(PlayerSetting(seat="1", house_way=True))
    settled = [e.payload for e in effects if isinstance(e, PlayerSettled)]
    assert len(settled) == 1 and not settled[0].foul and settled[0].wager == 25
    assert settled[0].pai_gow["outcome"] in ("win", "push", "lose")
    # A foul: put the two highest cards of a no-pair-in-back hand in front, if that fouls.
    cards = parse_cards(seat1.cards)
    for a, b in itertools.combinations(cards, 2):
        from controller.game.setting import Setting

        if Setting.from_front(cards, (a, b)).is_foul:
            # Seat 1's second entry: a correction, which needs a supervisor and a reason.
            correction = PlayerSetting(
                seat="1", front=(str(a), str(b)), by="S-0042", reason="keyed wrong"
            )
            effects = table.handle(correction)
            payload = next(e.payload for e in effects if isinstance(e, PlayerSettled))
            assert payload.foul and payload.pai_gow["outcome"] == "lose" and payload.win == -25
            break
    bad = table.handle(PlayerSetting(seat="1", front=("As", "Ks")))
    assert isinstance(bad[0], CommandReply) and (
        bad[0].ok or "is not two of seat" in (bad[0].error or "")
    )


def test_unoccupied_seats_are_not_settled() -> None:
    table, _ = make_table()
    reply = table.handle(SetSeats(occupied={"2": False, "5": False}))
    assert isinstance(reply[0], CommandReply) and reply[0].ok
    [result] = closed(run(table, [rng(1), *packet_events(shuffled(19))]))
    assert [s.seat for s in result.payload.seats] == ["1", "3", "4", "6"]
    assert len(result.payload.positions) == 7  # every position gets a packet, occupied or not
    bad = table.handle(SetSeats(occupied={"9": True}))
    assert (
        isinstance(bad[0], CommandReply)
        and not bad[0].ok
        and "unknown seat 9" in (bad[0].error or "")
    )


def test_envy_pays_other_seats_with_five_dollars_or_more() -> None:
    table, _ = make_table()
    # Seat "1" (position 2) holds four Kings; with RNG 1, packet 1 goes to position 2.
    quads = ["Kc", "Kd", "Kh", "Ks", "2c", "5d", "9h"]
    rest = [str(c) for c in DECK if str(c) not in quads]
    random.Random(20).shuffle(rest)
    deck = rest[:7] + quads + rest[7:]
    table.handle(SetWagers(seat="1", wagers=Wagers(chan_chu=1)))
    table.handle(SetWagers(seat="2", wagers=Wagers(chan_chu=5)))
    table.handle(SetWagers(seat="3", wagers=Wagers(chan_chu=4)))
    [result] = closed(run(table, [rng(1), *packet_events(deck)]))
    seats = {s.seat: s for s in result.payload.seats}
    assert seats["1"].chan_chu.line == "four_of_a_kind" and seats["1"].chan_chu.win == 20
    assert seats["2"].envy is not None and seats["2"].envy.total >= 5
    assert seats["3"].envy is not None and seats["3"].envy.total == 0  # below $5
    assert seats["1"].envy is not None and all(a.from_seat != "1" for a in seats["1"].envy.awards)


def test_devices_faults_and_status() -> None:
    table, _ = make_table()
    effects = table.handle(DeviceOnline(device="shuffler"))
    assert table.devices == {"shuffler": True}
    effects = table.handle(DeviceOffline(device="shuffler", reason="unplugged"))
    assert any(isinstance(e, AlarmRaised) and e.payload.code == "device_offline" for e in effects)
    effects = table.handle(DeviceFault(device="shuffler", code="jam", detail="card jam at exit"))
    assert isinstance(effects[0], AlarmRaised) and "jam" in effects[0].payload.detail
    table.handle(CloseTable())
    reply = table.handle(StatusRequest(request_id="q"))[0]
    assert isinstance(reply, CommandReply) and reply.data and reply.data["table_open"] is False


def test_a_second_position_draw_is_ignored_with_an_alarm() -> None:
    table, _ = make_table()
    run(table, packet_events(shuffled(21))[:2])
    table.handle(rng(3))
    effects = table.handle(rng(5))
    assert any(isinstance(e, AlarmRaised) and e.payload.code == "position_ignored" for e in effects)
    reply = table.handle(EnterDice(dice=(1, 1, 1)))
    assert isinstance(reply[0], CommandReply) and not reply[0].ok


def test_a_second_draw_between_deals_replaces_the_unused_one_and_the_deal_uses_it() -> None:
    """The alarm says the newer draw replaced the older; the round must then use the newer."""
    table, _ = make_table()
    assert table.handle(rng(3)) == []
    [alarm] = table.handle(rng(5))
    assert isinstance(alarm, AlarmRaised) and alarm.payload.code == "position_replaced"
    assert "position 5" in alarm.payload.detail and "position 3" in alarm.payload.detail
    effects = run(table, packet_events(shuffled(22)))
    [opened] = [e for e in effects if isinstance(e, RoundOpened)]
    assert opened.draw is not None and opened.draw.position == 5  # journaled as position_assigned
    [result] = closed(effects)
    assert result.payload.first_position is not None
    assert result.payload.first_position.position == 5


@pytest.mark.parametrize("with_draw", [True, False])
def test_packets_are_numbered_one_to_seven_like_the_reasons(with_draw: bool) -> None:
    """A dead round's packet list counts packets 1–7, the same numbers the reason text uses."""
    table, _ = make_table()
    deck = shuffled(23)
    events = packet_events(deck)
    events[4] = PacketDealt(device="shuffler", index=3, cards=tuple(deck[21:27]))  # packet 4
    effects = run(table, [rng(2), *events] if with_draw else events)
    [result] = closed(effects)
    p = result.payload
    assert p.status == "dead"
    [short] = [r for r in p.reasons if r.code == "short_packet"]
    assert short.detail == "packet 4 has 6 cards"
    assert [pc.packet for pc in p.positions] == [1, 2, 3, 4, 5, 6, 7]
    by_packet = {pc.packet: pc for pc in p.positions}
    assert len(by_packet[4].cards) == 6 and by_packet[4].cards == deck[21:27]
    if with_draw:
        assert [pc.position for pc in p.positions] == [2, 3, 4, 5, 6, 7, 1]
    else:
        assert [pc.seat for pc in p.positions] == [f"packet {n}" for n in range(1, 8)]


@pytest.mark.parametrize("first", [1, 4, 7])
def test_a_settled_round_names_each_position_s_packet(first: int) -> None:
    table, _ = make_table()
    deck = shuffled(24)
    [result] = closed(run(table, [rng(first), *packet_events(deck)]))
    for pc in result.payload.positions:
        assert pc.packet is not None
        assert pc.cards == deck[7 * (pc.packet - 1) : 7 * pc.packet]
        assert pc.position == (first + pc.packet - 2) % 7 + 1


@pytest.mark.parametrize("seed", range(6))
def test_a_settlement_worked_out_at_the_last_packet_is_not_taken_once_seats_or_wagers_change(
    seed: int,
) -> None:
    """The table works the settlement out when the last packet is in (the stub then only
    checks the deck): a seat emptied or a wager placed between the last packet and the stub
    must be in the result, exactly as if it had been made before the deal."""
    deck = shuffled(100 + seed)
    deal = [rng(1 + seed % 7), *packet_events(deck)]
    stub_at = next(i for i, e in enumerate(deal) if isinstance(e, StubVerified))
    changes: list[SetWagers | SetSeats] = [
        SetWagers(seat="1", wagers=Wagers(chan_chu=5, jacks_beat=2, push_ace_high=1)),
        SetSeats(occupied={"3": False}),
    ]
    late, _ = make_table()
    run(late, deal[:stub_at])
    for change in changes:
        assert next(e for e in late.handle(change) if isinstance(e, CommandReply)).ok
    [late_result] = closed(run(late, deal[stub_at:]))
    early, _ = make_table()
    for change in changes:
        early.handle(change)
    [early_result] = closed(run(early, deal))
    assert late_result.payload.seats == early_result.payload.seats
    assert late_result.payload.dealer == early_result.payload.dealer
    assert "3" not in {s.seat for s in late_result.payload.seats}
    seat1 = next(s for s in late_result.payload.seats if s.seat == "1")
    assert seat1.wagers == Wagers(chan_chu=5, jacks_beat=2, push_ace_high=1)
    # And unchanged, the result is the one worked out at the last packet, equal to a fresh one.
    plain, _ = make_table()
    [plain_result] = closed(run(plain, deal))
    fresh = work_out(
        [tuple(deck[7 * i : 7 * i + 7]) for i in range(7)],
        1 + seed % 7,
        plain.settings,
        {},
        {},
    )
    assert plain_result.payload.seats == fresh.seats
    assert plain_result.payload.dealer == fresh.dealer_out


def test_the_settlement_memo_answers_only_for_the_same_inputs() -> None:
    table, _ = make_table()
    packets = [tuple(shuffled(7)[7 * i : 7 * i + 7]) for i in range(7)]
    memo = SettlementMemo()
    first = memo.get(packets, 3, table.settings, {}, {})
    assert memo.get(list(packets), 3, table.settings, {}, {}) is first
    assert memo.get(packets, 4, table.settings, {}, {}) is not first
    other = memo.get(packets, 3, table.settings, {"2": False}, {})
    assert other.seats != first.seats and "2" not in {s.seat for s in other.seats}
    waged = memo.get(packets, 3, table.settings, {}, {"1": Wagers(chan_chu=5)})
    assert waged.seats[0].wagers == Wagers(chan_chu=5)
    copy, _ = make_table()  # equal settings, another object: worked out again
    assert memo.get(packets, 3, copy.settings, {}, {}) is not waged
