"""The fault state on the pages, in a real browser (docs/faults.md): a journal that refuses
writes (SQLite's own "database or disk is full") puts a full-screen TABLE FAULT banner over the
dealer page and a banner on the supervisor page; it goes when the journal works again."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from tests.display.conftest import kiosk, shot
from tests.harness import deal_until_fault, limit_pages, page_count

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_full_journal_shows_table_fault_and_it_clears(
    browser: Browser, tmp_path: Path
) -> None:
    async with kiosk(browser, tmp_path, seed=79) as k:
        page, t = k.page, k.table
        settled = await t.deal(rng_number=2)
        await expect(page.locator("#dealer-setting")).to_have_attribute(
            "data-round-id", settled.round_id
        )
        await expect(page.locator("#fault")).to_be_hidden()
        supervisor = await page.context.new_page()
        await supervisor.goto(k.display.url + "/supervisor")
        await supervisor.wait_for_selector("#link.up")

        limit_pages(t.journal, page_count(t.journal))
        await deal_until_fault(t, [])
        fault = page.locator("#fault")
        await expect(fault).to_be_visible()
        await expect(fault).to_contain_text("TABLE FAULT — do not settle by the display")
        await expect(fault).to_contain_text("database or disk is full")
        # Full screen: it covers the dealer's setting, so the old result is not read as new.
        box = await fault.bounding_box()
        viewport = page.viewport_size
        assert box is not None and viewport is not None
        assert box["width"] >= viewport["width"] and box["height"] >= viewport["height"]
        await expect(supervisor.locator("#fault")).to_contain_text("TABLE FAULT")
        await shot(page, "dealer-table-fault")

        limit_pages(t.journal, None)
        await expect(fault).to_be_hidden()
        await expect(supervisor.locator("#fault")).to_be_hidden()
        await supervisor.close()
