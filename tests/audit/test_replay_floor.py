"""The audit deals a round again with what the floor gave it (issue 39): the dealer signed in as
it opened — between rounds, mid-round (a rotation), signed out, across a restart, and in a
journal written before rounds journaled their own ``round_opened`` row — and the dealer's dice
typed in mid-deal. Then the adversary: a recorded dealer rewritten with the seal and every link
recomputed is found by the replay; one who also rewrites the round's ``round_opened`` row is
found only by the casino's copy of the feed (docs/audit.md says so)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.audit import verify_journal
from controller.journal import Journal, Transaction
from controller.journal.audit import read_feed, recall_rounds, verify_feed
from controller.journal.store import seal_of
from controller.messages import EnterDice, SetSeats, SignIn, SignOut
from controller.recorder import EFFECTS, Recorder
from controller.table import RoundOpened, Table
from tests.controller.test_recorder import _apply
from tests.journal.test_audit_attacks import casino_feed, relink
from tests.table.test_machine import T0, make_table, packet_events, rng, shuffled


def _journal(path: Path, steps: list[Any], table: Table | None = None) -> Table:
    table = table or make_table()[0]
    recorder = Recorder(table_id="PG-01", prefix="casino/PG-01/", publishing=True)
    with Journal.open(path, "PG-01", clock=lambda: T0) as journal:
        for step in steps:
            _apply(journal, recorder, table, step)
    return table


def _deal(seed: int, draw: int = 3) -> list[Any]:
    return [rng(draw), *packet_events(shuffled(seed))]


def _lines(report: Any) -> list[str]:
    return [f.line() for f in report.findings]


def _dealers(path: Path) -> list[str | None]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT result FROM rounds ORDER BY seq").fetchall()
    return [json.loads(r[0]).get("dealer_id") for r in rows]


def test_sign_in_between_rounds_a_rotation_mid_round_and_a_sign_out_verify(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    deal = packet_events(shuffled(12))
    _journal(
        path,
        [
            *_deal(11),
            SignIn(dealer_id="D-17"),  # between rounds: the next round is D-17's
            *_deal(13),
            rng(5),
            *deal[:4],
            SignIn(dealer_id="D-23"),  # a rotation mid-round: that round stays D-17's
            *deal[4:],
            *_deal(14),
            SignOut(),
            *_deal(15),
        ],
    )
    assert _dealers(path) == [None, "D-17", "D-17", "D-23", None]
    report = verify_journal(path)
    assert report.ok, _lines(report)
    assert report.recomputed == 5


def test_a_sign_in_between_rounds_is_no_part_of_the_round_before_it(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    _journal(path, [*_deal(11), SignIn(dealer_id="D-17"), *_deal(13)])
    first, second = recall_rounds(path, last=2)
    assert "command.sign_in" not in [e["kind"] for e in first["events"]]
    opened = [e for e in second["events"] if e["kind"] == "round_opened"]
    assert [e["payload"] for e in opened] == [{"dealer_id": "D-17"}]


def test_the_dealer_s_dice_typed_in_mid_deal_are_dealt_again(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    deal = packet_events(shuffled(21))
    _journal(path, [*deal[:3], EnterDice(dice=(2, 3, 6)), *deal[3:]])
    with sqlite3.connect(path) as conn:
        (status,) = conn.execute("SELECT status FROM rounds").fetchone()
    assert status == "settled"
    report = verify_journal(path)
    assert report.ok and report.recomputed == 1, _lines(report)


def _old_round_opened(r: Recorder, tx: Transaction, effect: RoundOpened) -> bool:
    """The recorder before rounds journaled their own ``round_opened`` row."""
    tx.open_round(effect.round_id, effect.round_seq)
    if effect.draw is not None:
        tx.record_event("position_assigned", effect.draw, effect.round_id)
    return False


@pytest.fixture
def old_recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(EFFECTS, RoundOpened, _old_round_opened)
    yield


def test_a_journal_from_before_round_opened_rows_verifies_by_its_chained_dealer(
    tmp_path: Path, old_recorder: None
) -> None:
    """A casino's journal written before this fix: its rounds have no ``round_opened`` row, and
    the chained record of the dealer signed in before each round says who dealt it."""
    path = tmp_path / "j.sqlite3"
    table = _journal(path, [*_deal(11), SignIn(dealer_id="D-17"), *_deal(13), SignOut()])
    # A restart: the dealer comes back from the kept state, not from a new row.
    _journal(path, [SignIn(dealer_id="D-40"), *_deal(14)], table)
    with sqlite3.connect(path) as conn:
        kinds = {k for (k,) in conn.execute("SELECT kind FROM events")}
    assert "round_opened" not in kinds
    assert _dealers(path) == [None, "D-17", "D-40"]
    report = verify_journal(path)
    assert report.ok and report.recomputed == 3, _lines(report)


def _forge_dealer(path: Path, dealer: str, *, opened_too: bool) -> str:
    """The adversary with the file and the source: the second round's recorded dealer rewritten,
    its seal recomputed (and, ``opened_too``, its ``round_opened`` row), every link relinked."""
    with sqlite3.connect(path) as conn:
        rid, result = conn.execute("SELECT round_id, result FROM rounds WHERE seq = 2").fetchone()
        data = json.loads(result)
        data["dealer_id"] = dealer
        forged = json.dumps(data, separators=(",", ":"))
        conn.execute("UPDATE rounds SET result = ? WHERE round_id = ?", (forged, rid))
        conn.execute(
            "UPDATE events SET payload = ? WHERE round_id = ? AND kind = 'round_sealed'",
            (json.dumps(seal_of(rid, "settled", None, forged), separators=(",", ":")), rid),
        )
        if opened_too:
            conn.execute(
                "UPDATE events SET payload = ? WHERE round_id = ? AND kind = 'round_opened'",
                (json.dumps({"dealer_id": dealer}), rid),
            )
        relink(conn)
    return str(rid)


def test_a_rewritten_dealer_with_its_seal_and_links_recomputed_is_found(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    _journal(path, [*_deal(11), SignIn(dealer_id="D-17"), *_deal(13)])
    rid = _forge_dealer(path, "D-99", opened_too=False)
    report = verify_journal(path)
    assert [f.round_id for f in report.findings] == [rid]
    assert "'dealer_id' differs" in report.findings[0].detail


def test_a_rewritten_dealer_and_round_opened_row_are_found_by_the_casino_s_copy(
    tmp_path: Path,
) -> None:
    """What the journal alone cannot prove: every row of the round rewritten consistently and
    relinked. The casino's copy of the feed (as the table sent it) still names D-17."""
    path = tmp_path / "j.sqlite3"
    _journal(path, [*_deal(11), SignIn(dealer_id="D-17"), *_deal(13)])
    feed = casino_feed(path)
    rid = _forge_dealer(path, "D-99", opened_too=True)
    assert verify_journal(path).ok  # the limit docs/audit.md states
    checked = verify_feed(path, read_feed(feed))
    assert [f.round_id for f in checked.findings] == [rid]


def test_a_round_dealt_with_every_seat_empty_is_dealt_again_so(tmp_path: Path) -> None:
    """Found by the stateful test: every seat set unoccupied, a round settles no seat; the
    replay took "no seat in the result" for "every seat" and called it tampered."""
    path = tmp_path / "j.sqlite3"
    table, _ = make_table()
    _journal(path, [SetSeats(occupied=dict.fromkeys(table.occupied, False)), *_deal(11)], table)
    with sqlite3.connect(path) as conn:
        (result,) = conn.execute("SELECT result FROM rounds").fetchone()
    assert json.loads(result)["seats"] == []
    report = verify_journal(path)
    assert report.ok and report.recomputed == 1, _lines(report)
