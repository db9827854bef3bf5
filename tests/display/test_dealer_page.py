"""The dealer page in a real browser against the whole daemon with simulated devices."""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from controller.badges import hash_pin
from controller.game.cards import DECK, parse_cards
from controller.game.setting import Setting
from controller.messages import RoundPayload
from controller.table import PlayerSettled
from drivers.events import DealStarted, PacketDealt, PositionDrawn, StubVerified
from tests.display.conftest import SMALL_KIOSK, kiosk, shot, write_badges, write_secret

pytestmark = pytest.mark.asyncio(loop_scope="module")

LATENCY_LIMIT_MS = 300.0
LATENCY_ROUNDS = 5


def setting_selector(round_seq: int, state: str = "set") -> str:
    return f'#dealer-setting[data-state="{state}"][data-round-seq="{round_seq}"]'


async def watch_for(page: Page, selector: str) -> None:
    """Record (in the page) the wall-clock time at which ``selector`` first matches."""
    await page.evaluate(
        """(selector) => {
            window.__shownAt = new Promise((resolve) => {
                const check = () => document.querySelector(selector) ? resolve(Date.now()) : false;
                if (check() !== false) return;
                const observer = new MutationObserver(() => {
                    if (check() !== false) observer.disconnect();
                });
                observer.observe(document.body, {subtree: true, childList: true, attributes: true});
            });
        }""",
        selector,
    )


def stamp_writes(port: object) -> list[float]:
    """Wall-clock times (ms) at which each frame the simulator writes has been written."""
    stamps: list[float] = []
    write: Callable[[bytes], Awaitable[None]] = port.write  # type: ignore[attr-defined]

    async def stamped(data: bytes) -> None:
        await write(data)
        stamps.append(time.time() * 1000)

    port.write = stamped  # type: ignore[attr-defined]
    return stamps


