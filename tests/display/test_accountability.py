"""Who did what, through the real daemon and display server (docs/audit.md): every wrong PIN
journaled and alarmed after three, the alarm latched across a restart until a named person
acknowledges it with the supervisor's PIN, and a dealer's sign-in recorded on every round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from controller.badges import hash_pin
from controller.display import DisplayService
from controller.journal import Journal
from tests.display.conftest import write_secret
from tests.harness import journal_events, running_table

PIN = "735102"


def _events(journal: Journal, kind: str) -> list[dict[str, Any]]:
    return [payload for k, payload in journal_events(journal) if k == kind]


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    # As the kiosk page posts: JSON, with its own origin (the server refuses anything else).
    origin = url.split("/api/", 1)[0]
    async with http.post(url, json=body, headers={"Origin": origin}) as r:
        return r.status, await r.json()


async def test_wrong_pins_are_journaled_alarmed_latched_and_acknowledged(tmp_path: Path) -> None:
    pin = write_secret(tmp_path / "void.pin", PIN)
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    journal_path = tmp_path / "journal.sqlite3"
    display = DisplayService(port=0)
    async with running_table(
        tmp_path / "a", services=[display], config_extra=extra, journal_path=journal_path
    ) as t:
        await display.wait_started()
        await t.deal(rng_number=2)
        async with aiohttp.ClientSession() as http:
            for guess in ("000000", "111111", "222222"):
                status, body = await _post(http, f"{display.url}/api/void", {"pin": guess})
                assert status == 403 and body["error"] == "wrong PIN"
            refusals = _events(t.journal, "command_refused")
            assert [r["reason"] for r in refusals] == ["wrong_pin"] * 3
            assert refusals[0]["channel"] == "kiosk" and refusals[0]["command"] == "void_round"
            [alarm] = [a for a in _events(t.journal, "alarm") if a["code"] == "command_refused"]
            assert alarm["severity"] == "critical" and alarm["ack_required"]
            latched = t.daemon.table.status().alarms_unacknowledged
            assert [a.alarm_id for a in latched] == [alarm["alarm_id"]]
            # The page shows it: the live state's status carries the latched alarm.
            async with http.get(f"{display.url}/api/state") as r:
                state = await r.json()
            assert [a["alarm_id"] for a in state["status"]["alarms_unacknowledged"]] == [
                alarm["alarm_id"]
            ]
    # A restart keeps it latched.
    display = DisplayService(port=0)
    async with running_table(
        tmp_path / "b", services=[display], config_extra=extra, journal_path=journal_path
    ) as t:
        await display.wait_started()
        assert [a.alarm_id for a in t.daemon.table.latched.values()] == [alarm["alarm_id"]]
        async with aiohttp.ClientSession() as http:
            url = f"{display.url}/api/alarms/acknowledge"
            body = {"alarm_id": alarm["alarm_id"], "by": "Supervisor S-0042", "pin": "999999"}
            status, _ = await _post(http, url, body)
            assert status == 403  # a wrong PIN acknowledges nothing (and is journaled)
            status, answer = await _post(http, url, {**body, "pin": PIN, "note": "my test"})
            assert status == 200 and answer["ok"], answer
        [ack] = _events(t.journal, "alarm_acknowledged")
        assert ack["by"] == "Supervisor S-0042" and ack["channel"] == "kiosk"
        assert ack["alarm_id"] == alarm["alarm_id"] and ack["note"] == "my test"
        assert t.daemon.table.latched == {}
        assert t.journal.kept.remembered("latched_alarms") == []
        assert _events(t.journal, "command_refused")[-1]["command"] == "acknowledge_alarm"


async def test_a_dealer_signs_in_and_every_round_says_who_dealt(tmp_path: Path) -> None:
    dealers = tmp_path / "dealers"
    dealers.write_text(
        f"# badge and PIN hash\nD-17 {hash_pin('4821')}\nD-23 {hash_pin('9034')}\n",
        encoding="utf-8",
    )
    extra = f'[display]\ndealers_file = "{dealers}"\n'
    display = DisplayService(port=0)
    async with running_table(tmp_path, services=[display], config_extra=extra) as t:
        await display.wait_started()
        async with aiohttp.ClientSession() as http:
            url = f"{display.url}/api/sign-in"
            status, _ = await _post(http, url, {"badge": "D-17", "pin": "0000"})
            assert status == 403
            status, _ = await _post(http, url, {"badge": "D-99", "pin": "4821"})
            assert status == 403  # an unknown badge is refused the same way
            status, body = await _post(http, url, {"badge": "D-17", "pin": "4821"})
            assert status == 200 and body["data"]["rotation"] is False
            first = await t.deal(rng_number=1)
            status, body = await _post(http, url, {"badge": "D-23", "pin": "9034"})
            assert body["data"] == {"dealer_id": "D-23", "replaces": "D-17", "rotation": True}
            second = await t.deal(rng_number=5)
            status, body = await _post(http, f"{display.url}/api/sign-out", {})
            assert status == 200
        assert (first.dealer_id, second.dealer_id) == ("D-17", "D-23")
        refused = _events(t.journal, "command_refused")
        assert [(r["command"], r["reason"]) for r in refused] == [("sign_in", "wrong_pin")] * 2
        signed = _events(t.journal, "command.sign_in")
        assert [s["dealer_id"] for s in signed] == ["D-17", "D-23"]
        assert signed[1]["origin"] == {"channel": "kiosk", "identity": "127.0.0.1"}
        assert t.journal.kept.remembered("dealer_signed_in") == ""
