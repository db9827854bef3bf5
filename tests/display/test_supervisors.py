"""Individual supervisors and what they are allowed to do, through the real daemon and display
server (docs/audit.md "Latched alarms and acknowledgement", "Corrections", "Who dealt"). The
attacks of the outside audit:

1. an acknowledgement (a void, a correction) was attributed to a free-text name under one shared
   supervisor PIN: with ``[display] supervisors_file`` it needs a supervisor's badge and PIN,
   the journal and the published messages name the badge, and the shared PIN or a typed name
   are refused like any wrong credential;
2. a player-setting correction needed no PIN and no reason and raised nothing: it needs a
   supervisor and a reason, raises a warning the supervisor page shows, and is limited;
3. dealer sign-in told which badges exist by its time: an unknown badge now costs exactly the
   PBKDF2 a known one does (counted, not timed: deterministic on a busy machine).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controller.badges import DealerBook, Lockouts, hash_pin
from controller.display import DisplayService
from controller.journal import Journal
from controller.table import AlarmAcknowledged, AlarmRaised, PlayerSettled
from tests.display.conftest import write_badges, write_secret
from tests.harness import RunningTable, journal_events, running_table

VOID_PIN = "735102"
PINS = {"S-0042": "604918", "S-0043": "913275"}
FAST = 10_000  # PBKDF2 iterations of the test files (the tool's default is 100,000)


def _events(journal: Journal, kind: str) -> list[dict[str, Any]]:
    return [payload for k, payload in journal_events(journal) if k == kind]


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    # As the pages post: JSON, with their own origin (the server refuses anything else).
    origin = url.split("/api/", 1)[0]
    async with http.post(url, json=body, headers={"Origin": origin}) as r:
        return r.status, await r.json()


def _config(directory: Path, *, supervisors: bool = True, limits: str = "") -> str:
    directory.mkdir(parents=True, exist_ok=True)
    pin = write_secret(directory / "void.pin", VOID_PIN)
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    if supervisors:
        extra += f'supervisors_file = "{write_badges(directory / "supervisors", PINS, FAST)}"\n'
    return extra + (f"\n[limits]\n{limits}\n" if limits else "")


# --- 1. an acknowledgement and a void name a badge checked against the supervisors file ------


async def test_an_acknowledgement_names_the_supervisor_s_badge_not_a_typed_name(
    tmp_path: Path,
) -> None:
    display = DisplayService(port=0)
    extra = _config(tmp_path / "etc")
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        url = f"{display.url}/api/alarms/acknowledge"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{display.url}/api/state") as r:
                controls = (await r.json())["controls"]
            assert controls["supervisor"] == "badge" and controls["void_enabled"]
            # The attacks: the shared void PIN under a typed name, an unknown badge, a known
            # badge with another supervisor's PIN. Each refused as a wrong credential.
            for attempt in (
                {"by": "Supervisor S-0042", "pin": VOID_PIN},
                {"badge": "S-9999", "pin": PINS["S-0042"]},
                {"badge": "S-0042", "pin": PINS["S-0043"]},
            ):
                status, body = await _post(http, url, {"alarm_id": "any", **attempt})
                assert status == 403 and body["error"] == "unknown badge or wrong PIN", attempt
            refusals = _events(t.journal, "command_refused")
            assert [(r["command"], r["reason"]) for r in refusals] == [
                ("acknowledge_alarm", "wrong_pin")
            ] * 3
            # Three from one source: the latched critical alarm, as for wrong void PINs.
            [alarm] = [a for a in _events(t.journal, "alarm") if a["code"] == "command_refused"]
            assert alarm["ack_required"]
            # The right badge and PIN; a name typed beside them is not what is recorded.
            body = {
                "alarm_id": alarm["alarm_id"],
                "badge": "S-0042",
                "by": "Somebody Else",
                "pin": PINS["S-0042"],
                "note": "a test",
            }
            status, answer = await _post(http, url, body)
            assert status == 200 and answer["ok"], answer
        [ack] = _events(t.journal, "alarm_acknowledged")
        assert (ack["by"], ack["channel"], ack["note"]) == ("S-0042", "kiosk", "a test")
        [command] = _events(t.journal, "command.acknowledge_alarm")  # refusals: command_refused
        assert command["by"] == "S-0042" and command["outcome"]["ok"]
        [published] = [e.payload for e in t.effects if isinstance(e, AlarmAcknowledged)]
        assert published.by == "S-0042"  # the alarm_ack message
        assert t.daemon.table.latched == {}


async def test_a_void_names_the_supervisor_s_badge(tmp_path: Path) -> None:
    display = DisplayService(port=0)
    extra = _config(tmp_path / "etc")
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        result = await t.deal(rng_number=3)
        url = f"{display.url}/api/void"
        async with aiohttp.ClientSession() as http:
            status, _ = await _post(http, url, {"pin": VOID_PIN, "reason": "Cards exposed"})
            assert status == 403  # the shared PIN voids nothing once supervisors have badges
            body = {"badge": "S-0043", "pin": PINS["S-0043"], "reason": "Cards exposed"}
            status, answer = await _post(http, url, body)
            assert status == 200 and answer["ok"], answer
        voided = await t.next_closed()
        assert voided.round_id == result.round_id and voided.status == "void"
        [command] = _events(t.journal, "command.void_round")
        assert command["by"] == "S-0043" and command["reason"] == "Cards exposed"
        [alarm] = [a for a in _events(t.journal, "alarm") if a["code"] == "round_voided"]
        assert alarm["by"] == "S-0043" and "voided by S-0043" in alarm["detail"]
        [refused] = _events(t.journal, "command_refused")
        assert (refused["command"], refused["reason"]) == ("void_round", "wrong_pin")


async def test_an_unreadable_supervisors_file_never_falls_back_to_the_shared_pin(
    tmp_path: Path,
) -> None:
    display = DisplayService(port=0)
    extra = _config(tmp_path / "etc")
    # Garbled after the config was checked (check-config and run refuse it at start).
    (tmp_path / "etc" / "supervisors").write_text("S-0042 604918\n", encoding="utf-8")
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        await t.deal(rng_number=2)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{display.url}/api/state") as r:
                controls = (await r.json())["controls"]
            assert not controls["void_enabled"]
            assert "supervisors file could not be read" in controls["void_problem"]
            status, body = await _post(http, f"{display.url}/api/void", {"pin": VOID_PIN})
            assert status == 403 and "supervisors file could not be read" in body["error"]
        assert [r["reason"] for r in _events(t.journal, "command_refused")] == ["disabled"]


def test_wrong_supervisor_credentials_lock_their_badge_out_not_the_address() -> None:
    """Issue 40 (F6): five wrong PINs lock out that badge, from every address (its PIN cannot
    be guessed from many), and not the address: on loopback or behind a proxy every supervisor
    shares it, and the others still act. A scan of badges from one address is stopped by the
    address's own, higher limit."""
    from controller.credentials import ADDRESS_TRIES
    from controller.display.supervisors import PinGuard, SupervisorGate

    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    book = DealerBook(
        {b: hash_pin(p, iterations=FAST) for b, p in PINS.items()},
        badge_lockouts=Lockouts(clock=clock),
    )
    gate = SupervisorGate(PinGuard(VOID_PIN, Lockouts(clock=clock)), book)
    for _ in range(5):
        assert gate.check("S-0042", "000000", "", "10.0.0.9").decision.code == "wrong_pin"
    locked = gate.check("S-0042", PINS["S-0042"], "", "10.0.0.9").decision
    assert not locked.allowed and locked.code == "locked_out"
    elsewhere = gate.check("S-0042", PINS["S-0042"], "", "127.0.0.1").decision
    assert not elsewhere.allowed and elsewhere.code == "locked_out"  # the badge, anywhere
    others = [b for b in PINS if b != "S-0042"]
    assert others and all(
        gate.check(b, PINS[b], "", "10.0.0.9").decision.allowed for b in others
    )  # the same address: every other supervisor still acts
    # A scan: one wrong PIN for each of many badges from one address locks the address out.
    for n in range(ADDRESS_TRIES):
        gate.check(f"X-{n}", "000000", "", "10.9.9.9")
    scanned = gate.check(others[0], PINS[others[0]], "", "10.9.9.9").decision
    assert not scanned.allowed and scanned.code == "locked_out"
    now[0] += 61
    ok = gate.check(" S-0042 ", PINS["S-0042"], "Somebody Else", "10.0.0.9")
    assert ok.decision.allowed and ok.by == "S-0042"
    # Without a supervisors file: the shared PIN, and the name typed.
    fallback = SupervisorGate(PinGuard(VOID_PIN)).check("", VOID_PIN, "Kim", "10.0.0.9")
    assert fallback.decision.allowed and fallback.by == "Kim"


