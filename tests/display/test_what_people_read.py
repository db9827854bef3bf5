"""What a dealer and a supervisor read: words not codes, seats not positions, a silent controller
called out, and every control reachable on a small kiosk and well used on a large one."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect

from controller.table import Refusal
from simulators.demo import DEMO_CONFIG
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from tests.display.conftest import kiosk, shot, write_secret
from tests.display.screens import BRIGHT_CALLS, CALLS_TO_ACT

pytestmark = pytest.mark.asyncio(loop_scope="module")

# A code name, not part of a file path (device links show their paths).
CODE = re.compile(r"(?<![/\w])[a-z0-9]+_[a-z0-9_]+\b(?!/)")


async def _codes_on(page: Page) -> set[str]:
    text = await page.locator("body").inner_text()
    return set(CODE.findall(text))


async def test_no_code_names_on_either_page(browser: Browser, tmp_path: Path) -> None:
    pin = write_secret(tmp_path / "void.pin", "730519")
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(browser, tmp_path / "run", seed=8, config_extra=extra) as k:
        page, t = k.page, k.table
        await t.deal()
        dup = await t.deal(faults="duplicate_card")
        await expect(page.locator("#banner")).to_be_visible()
        assert await _codes_on(page) == set()
        long = await t.deal(faults="eight_cards")  # a long packet: a misdeal
        assert long.reasons[0].code == "long_packet"
        await expect(page.locator("#banner-sub")).to_have_text("Misdeal")
        assert await _codes_on(page) == set()
        short = await t.deal(faults="short_packet")
        await expect(page.locator("#banner-sub")).to_have_text("A packet was short")
        assert await _codes_on(page) == set()
        # A guesser's wrong PINs: the latched alarm's detail carries the refusal's code.
        for _ in range(3):
            t.daemon.refused(Refusal("display", "10.9.8.7", "void_round", "wrong_pin", "wrong PIN"))
        supervisor = await page.context.new_page()
        await supervisor.goto(k.url + "/supervisor")
        # Latched: the deck's integrity (the duplicate card), and the guesser.
        await expect(supervisor.locator("#latched-list li.latched-alarm")).to_have_count(2)
        await expect(
            supervisor.locator(f'#rounds tr[data-round-id="{short.round_id}"]')
        ).to_be_visible()
        assert await _codes_on(supervisor) == set()
        for r in (dup, long, short):
            await supervisor.locator(f'#rounds tr[data-round-id="{r.round_id}"]').click()
            await expect(
                supervisor.locator(f'.d-head[data-round-id="{r.round_id}"]')
            ).to_be_visible()
            assert await _codes_on(supervisor) == set()
        # A dead round's packets, each by its seat and packet.
        rows = await supervisor.locator(".positions li b").all_inner_texts()
        labelled = [re.fullmatch(r"(seat \d+|dealer) · packet \d", r) for r in rows]
        assert len(rows) == 7 and all(labelled), rows
        # The regulator's recall, on the page: words, and no "lose: loses".
        await supervisor.locator("#recall").click()
        recall = supervisor.locator("#round-detail pre.recall")
        await expect(recall).to_contain_text(f"Round #{short.round_seq}")
        assert await _codes_on(supervisor) == set()
        text = await recall.inner_text()
        assert "lose: loses" not in text and ": loses" not in text
        assert "(seat " in text and " · packet " in text
        await shot(supervisor, "supervisor-words-1920x1080")


async def test_history_names_seats_from_the_first_load(browser: Browser, tmp_path: Path) -> None:
    """Position 3 carries seat label "2": the history says so before any new round closes."""
    async with kiosk(browser, tmp_path) as k:
        result = await k.table.deal(rng_number=3)
        supervisor = await k.page.context.new_page()
        await supervisor.goto(k.url + "/supervisor")
        row = supervisor.locator(f'#rounds tr[data-round-id="{result.round_id}"]')
        await expect(row).to_contain_text("Position 3 · seat 2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_a_silent_controller_is_called_out_and_recovers(
    browser: Browser, tmp_path: Path
) -> None:
    """The controller process stopped (SIGSTOP: its connections stay open, nothing more comes):
    the page says CONTROLLER NOT RESPONDING and greys the devices; it clears when it resumes."""
    port = _free_port()
    config = tmp_path / "table.toml"
    config.write_text(
        DEMO_CONFIG.format(
            table="PG-L1",
            shuffler=tmp_path / "shuffler",
            rng=tmp_path / "rng",
            journal=tmp_path / "journal.sqlite3",
        )
        + f'\n[display]\nhost = "127.0.0.1"\nport = {port}\n'
    )
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=2)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=2)
    async with shuffler, rng:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        context = await browser.new_context(viewport={"width": 1920, "height": 1080})
        try:
            page = await context.new_page()
            for _ in range(100):  # the daemon is starting: the page is there once it listens
                try:
                    await page.goto(f"http://127.0.0.1:{port}/dealer")
                    break
                except Exception:
                    await asyncio.sleep(0.1)
            await expect(page.locator("#link.up")).to_be_attached(timeout=15_000)
            lost = page.locator("#controller-lost")
            await expect(lost).to_be_hidden()
            # A dead round's banner calls the dealer to act: the last thing the controller said.
            await rng.press()
            await shuffler.deal(faults="short_packet")
            await expect(page.locator('#banner[data-kind="dead"]')).to_be_visible()
            proc.send_signal(signal.SIGSTOP)
            await expect(lost).to_be_visible(timeout=12_000)
            await expect(lost).to_contain_text("CONTROLLER NOT RESPONDING")
            await expect(page.locator("body")).to_have_attribute("data-controller", "lost")
            # Stale: no call to act stays bright (the banner gives way to its greyed strip).
            await expect(page.locator("#banner")).to_be_hidden()
            await expect(page.locator('#strip[data-kind="dead"]')).to_be_visible()
            assert await page.evaluate(BRIGHT_CALLS, CALLS_TO_ACT) == []
            await shot(page, "dealer-controller-not-responding-1920x1080")
            proc.send_signal(signal.SIGCONT)
            await expect(lost).to_be_hidden(timeout=12_000)
            await expect(page.locator("body")).to_have_attribute("data-controller", "live")
        finally:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 15)
            await context.close()


SMALLEST: ViewportSize = {"width": 800, "height": 480}


async def _inside(page: Page, selector: str) -> None:
    """Every element matching ``selector`` lies wholly inside the viewport (no scrolling)."""
    view = page.viewport_size
    assert view is not None
    boxes = [await b.bounding_box() for b in await page.locator(selector).all()]
    assert boxes, selector
    for box in boxes:
        assert box is not None
        assert box["x"] >= 0 and box["y"] >= 0, (selector, box)
        assert box["x"] + box["width"] <= view["width"] + 0.5, (selector, box, view)
        assert box["y"] + box["height"] <= view["height"] + 0.5, (selector, box, view)


async def test_every_ok_button_is_on_screen_at_800x480(browser: Browser, tmp_path: Path) -> None:
    pin = write_secret(tmp_path / "void.pin", "730519")
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(browser, tmp_path / "run", viewport=SMALLEST, config_extra=extra) as k:
        page, t = k.page, k.table
        await t.deal(rng_number=2)
        await shot(page, "dealer-800x480")
        for button, ok in (
            ("#btn-dice", '.key[data-key="OK"], #modal button.primary'),
            ("#btn-seats", "#modal-close"),
            ("#btn-void", '.key[data-key="OK"]'),
        ):
            await _inside(page, button)
            await page.locator(button).click()
            await expect(page.locator("#modal")).to_be_visible()
            await shot(page, f"dealer-800x480-{button[5:]}")
            await _inside(page, ok)
            await page.locator("#modal-close").click()
            await expect(page.locator("#modal")).to_be_hidden()
        # A player's setting, then its correction: the supervisor's fields and both buttons.
        seat = page.locator(".seat.tappable").first
        await seat.click()
        await page.locator("#player-house-way").click()
        await expect(page.locator("#correction")).to_be_visible()
        await shot(page, "dealer-800x480-correction")
        await _inside(page, "#correction input, #player-house-way, #player-enter")
        await page.locator("#modal-close").click()


async def test_the_setting_fills_its_box_at_1920x1080(browser: Browser, tmp_path: Path) -> None:
    async with kiosk(browser, tmp_path) as k:
        page, t = k.page, k.table
        result = await t.deal(rng_number=4)
        while result.dealer is None or result.dealer.two_jacks:
            result = await t.deal(rng_number=4)
        box = await page.locator("#dealer-setting").bounding_box()
        cards = [await c.bounding_box() for c in await page.locator("#dealer-setting .card").all()]
        assert box is not None and cards and all(c is not None for c in cards)
        left = min(c["x"] for c in cards if c)
        right = max(c["x"] + c["width"] for c in cards if c)
        top = min(c["y"] for c in cards if c)
        bottom = max(c["y"] + c["height"] for c in cards if c)
        await shot(page, "dealer-setting-1920x1080")
        # The cards use the box: they span 40% of its area or more (it was about a quarter).
        spanned = (right - left) * (bottom - top)
        assert spanned / (box["width"] * box["height"]) >= 0.4, (spanned, box)
