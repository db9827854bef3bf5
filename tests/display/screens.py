"""Screenshots of the pages for docs/display.md, from the same simulated table the display tests
use (tests/harness.py, Debian's chromium through playwright):

* the dealer page at 800×480, 1280×800 and 1920×1080 in three states: a normal settled round
  (two players' settings entered), a dead round (its banner, and folded into the strip), and the
  controller hung (no heartbeat: stale, over a round where the dealer has two Jacks); and the
  shuffler offline at 800×480;
* the supervisor page under a burst of 15 latched alarms at 1920×1080 and 1280×800.

Run from the repository's root: ``.venv/bin/python -m tests.display.screens [OUT_DIR]`` (default
docs/screens/). tests/display/test_screens.py uses the same states (``settled_round``,
``two_jacks_round``, ``alarm_burst``, ``silent_heartbeat``) and the checks below.

``silent_heartbeat`` makes the controller look hung to the page from inside the process: the
display's stream waits ``HEARTBEAT_S`` for an update before it sends a heartbeat, and is given an
hour. (tests/display/test_what_people_read.py stops a real controller process with SIGSTOP.)
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright import async_api as playwright_api
from playwright.async_api import Page, expect

from controller.display import server
from controller.game.cards import DECK
from controller.messages import PlayerSetting, RoundPayload
from controller.table import Refusal
from controller.table.effects import NoiseSummary
from drivers.events import DealStarted, DeviceOffline, PacketDealt, PositionDrawn, StubVerified
from tests.display.conftest import chromium, kiosk, write_secret
from tests.harness import RunningTable

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "screens"
SIZES = {"800x480": (800, 480), "1280x800": (1280, 800), "1920x1080": (1920, 1080)}
VOID_PIN = "730519"


# --- what the tests check on a page (tests/display/test_screens.py) ---------------------------

# Every visible element: on the screen, its text not clipped (scrollWidth and scrollHeight within
# its box: an ellipsis or an overflow is a clip), and every card inside its setting, seat or row.
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const W = innerWidth, H = innerHeight;
  const name = (e) => (e.id ? `#${e.id}` : `${e.tagName.toLowerCase()}.${e.classList.value}`)
    + (e.closest("[data-seat]") ? ` (seat ${e.closest("[data-seat]").dataset.seat})` : "");
  const text = (e) => e.textContent.slice(0, 60);
  const shown = (e) => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden";
  };
  for (const e of document.querySelectorAll("body *")) {
    if (!shown(e) || e.closest(".modal[hidden], [hidden]")) continue;
    const r = e.getBoundingClientRect();
    if (r.left < -0.5 || r.top < -0.5 || r.right > W + 0.5 || r.bottom > H + 0.5) {
      problems.push(`${name(e)} off the screen: ${[r.left, r.top, r.right, r.bottom]}`);
    }
    const cs = getComputedStyle(e);
    if (e instanceof SVGElement || cs.display === "inline" || cs.display === "contents") continue;
    const across = e.scrollWidth - e.clientWidth, down = e.scrollHeight - e.clientHeight;
    if (cs.textOverflow === "ellipsis" && across > 0) problems.push(`${name(e)} ends in …`);
    if (across > 1) problems.push(`${name(e)} clipped across by ${across}: ${text(e)}`);
    // Down: a box's content beyond it; a line of text whose glyphs are taller than a tight
    // line-height (a card's rank) is not a clip unless the box hides its overflow.
    const textOnly = e.children.length === 0 && cs.overflowY === "visible";
    if (!textOnly && down > 1) problems.push(`${name(e)} clipped down by ${down}: ${text(e)}`);
  }
  for (const card of document.querySelectorAll(".layout .card")) {
    const box = card.closest(".setting, .seat, .dealer-cards");
    if (!box || !shown(card)) continue;
    const c = card.getBoundingClientRect(), b = box.getBoundingClientRect();
    const out = c.left < b.left - 0.5 || c.right > b.right + 0.5
      || c.top < b.top - 0.5 || c.bottom > b.bottom + 0.5;
    if (out) problems.push(`card ${card.dataset.card} outside ${name(box)}`);
  }
  return problems;
}"""