# --- 2. a correction needs a supervisor and a reason, raises an alarm, and is limited --------


async def _correcting(t: RunningTable) -> str:
    """A settled round and one seat's first entry; that seat's label."""
    result = await t.deal(rng_number=4)
    assert result.dealer is not None and not result.dealer.two_jacks
    return result.seats[0].seat


async def test_a_correction_needs_a_supervisor_and_a_reason_and_raises_an_alarm(
    tmp_path: Path,
) -> None:
    display = DisplayService(port=0)
    extra = _config(tmp_path / "etc", limits="corrections_per_round = 1")
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        seat = await _correcting(t)
        url = f"{display.url}/api/player-setting"
        first = {"seat": seat, "house_way": True}
        async with aiohttp.ClientSession() as http:
            status, answer = await _post(http, url, first)
            assert status == 200 and answer["data"]["corrects"] is None  # a first entry: no PIN
            again = {"seat": seat, "front": answer["data"]["setting"]["back"][:2]}
            # The attack: the same seat entered again with no PIN and no reason.
            status, answer = await _post(http, url, again)
            assert status == 409
            assert "a correction needs a supervisor (badge and PIN) and a reason" in answer["error"]
            # A wrong credential: refused before the table, journaled, counted.
            wrong = {**again, "badge": "S-0042", "pin": "000000", "reason": "keyed wrong"}
            status, answer = await _post(http, url, wrong)
            assert status == 403 and answer["error"] == "unknown badge or wrong PIN"
            # The right one without a reason.
            right = {**again, "badge": "S-0042", "pin": PINS["S-0042"]}
            status, answer = await _post(http, url, right)
            assert status == 409 and "needs a reason" in answer["error"]
            status, answer = await _post(http, url, {**right, "reason": "keyed the wrong cards"})
            assert status == 200, answer
            assert answer["data"]["by"] == "S-0042" and answer["data"]["corrects"]
            # Over [limits] corrections_per_round = 1: refused, saying so.
            third = {**right, "house_way": True, "front": None, "reason": "again"}
            status, answer = await _post(http, url, third)
            assert status == 409
            assert "the most [limits] corrections_per_round allows" in answer["error"]
            # The supervisor page's alarms show the correction.
            async with http.get(f"{display.url}/api/state") as r:
                shown = (await r.json())["alarms"]
        codes = [a["code"] for a in shown]
        assert "setting_corrected" in codes and "correction_refused" in codes
        [corrected] = [a for a in _events(t.journal, "alarm") if a["code"] == "setting_corrected"]
        assert corrected["severity"] == "warning" and corrected["by"] == "S-0042"
        assert "corrected by S-0042: keyed the wrong cards" in corrected["detail"]
        settled = [e.payload for e in t.effects if isinstance(e, PlayerSettled)]
        assert [(p.by, p.reason) for p in settled] == [
            (None, ""),
            ("S-0042", "keyed the wrong cards"),
        ]
        [refused] = _events(t.journal, "command_refused")
        assert (refused["command"], refused["reason"]) == ("player_setting", "wrong_pin")
        outcomes = [c["outcome"]["ok"] for c in _events(t.journal, "command.player_setting")]
        assert outcomes == [True, False, False, True, False]  # every try is journaled
        alarms = [e.payload for e in t.effects if isinstance(e, AlarmRaised)]
        assert all(not a.ack_required for a in alarms if a.code == "setting_corrected")


