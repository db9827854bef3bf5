"""The supervisor page in a real browser: status, devices, alarms, charts, the searchable round
history with every journaled detail, escaping of device text, and remote access by signing in
with the token (never in the address)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from controller.display import DisplayService
from controller.messages import RoundPayload
from controller.table import AlarmRaised, Refusal
from drivers.events import DeviceFault
from tests.display.conftest import (
    SMALL_KIOSK,
    kiosk,
    shot,
    unavailable,
    write_badges,
    write_secret,
)
from tests.display.test_access import non_loopback_address
from tests.harness import journal_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

HOSTILE = '<img src=x onerror="window.__xss=1">'


async def test_supervisor_sees_status_history_charts_and_every_detail(
    browser: Browser, tmp_path: Path
) -> None:
    async with kiosk(browser, tmp_path, path="/supervisor", seed=5) as k:
        page, t = k.page, k.table
        rounds: list[RoundPayload] = [await t.deal() for _ in range(12)]
        dead = await t.deal(faults="short_packet")
        last = await t.deal()
        rounds.append(last)

        # Live: the history follows the table without a reload.
        await expect(page.locator(f'#rounds tr[data-round-id="{last.round_id}"]')).to_be_visible()
        await expect(page.locator("#rounds tr.round-row")).to_have_count(14)
        await expect(page.locator("#devices .device.up")).to_have_count(2)
        await expect(page.locator("#table-open")).to_have_text("TABLE OPEN")
        # Nobody can acknowledge here (no supervisor credential): the header says read only.
        await expect(page.locator(".brand .game")).to_have_text("PIT SUPERVISOR · READ ONLY")

        # Charts, drawn as inline SVG from the JSON endpoints.
        await expect(page.locator("#chart-hourly svg rect").first).to_be_attached()
        settled = [r for r in rounds if r.status == "settled"]
        jacks = sum(1 for r in settled if r.dealer and r.dealer.two_jacks)
        await expect(page.locator("#jacks-headline")).to_contain_text(
            f"{jacks} of {len(settled)} settled rounds"
        )
        await expect(page.locator("#jacks-headline")).to_contain_text("expected 7.98%")
        await expect(page.locator("#chart-jacks svg polyline")).to_be_attached()
        await expect(page.locator("#chart-sides svg")).to_contain_text("Chan Chu")

        # Search by part of a round id, then every detail of that round.
        detail = page.locator("#round-detail")
        await page.locator("#search").fill(dead.round_id[-10:].lower())
        await expect(page.locator("#rounds tr.round-row")).to_have_count(1)
        await page.locator(f'#rounds tr[data-round-id="{dead.round_id}"]').click()
        await expect(detail.locator(f'.d-head[data-round-id="{dead.round_id}"]')).to_be_visible()
        await expect(detail).to_contain_text("A packet was short")
        await expect(detail).to_contain_text(dead.reasons[0].detail)
        await expect(detail.locator(".positions li")).to_have_count(7)  # the packets as dealt
        await expect(detail.locator(".events")).to_contain_text("packet dealt")

        # By number: a settled round with its setting and seats.
        shown = next((r for r in rounds if r.dealer and r.dealer.setting), rounds[0])
        await page.locator("#search").fill(f"#{shown.round_seq}")
        await expect(page.locator("#rounds tr.round-row")).to_have_count(1)
        await page.locator("#search").fill("")
        await expect(page.locator("#rounds tr.round-row")).to_have_count(14)
        await page.locator(f'#rounds tr[data-round-id="{shown.round_id}"]').click()
        await expect(detail.locator(f'.d-head[data-round-id="{shown.round_id}"]')).to_be_visible()
        await expect(detail.locator(".seats-table tbody tr")).to_have_count(len(shown.seats))
        await detail.locator(".events summary").first.click()
        await expect(detail.locator(".events pre").first).to_be_visible()
        await shot(page, "supervisor-1920x1080")
        await page.set_viewport_size(SMALL_KIOSK)
        await shot(page, "supervisor-1280x800")

        # Text from devices is shown as text, never as markup.
        t.daemon.put_nowait(DeviceFault(device="shuffler", code="<b>jam</b>", detail=HOSTILE))
        alarm = page.locator("#alarms .alarm").first
        await expect(alarm.locator(".info")).to_have_text(f"<b>jam</b>: {HOSTILE}")
        await expect(alarm.locator(".code")).to_have_text("Device fault")
        assert await page.locator("#alarms img, #alarms .info b").count() == 0
        assert await page.evaluate("window.__xss") is None
        assert any(isinstance(e, AlarmRaised) and HOSTILE in e.payload.detail for e in t.effects)
        await shot(page, "supervisor-alarm-escaped-1280x800")


async def test_remote_supervisor_page_needs_the_token(browser: Browser, tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    token = write_secret(tmp_path / "supervisor.token", "pit-boss-7f3a")
    extra = f'[display]\nhost = "0.0.0.0"\nsupervisor_token_file = "{token}"\n'
    display = DisplayService(host="0.0.0.0", port=0)
    async with kiosk(
        browser, tmp_path / "run", path="/supervisor", config_extra=extra, display=display
    ) as k:
        result = await k.table.deal()
        remote = f"http://{address}:{display.port}/supervisor"
        response = await k.page.goto(remote)
        assert response is not None and response.status == 401
        await expect(k.page.locator("#login-form")).to_be_visible()  # the sign-in page, no data
        await shot(k.page, "supervisor-remote-refused")
        # The token in the address grants nothing and leaves the address.
        response = await k.page.goto(remote + "?token=pit-boss-7f3a")
        assert response is not None and response.status == 401
        assert k.page.url == remote
        await k.page.locator("#login-token").fill("not-the-token")
        await k.page.locator("#login-form button").click()
        await expect(k.page.locator("#login-note")).to_have_text("wrong supervisor token")
        await k.page.locator("#login-token").fill("pit-boss-7f3a")
        await k.page.locator("#login-form button").click()
        await k.page.wait_for_selector("#link.up")  # the session cookie carries the live stream
        assert k.page.url == remote
        await expect(
            k.page.locator(f'#rounds tr[data-round-id="{result.round_id}"]')
        ).to_be_visible()
        await shot(k.page, "supervisor-remote-with-token")


async def test_a_latched_alarm_is_shown_until_a_named_person_acknowledges_it(
    browser: Browser, tmp_path: Path
) -> None:
    pin = write_secret(tmp_path / "void.pin", "604918")
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(browser, tmp_path / "run", path="/supervisor", config_extra=extra) as k:
        page, t = k.page, k.table
        await expect(page.locator("#latched")).to_be_hidden()
        for _ in range(3):  # a guesser at a display: journaled, then one critical alarm
            t.daemon.refused(Refusal("display", "10.9.8.7", "void_round", "wrong_pin", "wrong PIN"))
        item = page.locator("#latched-list li.latched-alarm")
        await expect(item).to_have_count(1)
        # In words: "void round", "(wrong PIN)", never void_round or wrong_pin.
        await expect(item).to_contain_text("void round commands from display 10.9.8.7")
        await expect(item).to_contain_text("(wrong PIN)")
        await expect(page.locator("#dealer")).to_have_text("No dealer signed in")
        await shot(page, "supervisor-latched-alarm")
        await item.locator(".ack-by").fill("Supervisor Kim")
        await item.locator(".ack-pin").fill("111111")
        await item.locator("button").click()
        await expect(item.locator(".ack-note")).to_have_text("wrong PIN")
        await item.locator(".ack-pin").fill("604918")
        await item.locator("button").click()
        await expect(page.locator("#latched")).to_be_hidden()
        [ack] = [p for kind, p in journal_events(t.journal) if kind == "alarm_acknowledged"]
        assert ack["by"] == "Supervisor Kim"


async def test_with_a_supervisors_file_the_acknowledgement_is_by_badge_and_pin(
    browser: Browser, tmp_path: Path
) -> None:
    supervisors = write_badges(tmp_path / "supervisors", {"S-0042": "604918"})
    extra = f'[display]\nsupervisors_file = "{supervisors}"\n'
    async with kiosk(browser, tmp_path / "run", path="/supervisor", config_extra=extra) as k:
        page, t = k.page, k.table
        for _ in range(3):
            t.daemon.refused(Refusal("display", "10.9.8.7", "void_round", "wrong_pin", "wrong PIN"))
        item = page.locator("#latched-list li.latched-alarm")
        await expect(item).to_have_count(1)
        await expect(page.locator("#latched-how")).to_contain_text("with badge and PIN")
        await expect(item.locator(".ack-by")).to_have_attribute("placeholder", "supervisor badge")
        await item.locator(".ack-by").fill("S-0042")
        await item.locator(".ack-pin").fill("111111")
        await item.locator("button").click()
        await expect(item.locator(".ack-note")).to_have_text("unknown badge or wrong PIN")
        await item.locator(".ack-pin").fill("604918")
        await shot(page, "supervisor-acknowledge-by-badge")
        await item.locator("button").click()
        await expect(page.locator("#latched")).to_be_hidden()
        [ack] = [p for kind, p in journal_events(t.journal) if kind == "alarm_acknowledged"]
        assert ack["by"] == "S-0042"


async def test_the_game_protection_panel_shows_a_weak_shuffler_caught(
    browser: Browser, tmp_path: Path
) -> None:
    async with kiosk(browser, tmp_path, path="/supervisor", bias="one_riffle") as k:
        page, t = k.page, k.table
        await expect(page.locator("#protection-tests li.ptest")).to_have_count(22)
        await expect(page.locator("#protection-tests li.alarmed")).to_have_count(0)
        for n in range(5):
            await t.deal(rng_number=n + 1)
        alarmed = page.locator("#protection-tests li.alarmed")
        await expect(alarmed.first).to_be_visible()
        await alarmed.first.click()
        detail = page.locator("#protection-detail")
        await expect(detail.locator(".flag")).to_contain_text("ALARM since")
        await expect(detail.locator(".flag")).to_contain_text("serviced")
        await expect(detail.locator("svg polyline.statistic")).to_be_attached()
        await expect(detail.locator("svg line.threshold")).to_be_attached()
        await expect(detail.locator(".cells li.cell").first).to_be_visible()
        await expect(page.locator("#protection-summary")).to_contain_text("rounds watched")
        # The alarm needs a named person: it is in the latched list.
        await expect(page.locator("#latched-list li.latched-alarm")).not_to_have_count(0)
        await expect(page.locator("#latched-list")).to_contain_text("Game protection")
        await shot(page, "supervisor-game-protection")


async def test_the_supervisor_recalls_the_last_rounds_as_a_regulator_reads_them(
    browser: Browser, tmp_path: Path
) -> None:
    async with kiosk(browser, tmp_path, path="/supervisor", seed=3) as k:
        page, t = k.page, k.table
        t.daemon.table.dealer_id = "D-41"  # as a sign-in leaves it
        first = await t.deal(rng_number=4)
        await t.deal(rng_number=1)
        await page.locator("#recall").click()
        recall = page.locator("#round-detail pre.recall")
        await expect(recall).to_contain_text(f"Round #{first.round_seq}  {first.round_id}")
        await expect(recall).to_contain_text("dealt by D-41")
        await expect(recall).to_contain_text("dealer sets")
        await shot(page, "supervisor-recall")