# The cards a selector finds, with the size of their rank's type.
CARD_SIZES = """(selector) => [...document.querySelectorAll(selector)]
  .filter((c) => c.getBoundingClientRect().height > 0)
  .map((c) => ({
    width: c.getBoundingClientRect().width,
    height: c.getBoundingClientRect().height,
    rank: parseFloat(getComputedStyle(c.querySelector(".rank")).fontSize),
  }))"""

# A call to act that is still bright: shown, and neither greyed (a grayscale or a dark filter on it
# or an ancestor) nor faded.
BRIGHT_CALLS = """(selectors) => {
  const out = [];
  for (const e of document.querySelectorAll(selectors)) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(e).visibility === "hidden") continue;
    let dimmed = false, opacity = 1;
    for (let n = e; n && n !== document.documentElement; n = n.parentElement) {
      const cs = getComputedStyle(n);
      opacity *= parseFloat(cs.opacity);
      const grey = /grayscale\\(([\\d.]+)\\)/.exec(cs.filter);
      const dark = /brightness\\(([\\d.]+)\\)/.exec(cs.filter);
      if (grey && parseFloat(grey[1]) >= 0.8) dimmed = true;
      if (dark && parseFloat(dark[1]) <= 0.7) dimmed = true;
    }
    const what = `${e.id || e.className}: ${e.textContent.trim().slice(0, 50)}`;
    if (!dimmed && opacity > 0.6) out.push(what);
  }
  return out;
}"""
CALLS_TO_ACT = (
    "#banner, #strip, #phase, #devices-down, .btn.attention, .notice, .waiting.attention, "
    ".chip.win, .badge, #controls .btn"
)


# --- the states -----------------------------------------------------------------------------


def two_jack_deck(seed: int = 6) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """Seven packets and the stub of a whole deck in which packet 0 holds two Jacks."""
    dealer = ("Jc", "Jd", "Ks", "9h", "7c", "4d", "2s")
    rest = [str(c) for c in DECK if str(c) not in dealer]
    random.Random(seed).shuffle(rest)
    packets = [dealer] + [tuple(rest[i * 7 : i * 7 + 7]) for i in range(6)]
    return packets, tuple(rest[42:])


async def two_jacks_round(t: RunningTable, shuffle_id: str = "crafted-two-jacks") -> RoundPayload:
    """A round in which the dealer (position 1, packet 0) holds two Jacks."""
    packets, stub = two_jack_deck()
    d = t.daemon
    d.put_nowait(PositionDrawn(device="rng", method="rng", number=1))
    d.put_nowait(DealStarted(device="shuffler", shuffle_id=shuffle_id))
    for i, cards in enumerate(packets):
        d.put_nowait(PacketDealt(device="shuffler", index=i, cards=cards))
    d.put_nowait(StubVerified(device="shuffler", cards=stub))
    result = await t.next_closed()
    assert result.dealer is not None and result.dealer.two_jacks
    return result


async def settled_round(t: RunningTable, rng_number: int = 4) -> RoundPayload:
    """A settled round with the dealer's setting, and two players' settings entered."""
    result = await t.deal(rng_number=rng_number)
    while result.dealer is None or result.dealer.two_jacks:
        result = await t.deal(rng_number=rng_number)
    for seat in result.seats[:2]:
        reply = await t.daemon.submit(
            PlayerSetting(seat=seat.seat, house_way=True, round_id=result.round_id)
        )
        assert reply.ok, reply.error
    return result