async def test_setting_is_shown_within_300_ms_of_the_last_packet(
    browser: Browser, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    async with kiosk(browser, tmp_path) as k:
        page, t = k.page, k.table
        await shot(page, "dealer-waiting-1920x1080")
        await expect(page.locator("#btn-void")).to_be_disabled()
        await expect(page.locator("#btn-void")).to_have_text("Void: no PIN configured")
        stamps = stamp_writes(t.shuffler.port)
        latencies: list[float] = []
        for seq in range(1, LATENCY_ROUNDS + 1):
            await watch_for(page, setting_selector(seq))
            await t.rng.press()
            stamps.clear()
            await t.shuffler.deal()
            # Frames: DEAL_START, seven PACKETs, STUB, DEAL_END: the last packet is the 8th.
            last_packet = stamps[7]
            shown: float = await page.evaluate("window.__shownAt")
            result = await t.next_closed()
            latencies.append(shown - last_packet)
            setting = result.dealer.setting if result.dealer else None
            if setting is not None:
                await expect(page.locator("#rule-id")).to_have_text(setting.rule or "")
                # The way the dealer was set by, beside its rule (docs/house-way.md).
                await expect(page.locator("#way-name")).to_have_text(" · dealer-open")
                front = page.locator("#dealer-setting .hand.front .card")
                back = page.locator("#dealer-setting .hand.back .card")
                assert [await c.get_attribute("data-card") for c in await front.all()] == (
                    setting.front
                )
                assert [await c.get_attribute("data-card") for c in await back.all()] == (
                    setting.back
                )
        worst = max(latencies)
        record_property("latency_ms", [round(x, 1) for x in latencies])
        print(
            f"\nlast packet → setting in the DOM: median {statistics.median(latencies):.1f} ms, "
            f"max {worst:.1f} ms over {len(latencies)} rounds"
        )
        # The typical round, not the single worst sample: this machine is shared and noisy, and
        # the tail is measured by bench/latency.py (p99 over 200 rounds) where it belongs.
        assert statistics.median(latencies) < LATENCY_LIMIT_MS
        await expect(page.locator("#first-position .where")).to_contain_text("Position")
        await shot(page, "dealer-settled-1920x1080")
        await page.set_viewport_size(SMALL_KIOSK)
        await shot(page, "dealer-settled-1280x800")


async def test_short_packet_shows_all_hands_dead(browser: Browser, tmp_path: Path) -> None:
    async with kiosk(browser, tmp_path, seed=7) as k:
        page, t = k.page, k.table
        dead = await t.deal(faults="short_packet")
        assert dead.status == "dead" and dead.reasons[0].code == "short_packet"
        banner = page.locator('#banner[data-kind="dead"]')
        await expect(banner).to_be_visible()
        await expect(page.locator("#banner-title")).to_have_text("ALL HANDS DEAD")
        await expect(page.locator("#banner-reason")).to_have_text(dead.reasons[0].detail)
        await expect(page.locator("#phase")).to_have_text("All hands dead")
        assert await page.locator(".seat .card").count() == 0  # no dead hand is shown
        await shot(page, "dealer-all-hands-dead-1920x1080")
        await banner.click()
        await expect(banner).to_be_hidden()
        await expect(page.locator('#strip[data-kind="dead"]')).to_contain_text("ALL HANDS DEAD")
        await page.set_viewport_size(SMALL_KIOSK)
        await shot(page, "dealer-all-hands-dead-dismissed-1280x800")
        # The next good deal takes the banner away.
        good = await t.deal(rng_number=2)
        await expect(page.locator(setting_selector(good.round_seq))).to_be_visible()
        await expect(page.locator("#banner")).to_be_hidden()
        await expect(page.locator("#strip")).to_be_hidden()


def two_jack_deck() -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """Seven packets and the stub of a whole deck in which packet 0 holds two Jacks."""
    dealer = ("Jc", "Jd", "Ks", "9h", "7c", "4d", "2s")
    rest = [str(c) for c in DECK if str(c) not in dealer]
    random.Random(6).shuffle(rest)
    packets = [dealer] + [tuple(rest[i * 7 : i * 7 + 7]) for i in range(6)]
    return packets, tuple(rest[42:])


async def test_dealer_with_two_jacks_shows_its_banner(browser: Browser, tmp_path: Path) -> None:
    async with kiosk(browser, tmp_path) as k:
        page, t = k.page, k.table
        packets, stub = two_jack_deck()
        d = t.daemon
        # The RNG names position 1, the dealer, for the first packet: the dealer holds packet 0.
        d.put_nowait(PositionDrawn(device="rng", method="rng", number=1))
        d.put_nowait(DealStarted(device="shuffler", shuffle_id="crafted-two-jacks"))
        for i, cards in enumerate(packets):
            d.put_nowait(PacketDealt(device="shuffler", index=i, cards=cards))
        d.put_nowait(StubVerified(device="shuffler", cards=stub))
        result = await t.next_closed()
        assert result.dealer is not None and result.dealer.two_jacks
        await expect(page.locator('#banner[data-kind="two_jacks"]')).to_be_visible()
        await expect(page.locator("#banner-title")).to_have_text("DEALER HAS TWO JACKS")
        await expect(page.locator("#banner-sub")).to_have_text("All Pai Gow wagers lose")
        await expect(page.locator("#banner-reason")).to_have_text("Settle Jacks Beat and Chan Chu")
        await shot(page, "dealer-two-jacks-1920x1080")
        await page.locator("#banner").click()
        await expect(page.locator(setting_selector(result.round_seq, "two_jacks"))).to_be_visible()
        await expect(page.locator('#strip[data-kind="two_jacks"]')).to_contain_text(
            "All Pai Gow wagers lose"
        )
        for seat in result.seats:  # Jacks Beat pays every seat
            row = page.locator(f'.seat[data-seat="{seat.seat}"]')
            await expect(row.locator('[data-wager="jacks_beat"]')).to_contain_text(
                f"{seat.jacks_beat.pays} to 1"
            )
        await shot(page, "dealer-two-jacks-seats-1920x1080")


async def test_dice_keyed_in_by_clicks_place_the_first_packet(
    browser: Browser, tmp_path: Path
) -> None:
    async with kiosk(browser, tmp_path, viewport=SMALL_KIOSK) as k:
        page, t = k.page, k.table
        await t.shuffler.deal()  # no RNG press: the round waits for the dice
        await expect(page.locator("#phase")).to_have_text("Key in the dice")
        await expect(page.locator("#btn-dice")).to_have_class("btn attention")
        await page.locator("#btn-dice").click()
        for die, value in enumerate((3, 5, 6), start=1):
            await page.locator(f'.dice-row[data-die="{die}"] button[data-value="{value}"]').click()
        await expect(page.locator("#dice-summary")).to_have_text(
            "3 + 5 + 6 = 14  →  position 7 · seat 6"
        )
        await shot(page, "dealer-dice-entry-1280x800")
        await page.locator("#dice-confirm").click()
        result = await t.next_closed()
        assert result.first_position is not None
        assert result.first_position.dice == (3, 5, 6)
        assert result.first_position.method == "dice_manual"
        assert result.first_position.position == 7
        await expect(page.locator(setting_selector(result.round_seq))).to_be_visible()
        await expect(page.locator("#modal")).to_be_hidden()
        await expect(page.locator("#first-position .where")).to_have_text("Position 7 · seat 6")
        await expect(page.locator("#first-position .how")).to_have_text(
            "dice 3 + 5 + 6 = 14 (keyed by the dealer)"
        )
        await shot(page, "dealer-after-dice-1280x800")


def foul_and_fair(result: RoundPayload) -> tuple[str, tuple[str, str], tuple[str, str]]:
    """A seat and two fronts for it: one that fouls, one that does not."""
    for seat in result.seats:
        cards = parse_cards(seat.cards)
        foul = fair = None
        for front in itertools.combinations(cards, 2):
            setting = Setting.from_front(cards, front)
            if setting.is_foul and foul is None:
                foul = (str(front[0]), str(front[1]))
            if not setting.is_foul and fair is None:
                fair = (str(front[0]), str(front[1]))
        if foul and fair:
            return seat.seat, foul, fair
    raise AssertionError("no seat of this round can foul")


async def test_a_players_setting_is_entered_by_tapping_two_cards(
    browser: Browser, tmp_path: Path
) -> None:
    supervisors = write_badges(tmp_path / "supervisors", {"S-0042": "604918"})
    extra = f'[display]\nsupervisors_file = "{supervisors}"\n'
    async with kiosk(browser, tmp_path / "run", seed=11, config_extra=extra) as k:
        page, t = k.page, k.table
        result = await t.deal(rng_number=4)
        assert result.dealer is not None and not result.dealer.two_jacks
        label, foul, fair = foul_and_fair(result)
        # The daemon has closed the round; the page may not have it yet (a loaded machine).
        # A seat takes taps once its hand is shown: a tap before that opens nothing.
        await page.locator(f'.seat.tappable[data-seat="{label}"]').click()
        for card in fair:
            await page.locator(f'#pick-cards .card[data-card="{card}"]').click()
        preview = page.locator('#player-outcome[data-entered="no"]')
        await expect(preview).not_to_have_attribute("data-outcome", "foul")
        for card in fair:  # change of mind: untap, then tap the fouling front
            await page.locator(f'#pick-cards .card[data-card="{card}"]').click()
        for card in foul:
            await page.locator(f'#pick-cards .card[data-card="{card}"]').click()
        await expect(preview).to_have_attribute("data-outcome", "foul")  # shown at once
        await expect(preview).to_contain_text("FOUL")
        await shot(page, "dealer-player-foul-preview-1920x1080")
        await page.locator("#player-enter").click()
        entered = page.locator('#player-outcome[data-entered="yes"]')
        await expect(entered).to_have_attribute("data-outcome", "foul")
        settled = [
            e.payload
            for e in t.effects
            if isinstance(e, PlayerSettled) and e.payload.round_id == result.round_id
        ]
        assert len(settled) == 1 and settled[0].seat == label and settled[0].foul
        assert settled[0].pai_gow["outcome"] == "lose"
        await page.locator("#modal-close").click()
        await expect(page.locator(f'.seat[data-seat="{label}"] .badge')).to_have_attribute(
            "data-outcome", "foul"
        )
        # Another seat asks for the House Way: its Pai Gow result shows on its row.
        other = next(s.seat for s in result.seats if s.seat != label)
        await page.locator(f'.seat.tappable[data-seat="{other}"]').click()
        await page.locator("#player-house-way").click()
        await expect(page.locator('#player-outcome[data-entered="yes"]')).to_be_visible()
        await page.locator("#modal-close").click()
        house = next(
            e.payload for e in t.effects if isinstance(e, PlayerSettled) and e.payload.seat == other
        )
        assert house.house_way and not house.foul
        await expect(page.locator(f'.seat[data-seat="{other}"] .badge')).to_have_attribute(
            "data-outcome", house.pai_gow["outcome"]
        )
        await expect(page.locator(f'.seat[data-seat="{label}"] .badge .corrected')).to_have_count(0)
        await shot(page, "dealer-player-settings-1920x1080")
        # Entered again for the first seat (House Way this time): a correction, which needs a
        # supervisor's badge and PIN and a reason (docs/audit.md), and is shown as one.
        await page.locator(f'.seat.tappable[data-seat="{label}"]').click()
        await expect(page.locator("#correction")).to_be_visible()
        await page.locator("#player-house-way").click()
        await expect(page.locator("#correction-missing")).to_contain_text(
            "needs the supervisor's badge, PIN and a reason"
        )
        await page.locator("#correction-badge").fill("S-0042")
        await page.locator("#correction-pin").fill("111111")
        await page.locator("#correction-reason").fill("asked for the House Way")
        await page.locator("#player-house-way").click()
        await expect(page.locator("#player-preview")).to_contain_text("unknown badge or wrong PIN")
        await page.locator("#correction-pin").fill("604918")
        await shot(page, "dealer-player-correction-1920x1080")
        await page.locator("#player-house-way").click()
        await expect(page.locator('#player-outcome[data-entered="yes"]')).to_be_visible()
        await page.locator("#modal-close").click()
        badge = page.locator(f'.seat[data-seat="{label}"] .badge')
        await expect(badge.locator(".corrected")).to_have_text(" corrected")
        again = [
            e.payload for e in t.effects if isinstance(e, PlayerSettled) and e.payload.seat == label
        ]
        assert again[-1].corrects == settled[0].setting_id
        assert (again[-1].by, again[-1].reason) == ("S-0042", "asked for the House Way")
        # The pit sees it: the supervisor page lists the correction's alarm.
        supervisor = await page.context.new_page()
        await supervisor.goto(k.url + "/supervisor")
        alarm = supervisor.locator("#alarms li", has_text="A player's setting corrected")
        await expect(alarm).to_contain_text("corrected by S-0042: asked for the House Way")
        await shot(supervisor, "supervisor-setting-corrected")


async def test_seats_marked_empty_get_no_results(browser: Browser, tmp_path: Path) -> None:
    async with kiosk(browser, tmp_path) as k:
        page, t = k.page, k.table
        await page.locator("#btn-seats").click()
        await page.locator('.seat-toggle[data-seat="6"]').click()
        await expect(page.locator('.seat-toggle[data-seat="6"]')).to_have_attribute(
            "aria-pressed", "false"
        )
        await shot(page, "dealer-seats-1920x1080")
        assert t.daemon.table.occupied["6"] is False
        await page.locator("#modal-close").click()
        result = await t.deal(rng_number=1)
        assert "6" not in [s.seat for s in result.seats]
        await expect(page.locator(setting_selector(result.round_seq))).to_be_visible()
        await expect(page.locator('.seat[data-seat="6"]')).to_have_class("seat empty")
        assert await page.locator('.seat[data-seat="6"] .card').count() == 0
        await expect(page.locator('.seat[data-seat="1"] .card')).to_have_count(7)


async def test_occupied_seats_survive_a_restart(browser: Browser, tmp_path: Path) -> None:
    """A seat the dealer marked empty stays empty after the controller restarts: it is not
    settled (and paid) again."""
    async with kiosk(browser, tmp_path) as k:
        await k.page.locator("#btn-seats").click()
        await k.page.locator('.seat-toggle[data-seat="6"]').click()
        await expect(k.page.locator('.seat-toggle[data-seat="6"]')).to_have_attribute(
            "aria-pressed", "false"
        )
    async with kiosk(browser, tmp_path) as k:  # the same journal: a restarted controller
        page, t = k.page, k.table
        assert t.daemon.table.occupied["6"] is False
        await page.locator("#btn-seats").click()
        await expect(page.locator('.seat-toggle[data-seat="6"]')).to_have_attribute(
            "aria-pressed", "false"
        )
        await page.locator("#modal-close").click()
        result = await t.deal(rng_number=2)
        assert "6" not in [s.seat for s in result.seats]
        await expect(page.locator('.seat[data-seat="6"]')).to_have_class("seat empty")


async def test_void_needs_the_pin(browser: Browser, tmp_path: Path) -> None:
    pin = write_secret(tmp_path / "void.pin", "432198")
    extra = f'[display]\nvoid_pin_file = "{pin}"\n'
    async with kiosk(browser, tmp_path / "run", config_extra=extra) as k:
        page, t = k.page, k.table
        result = await t.deal(rng_number=3)
        await expect(page.locator(setting_selector(result.round_seq))).to_be_visible()
        await expect(page.locator("#btn-void")).to_be_enabled()
        await page.locator("#btn-void").click()
        for key in "111111":
            await page.locator(f'.key[data-key="{key}"]').click()
        await page.locator('.key[data-key="OK"]').click()
        await expect(page.locator("#void-note")).to_have_text("wrong PIN")
        await shot(page, "dealer-void-wrong-pin-1920x1080")
        await page.keyboard.type("432198")
        await page.keyboard.press("Enter")
        voided = await t.next_closed()
        assert voided.round_id == result.round_id and voided.status == "void"
        # Who did it is journaled with the command (docs/audit.md).
        record = t.journal.history.get_round(result.round_id)
        assert record is not None
        [command] = [e.payload for e in record.events if e.kind == "command.void_round"]
        assert command["origin"] == {"channel": "kiosk", "identity": "127.0.0.1"}
        assert command["outcome"] == {"ok": True, "error": None}
        await expect(page.locator('#banner[data-kind="void"]')).to_be_visible()
        await expect(page.locator("#banner-reason")).to_have_text("Cards exposed")
        await shot(page, "dealer-round-void-1920x1080")


async def test_void_with_a_supervisor_s_badge_and_pin(browser: Browser, tmp_path: Path) -> None:
    supervisors = write_badges(tmp_path / "supervisors", {"S-0042": "604918"})
    extra = f'[display]\nsupervisors_file = "{supervisors}"\n'
    async with kiosk(browser, tmp_path / "run", config_extra=extra) as k:
        page, t = k.page, k.table
        result = await t.deal(rng_number=3)
        await expect(page.locator(setting_selector(result.round_seq))).to_be_visible()
        await expect(page.locator("#btn-void")).to_be_enabled()  # no void PIN: badges do
        await page.locator("#btn-void").click()
        await page.keyboard.type("S-0042")  # a badge reader types, then presses Enter
        await page.keyboard.press("Enter")
        await page.keyboard.type("111111")
        await page.keyboard.press("Enter")
        await expect(page.locator("#void-note")).to_have_text("unknown badge or wrong PIN")
        await page.keyboard.type("604918")
        await page.keyboard.press("Enter")
        voided = await t.next_closed()
        assert voided.round_id == result.round_id and voided.status == "void"
        record = t.journal.history.get_round(result.round_id)
        assert record is not None
        [command] = [e.payload for e in record.events if e.kind == "command.void_round"]
        assert command["by"] == "S-0042" and command["outcome"]["ok"]
        await expect(page.locator('#banner[data-kind="void"]')).to_be_visible()


async def test_a_dealer_signs_in_with_badge_and_pin_and_deals_under_it(
    browser: Browser, tmp_path: Path
) -> None:
    dealers = tmp_path / "dealers"
    dealers.write_text(f"D-17 {hash_pin('4821')}\n", encoding="utf-8")
    extra = f'[display]\ndealers_file = "{dealers}"\n'
    async with kiosk(browser, tmp_path / "run", config_extra=extra) as k:
        page, t = k.page, k.table
        button = page.locator("#btn-dealer")
        await expect(button).to_have_text("Dealer sign in")
        await button.click()
        await page.keyboard.type("D-17")  # a badge reader types, then presses Enter
        await page.keyboard.press("Enter")
        await page.keyboard.type("1111")
        await page.keyboard.press("Enter")
        await expect(page.locator("#sign-in-note")).to_have_text("unknown badge or wrong PIN")
        await page.keyboard.type("4821")
        await page.keyboard.press("Enter")
        await expect(button).to_have_text("Dealer D-17 · sign out")
        await shot(page, "dealer-signed-in-1920x1080")
        result = await t.deal(rng_number=2)
        assert result.dealer_id == "D-17"
        await button.click()
        await expect(button).to_have_text("Dealer sign in")