async def test_without_a_supervisors_file_a_correction_needs_the_void_pin_and_a_name(
    tmp_path: Path,
) -> None:
    display = DisplayService(port=0)
    extra = _config(tmp_path / "etc", supervisors=False)
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        seat = await _correcting(t)
        url = f"{display.url}/api/player-setting"
        async with aiohttp.ClientSession() as http:
            status, _ = await _post(http, url, {"seat": seat, "house_way": True})
            assert status == 200
            # The attack as the audit sent it: the same seat entered again, nothing more.
            status, answer = await _post(http, url, {"seat": seat, "house_way": True})
            assert status == 409, answer
            assert "a correction needs a supervisor" in answer["error"]
            async with http.get(f"{display.url}/api/state") as r:
                assert (await r.json())["controls"]["supervisor"] == "shared_pin"
            again = {"seat": seat, "house_way": True, "reason": "keyed wrong"}
            status, answer = await _post(http, url, {**again, "by": "Kim", "pin": "111111"})
            assert status == 403 and answer["error"] == "wrong PIN"
            status, answer = await _post(http, url, {**again, "pin": VOID_PIN})
            assert status == 400 and "name" in answer["error"]
            status, answer = await _post(http, url, {**again, "by": "Kim", "pin": VOID_PIN})
            assert status == 200 and answer["data"]["by"] == "Kim", answer