def alarm_burst(t: RunningTable, floods: int = 12, guessers: int = 3) -> None:
    """A burst of latched alarms: the shuffler flooding (one ``device_flood`` a minute) and
    wrong PINs from a few addresses (a ``command_refused`` each)."""
    start = datetime.now(UTC) - timedelta(minutes=floods)
    for n in range(floods):
        t.daemon.put_nowait(
            NoiseSummary(
                device="shuffler",
                since=start + timedelta(minutes=n),
                until=start + timedelta(minutes=n + 1),
                dropped=900 + n,
                dropped_kinds=(("packet_dealt", 900 + n),),
            )
        )
    for n in range(guessers):
        for _ in range(3):
            t.daemon.refused(
                Refusal("display", f"10.9.8.{n + 7}", "void_round", "wrong_pin", "wrong PIN")
            )


@contextlib.contextmanager
def silent_heartbeat() -> Iterator[None]:
    """The controller hung, as the page sees it: the live stream stays open and nothing comes
    on it, not even the heartbeat (the display's next wait is an hour)."""
    before = server.HEARTBEAT_S
    server.HEARTBEAT_S = 3600.0
    try:
        yield
    finally:
        server.HEARTBEAT_S = before


async def stale(page: Page) -> None:
    """Wait until the page calls the controller not responding (three heartbeats missed)."""
    await expect(page.locator("body")).to_have_attribute("data-controller", "lost", timeout=15_000)


async def sizes(page: Page, name: str, out: Path) -> None:
    for label, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        await page.evaluate("document.fonts.ready")
        await page.screenshot(path=str(out / f"{name}-{label}.png"))


async def dealer_screens(b: playwright_api.Browser, work: Path, out: Path) -> None:
    pin = write_secret(work / "void.pin", VOID_PIN)
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(b, work / "dealer", config_extra=extra, seed=11) as k:
        page, t = k.page, k.table
        result = await settled_round(t)
        setting = page.locator(f'#dealer-setting[data-round-id="{result.round_id}"]')
        await expect(setting).to_be_visible()
        await expect(page.locator(".seat .badge")).to_have_count(2)
        await sizes(page, "dealer-settled", out)

        dead = await t.deal(faults="short_packet")
        await expect(page.locator('#banner[data-kind="dead"]')).to_be_visible()
        assert dead.status == "dead"
        await sizes(page, "dealer-dead", out)
        await page.locator("#banner").click()
        await expect(page.locator('#strip[data-kind="dead"]')).to_be_visible()
        await sizes(page, "dealer-dead-folded", out)

        await two_jacks_round(t)
        await expect(page.locator('#banner[data-kind="two_jacks"]')).to_be_visible()
        with silent_heartbeat():
            await stale(page)
            await sizes(page, "dealer-stale", out)
        t.daemon.put_nowait(DeviceOffline(device="shuffler", reason="no answer to 3 polls"))
        await expect(page.locator("body")).to_have_attribute("data-controller", "live")
        await page.set_viewport_size({"width": 800, "height": 480})
        await page.locator("#banner").click()
        await page.screenshot(path=str(out / "dealer-shuffler-offline-800x480.png"))


async def supervisor_screens(b: playwright_api.Browser, work: Path, out: Path) -> None:
    pin = write_secret(work / "void.pin", VOID_PIN)
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(b, work / "supervisor", path="/supervisor", config_extra=extra) as k:
        page, t = k.page, k.table
        for n in range(4):
            await t.deal(rng_number=n + 1)
        await t.deal(faults="short_packet")
        await expect(page.locator("#rounds tr.round-row")).to_have_count(5)
        await expect(page.locator("#journal")).to_contain_text("5 (")
        alarm_burst(t)
        await expect(page.locator("#latched")).to_be_visible()
        await expect(page.locator("#latched-count")).to_have_text("15")
        for label in ("1920x1080", "1280x800"):
            width, height = SIZES[label]
            await page.set_viewport_size({"width": width, "height": height})
            await page.screenshot(path=str(out / f"supervisor-alarms-{label}.png"))


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        async with chromium() as b:
            await dealer_screens(b, Path(tmp), out)
            await supervisor_screens(b, Path(tmp), out)
    for png in sorted(out.glob("*.png")):
        print(png.relative_to(ROOT) if png.is_relative_to(ROOT) else png)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
