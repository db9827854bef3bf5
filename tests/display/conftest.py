"""Browser tests: Debian's chromium, driven headless by playwright, against the whole daemon with
its simulated devices (tests/harness.py). One browser per module; a fresh table per test.

Every state a test reaches is saved as a screenshot under artifacts/screenshots/ (gitignored).
Tests wait on the DOM (playwright's waits) and on effects with timeouts, never on sleeps.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
import pytest_asyncio
from playwright import async_api as playwright_api
from playwright.async_api import ViewportSize

from controller.badges import hash_pin
from controller.display import DisplayService
from tests.harness import RunningTable, running_table

CHROMIUM = os.environ.get("PAIGOW_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
KIOSK: ViewportSize = {"width": 1920, "height": 1080}
SMALL_KIOSK: ViewportSize = {"width": 1280, "height": 800}
WAIT_MS = 10_000


async def shot(page: playwright_api.Page, name: str) -> Path:
    """Save the page as artifacts/screenshots/NAME.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=name.startswith("supervisor"))
    return path


def unavailable(message: str) -> NoReturn:
    """A prerequisite is missing: a failure in CI (where `make test` must provide it), a skip
    on a developer's machine that lacks it."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextlib.asynccontextmanager
async def chromium(*extra_args: str) -> AsyncIterator[playwright_api.Browser]:
    """Debian's chromium, headless, with :data:`CHROMIUM_ARGS` and ``extra_args``; a clear
    failure (CI) or skip (a developer's machine) where it is not installed."""
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        unavailable(f"{CHROMIUM} not found: `make test` installs Debian's chromium")
    async with playwright_api.async_playwright() as p:
        args = [*CHROMIUM_ARGS, *extra_args]
        b = await p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            yield b
        finally:
            await b.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[playwright_api.Browser]:
    async with chromium() as b:
        yield b


@dataclass
class Kiosk:
    """A running table, its display service and a page on it."""

    table: RunningTable
    display: DisplayService
    page: playwright_api.Page

    @property
    def url(self) -> str:
        return self.display.url


@contextlib.asynccontextmanager
async def kiosk(
    browser: playwright_api.Browser,
    workdir: Path,
    *,
    path: str = "/dealer",
    viewport: ViewportSize | None = None,
    config_extra: str = "",
    seed: int = 1,
    display: DisplayService | None = None,
    bias: str | None = None,
) -> AsyncIterator[Kiosk]:
    """The daemon with a display on a free loopback port, and a page open on ``path``, live."""
    service = display or DisplayService(port=0)
    async with running_table(
        workdir, services=[service], config_extra=config_extra, seed=seed, bias=bias
    ) as t:
        await service.wait_started()
        context = await browser.new_context(viewport=viewport or KIOSK)
        page = await context.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            await page.goto(service.url + path)
            await page.wait_for_selector("#link.up")
            yield Kiosk(t, service, page)
            assert errors == [], f"JavaScript errors on the page: {errors}"
        finally:
            await context.close()


@pytest.fixture
def raise_nofile() -> None:
    """Room for a flood's sockets and the server's in one process."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 8192:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(8192, hard), hard))


async def kiosk_credential(url: str, token: str) -> str:
    """The kiosk's cookie value, got as the launcher and the kiosk page get it: a ticket for
    the kiosk token (``POST /api/kiosk/ticket``), spent at ``POST /api/kiosk``."""
    import aiohttp

    from controller.display.kiosk import KIOSK_COOKIE

    origin = {"Origin": url}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{url}/api/kiosk/ticket", json={"token": token}, headers=origin
        ) as response:
            assert response.status == 200, await response.text()
            ticket = (await response.json())["ticket"]
        async with session.post(f"{url}/api/kiosk", json={"ticket": ticket}, headers=origin) as r:
            assert r.status == 200, await r.text()
            return r.cookies[KIOSK_COOKIE].value


def write_secret(path: Path, value: str) -> Path:
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def write_badges(path: Path, pins: dict[str, str], iterations: int = 10_000) -> Path:
    """A dealers or supervisors file: ``badge pbkdf2_sha256$…`` a line (fewer iterations than
    the tool's 100,000, for speed; the reader takes 10,000 and up)."""
    lines = [f"{badge} {hash_pin(pin, iterations=iterations)}" for badge, pin in pins.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path