# --- 3. sign-in (and a supervisor's check) costs the same for an unknown badge ----------------


@pytest.fixture
def pbkdf2_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """Every PBKDF2 run while the test runs, as (iterations, salt length), from any thread."""
    calls: list[tuple[int, int]] = []
    lock = threading.Lock()
    real = hashlib.pbkdf2_hmac

    def counted(name: str, password: bytes, salt: bytes, iterations: int, *a: Any) -> bytes:
        with lock:
            calls.append((iterations, len(salt)))
        return real(name, password, salt, iterations, *a)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counted)
    yield calls


@pytest.mark.parametrize("iterations", [FAST, 100_000])
def test_an_unknown_badge_costs_exactly_the_pbkdf2_of_a_known_one(
    pbkdf2_calls: list[tuple[int, int]], iterations: int
) -> None:
    """Before: an unknown badge ran two PBKDF2s (a dummy hashed afresh, then checked) at the
    tool's default 100,000 iterations, a known one one at the file's own: the time of a refusal
    told which badges exist. Now each runs one, with the file's parameters."""
    book = DealerBook({"D-17": hash_pin("4821", iterations=iterations)})
    work: dict[str, list[tuple[int, int]]] = {}
    for case, badge, pin in (
        ("known, wrong PIN", "D-17", "0000"),
        ("unknown", "D-99", "4821"),
        ("unknown, empty", "", ""),
        ("known, right PIN", "D-17", "4821"),
    ):
        pbkdf2_calls.clear()
        decision = book.check(badge, pin, f"10.0.0.{len(work)}")
        work[case] = list(pbkdf2_calls)
        assert decision.allowed == (case == "known, right PIN"), case
    assert all(calls == [(iterations, 16)] for calls in work.values()), work


async def test_sign_in_and_supervisor_checks_cost_the_same_for_any_badge(
    tmp_path: Path, pbkdf2_calls: list[tuple[int, int]]
) -> None:
    """The same, counted through the real server: a sign-in and an acknowledgement with an
    unknown badge run exactly the PBKDF2 that a known badge with a wrong PIN runs."""
    directory = tmp_path / "etc"
    extra = _config(directory)
    dealers = write_badges(directory / "dealers", {"D-17": "4821"}, FAST)
    extra = extra.replace("[display]\n", f'[display]\ndealers_file = "{dealers}"\n')
    display = DisplayService(port=0)
    async with running_table(tmp_path / "run", services=[display], config_extra=extra):
        await display.wait_started()
        work: dict[str, list[tuple[int, int]]] = {}
        async with aiohttp.ClientSession() as http:
            for case, path, body in (
                ("dealer known", "sign-in", {"badge": "D-17", "pin": "0000"}),
                ("dealer unknown", "sign-in", {"badge": "D-99", "pin": "0000"}),
                ("supervisor known", "alarms/acknowledge", {"badge": "S-0042", "pin": "0"}),
                ("supervisor unknown", "alarms/acknowledge", {"badge": "S-9", "pin": "0"}),
            ):
                pbkdf2_calls.clear()
                body = {"alarm_id": "a-1", **body} if "alarm" in path else body
                status, answer = await _post(http, f"{display.url}/api/{path}", body)
                assert (status, answer["error"]) == (403, "unknown badge or wrong PIN"), case
                work[case] = list(pbkdf2_calls)
    assert all(calls == [(FAST, 16)] for calls in work.values()), work
