"""The pages at real screen sizes, as an IT trial found them (in Chromium): the dealer page at
800×480 (a small dealer touch screen), 1280×800 and 1920×1080 with nothing clipped or off the
screen and cards of a legible size; a stale screen (no heartbeat) calls nobody to act; a device
offline is a banner, not a dot; and the supervisor page under a burst of latched alarms keeps
the table's state in sight and acknowledges identical alarms with one form."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Browser, FloatRect, Page, ViewportSize, expect

from controller.table import Refusal
from controller.table.effects import DiskSpace, NoiseSummary
from drivers.events import DeviceOffline, DeviceOnline
from tests.display.conftest import SMALL_KIOSK, kiosk, shot, write_secret
from tests.display.screens import (
    BRIGHT_CALLS,
    CALLS_TO_ACT,
    CARD_SIZES,
    LAYOUT_PROBLEMS,
    alarm_burst,
    settled_round,
    silent_heartbeat,
    two_jacks_round,
)
from tests.harness import RunningTable, journal_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

SMALL_SCREEN: ViewportSize = {"width": 800, "height": 480}
SMALLEST: ViewportSize = {"width": 800, "height": 480}
MEDIUM: ViewportSize = {"width": SMALL_KIOSK["width"], "height": SMALL_KIOSK["height"]}
KIOSK: ViewportSize = {"width": 1920, "height": 1080}
SIZES = (SMALLEST, MEDIUM, KIOSK)
VOID_PIN = "730519"

# Legible at the table: the setting's cards and the seats' cards, in CSS pixels (height; a
# card is 0.7 as wide), and the rank's type. The trial found seats' cards of 18×26.
MIN_SETTING_CARD = {"800x480": 72, "1280x800": 130, "1920x1080": 160}
MIN_SEAT_CARD = 34
MIN_RANK_PX = 14


def label(size: ViewportSize) -> str:
    return f"{size['width']}x{size['height']}"


async def problems_at(page: Page, size: ViewportSize) -> list[str]:
    await page.set_viewport_size(size)
    await page.evaluate("document.fonts.ready")
    found: list[str] = await page.evaluate(LAYOUT_PROBLEMS)
    return found


async def cards(page: Page, selector: str) -> list[dict[str, float]]:
    found: list[dict[str, float]] = await page.evaluate(CARD_SIZES, selector)
    return found


def spanned(boxes: list[FloatRect]) -> float:
    left = min(b["x"] for b in boxes)
    right = max(b["x"] + b["width"] for b in boxes)
    top = min(b["y"] for b in boxes)
    bottom = max(b["y"] + b["height"] for b in boxes)
    return float((right - left) * (bottom - top))


async def test_the_dealer_page_fits_every_screen_with_legible_cards(
    browser: Browser, tmp_path: Path
) -> None:
    pin = write_secret(tmp_path / "void.pin", VOID_PIN)
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(browser, tmp_path / "run", config_extra=extra, seed=11) as k:
        page, t = k.page, k.table
        result = await settled_round(t)
        shown = page.locator(f'#dealer-setting[data-round-id="{result.round_id}"]')
        await expect(shown).to_be_visible()
        await expect(page.locator(".seat .badge")).to_have_count(2)
        for size in SIZES:
            size_name = label(size)
            found = await problems_at(page, size)
            await shot(page, f"screens-settled-{size_name}")
            assert found == [], (size_name, found)
            # Every control on the screen (the layout check covers them); the cards legible.
            await expect(page.locator("#btn-void")).to_be_visible()
            setting = await cards(page, "#dealer-setting .card")
            assert len(setting) == 7
            assert min(c["height"] for c in setting) >= MIN_SETTING_CARD[size_name], setting
            seats = await cards(page, ".seat .card")
            assert len(seats) == 7 * len(result.seats)
            assert min(c["height"] for c in seats) >= MIN_SEAT_CARD, (size_name, seats[:3])
            ranks = await cards(page, ".seat .card:not(.joker)")  # the joker shows its star
            assert min(c["rank"] for c in ranks) >= MIN_RANK_PX, (size_name, ranks[:3])
            # The seats' hand names whole: no ellipsis, no clip.
            for best in await page.locator(".seat-best").all():
                assert await best.evaluate(
                    "(e) => getComputedStyle(e).textOverflow !== 'ellipsis' "
                    "&& e.scrollWidth <= e.clientWidth"
                )
        # At 1280×800 the setting's cards use their box (the trial found 40% of it empty).
        await page.set_viewport_size(MEDIUM)
        box = await page.locator("#dealer-setting").bounding_box()
        setting_cards = await page.locator("#dealer-setting .card").all()
        setting_boxes = [await c.bounding_box() for c in setting_cards]
        assert box is not None and all(b is not None for b in setting_boxes)
        area = spanned([b for b in setting_boxes if b])
        assert area / (box["width"] * box["height"]) >= 0.45, (area, box)

        # A dead round: its banner, then folded into the strip; and two Jacks, folded.
        await t.deal(faults="short_packet")
        await expect(page.locator('#banner[data-kind="dead"]')).to_be_visible()
        for size in SIZES:
            assert await problems_at(page, size) == [], label(size)
        await page.locator("#banner").click()
        await expect(page.locator('#strip[data-kind="dead"]')).to_be_visible()
        for size in SIZES:
            assert await problems_at(page, size) == [], label(size)
            await shot(page, f"screens-dead-folded-{label(size)}")
        await two_jacks_round(t)
        await page.locator('#banner[data-kind="two_jacks"]').click()
        await expect(page.locator('#strip[data-kind="two_jacks"]')).to_be_visible()
        for size in SIZES:
            assert await problems_at(page, size) == [], label(size)
            await shot(page, f"screens-two-jacks-folded-{label(size)}")


async def test_a_stale_screen_calls_nobody_to_act(browser: Browser, tmp_path: Path) -> None:
    """The controller stops answering (its stream stays open, no heartbeat comes) over the gold
    "Settle Jacks Beat and Chan Chu" banner: nothing bright may call the dealer to act."""
    async with kiosk(browser, tmp_path, viewport=SMALL_SCREEN) as k:
        page, t = k.page, k.table
        await two_jacks_round(t)
        await expect(page.locator('#banner[data-kind="two_jacks"]')).to_be_visible()
        assert await page.evaluate(BRIGHT_CALLS, CALLS_TO_ACT) != []  # live: they call
        with silent_heartbeat():
            await expect(page.locator("#controller-lost")).to_be_visible(timeout=15_000)
            await expect(page.locator("#controller-lost")).to_contain_text(
                "CONTROLLER NOT RESPONDING"
            )
            for size in SIZES:
                await page.set_viewport_size(size)
                bright = await page.evaluate(BRIGHT_CALLS, CALLS_TO_ACT)
                assert bright == [], (label(size), bright)
                await expect(page.locator("#controller-lost")).to_be_in_viewport(ratio=1)
                await shot(page, f"screens-stale-{label(size)}")
            # What the banner said is still there to read, greyed, in the strip.
            await expect(page.locator('#strip[data-kind="two_jacks"]')).to_be_visible()
            await expect(page.locator("#banner")).to_be_hidden()
            # The controller answers again: the next round is shown, and calls as it should.
            await t.deal(faults="short_packet")
            await expect(page.locator("body")).to_have_attribute("data-controller", "live")
        await expect(page.locator('#banner[data-kind="dead"]')).to_be_visible()
        assert await page.evaluate(BRIGHT_CALLS, "#banner") != []


async def test_a_device_offline_is_a_banner_not_a_dot(browser: Browser, tmp_path: Path) -> None:
    async with kiosk(browser, tmp_path, viewport=SMALL_SCREEN) as k:
        page, t = k.page, k.table
        await settled_round(t)
        t.daemon.put_nowait(DeviceOffline(device="shuffler", reason="no answer to 3 polls"))
        down = page.locator("#devices-down")
        await expect(down).to_be_visible()
        await expect(down.locator('[data-device="shuffler"]')).to_contain_text("SHUFFLER OFFLINE")
        await expect(down).to_contain_text("Do not start a deal until it is back")
        await expect(down).to_contain_text("no answer to 3 polls")
        for size in SIZES:
            assert await problems_at(page, size) == [], label(size)
            await expect(down).to_be_in_viewport(ratio=1)
            name = down.locator(".down-name")
            px = await name.evaluate("(e) => parseFloat(getComputedStyle(e).fontSize)")
            assert px >= 18, (label(size), px)
            await shot(page, f"screens-shuffler-offline-{label(size)}")
        t.daemon.put_nowait(DeviceOnline(device="shuffler"))
        await expect(down).to_be_hidden()


def _burst_of_other_kinds(t: RunningTable) -> None:
    """Three more kinds of latched alarm: the RNG and the dice flooding, and a full disk."""
    now = datetime.now(UTC)
    for device in ("rng", "dice"):
        t.daemon.put_nowait(
            NoiseSummary(
                device=device,
                since=now - timedelta(minutes=1),
                until=now,
                dropped=50,
                dropped_kinds=(("position_drawn", 50),),
            )
        )
    t.daemon.put_nowait(DiskSpace(free_mb=90, threshold_mb=500, low=True))


async def test_an_alarm_burst_is_grouped_and_the_table_stays_in_sight(
    browser: Browser, tmp_path: Path
) -> None:
    pin = write_secret(tmp_path / "void.pin", VOID_PIN)
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(browser, tmp_path / "run", path="/supervisor", config_extra=extra) as k:
        page, t = k.page, k.table
        alarm_burst(t)  # 12 floods from the shuffler, and 3 guessers' wrong PINs
        await expect(page.locator("#latched-count")).to_have_text("15")
        groups = page.locator("#latched-list li.latched-alarm")
        for size in (KIOSK, MEDIUM):
            await page.set_viewport_size(size)
            # The table's state above the fold: the devices and the journal whole, the alarms'
            # tile begun; the latched alarms take at most 40% of the screen.
            for tile in ("#h-devices", "#h-journal"):
                await expect(page.locator(f"article:has({tile})")).to_be_in_viewport(ratio=1)
            await expect(page.locator("#h-alarms")).to_be_in_viewport(ratio=1)
            latched = await page.locator("#latched").bounding_box()
            assert latched is not None and latched["height"] <= 0.4 * size["height"], latched
            await shot(page, f"screens-supervisor-burst-{label(size)}")
        # Identical alarms (code and device) are one entry with one form.
        await expect(groups).to_have_count(2)
        flood = groups.filter(has_text="A device sent too much · shuffler")
        await expect(flood).to_have_attribute("data-count", "12")
        await expect(flood.locator("form.ack-form")).to_have_count(1)
        await expect(flood.locator("button")).to_have_text("Acknowledge all 12")
        # Acknowledging is possible here (the table computer, a PIN): the header says so.
        mode = page.locator(".topbar .brand .game")
        await expect(mode).not_to_contain_text("READ ONLY")
        await expect(mode).to_contain_text("ACKNOWLEDGE ALARMS WITH THE PIN")

        # More kinds than are listed: the rest are counted.
        _burst_of_other_kinds(t)
        await expect(page.locator("#latched-count")).to_have_text("18")
        await expect(groups).to_have_count(4)
        await expect(page.locator("#latched-more")).to_contain_text("+1 more (1 kind) not listed")
        await page.locator("#latched-more button").click()
        await expect(groups).to_have_count(5)
        await page.locator("#latched-more button").click()
        await expect(groups).to_have_count(4)

        # One acknowledgement for the twelve: a wrong PIN is tried once, not twelve times.
        await flood.locator(".ack-by").fill("Supervisor Kim")
        await flood.locator(".ack-pin").fill("111111")
        await flood.locator("button").click()
        await expect(flood.locator(".ack-note")).to_have_text("wrong PIN")
        await flood.locator(".ack-pin").fill(VOID_PIN)
        await flood.locator("button").click()
        await expect(page.locator("#latched-count")).to_have_text("6")
        await expect(groups.filter(has_text="A device sent too much · shuffler")).to_have_count(0)
        events = journal_events(t.journal)
        acks = [p for kind, p in events if kind == "alarm_acknowledged"]
        assert len(acks) == 12 and {a["by"] for a in acks} == {"Supervisor Kim"}
        assert len({a["alarm_id"] for a in acks}) == 12
        refused = [p for kind, p in events if kind == "command_refused"]
        assert [r.get("command") for r in refused].count("acknowledge_alarm") == 1, refused


async def test_without_a_supervisor_credential_the_page_says_read_only(
    browser: Browser, tmp_path: Path
) -> None:
    async with kiosk(browser, tmp_path, path="/supervisor") as k:
        page, t = k.page, k.table
        await expect(page.locator(".topbar .brand .game")).to_have_text(
            "PIT SUPERVISOR · READ ONLY"
        )
        for _ in range(3):
            t.daemon.refused(Refusal("display", "10.9.8.7", "void_round", "wrong_pin", "wrong PIN"))
        item = page.locator("#latched-list li.latched-alarm")
        await expect(item).to_have_count(1)
        await expect(item.locator("form")).to_have_count(0)  # nothing offered that cannot work
        await expect(page.locator("#latched-how")).to_contain_text("cannot be acknowledged")
