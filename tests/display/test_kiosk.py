"""The kiosk's own credential (controller/display/kiosk.py) and the limits that prefer it
(controller/display/guard.py): unit tests of the key, the guard and the stream limiter; the
launcher (`paigow-table kiosk`) against the real server with a stand-in browser; and the dealer
page opened in Chromium as the launcher opens it, also under a flood from its own address."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from playwright.async_api import Browser, ViewportSize, expect

from controller.display import DisplayService
from controller.display.access import AccessPolicy
from controller.display.guard import ConnectionGuard, StreamLimiter
from controller.display.kiosk import (
    KIOSK_COOKIE,
    KioskKey,
    TicketRefused,
    fetch_ticket,
    launch,
    read_kiosk_token,
    start_page,
    write_start_page,
)
from controller.display.server import POLICY_KEY, api_kiosk, api_kiosk_ticket
from tests.display.conftest import KIOSK, shot, write_secret
from tests.harness import running_table

#: Every async test on the module's loop, as the module's browser (conftest) is.
on_module_loop = pytest.mark.asyncio(loop_scope="module")

TOKEN = "k" * 24 + "-kiosk-token-for-tests"
VIEWPORT: ViewportSize = {"width": KIOSK["width"], "height": KIOSK["height"]}


# --- the key -----------------------------------------------------------------------------------


def test_a_ticket_is_good_once_and_for_a_minute() -> None:
    now = [100.0]
    key = KioskKey(TOKEN, clock=lambda: now[0])
    first, second = key.ticket(), key.ticket()
    assert first != second
    assert key.redeem(first) and not key.redeem(first)  # spent
    assert not key.redeem("made-up")
    now[0] += 61
    assert not key.redeem(second)  # expired


def test_the_cookie_is_derived_from_the_token_and_is_not_the_token() -> None:
    key = KioskKey(TOKEN)
    assert key.cookie != TOKEN and TOKEN not in key.cookie
    assert key.cookie == KioskKey(TOKEN).cookie  # the same after a restart with the same file
    assert KioskKey().cookie != KioskKey().cookie  # without a file: a new token each start
    assert key.cookie_ok(key.cookie)
    assert not key.cookie_ok(None) and not key.cookie_ok("") and not key.cookie_ok(TOKEN)


def test_tickets_outstanding_are_bounded() -> None:
    key = KioskKey(TOKEN)
    tickets = [key.ticket() for _ in range(40)]
    assert not key.redeem(tickets[0])  # the oldest were dropped
    assert key.redeem(tickets[-1])


def test_a_short_kiosk_token_is_refused(tmp_path: Path) -> None:
    short = write_secret(tmp_path / "short", "x" * 31)
    with pytest.raises(ValueError, match="expected at least 32"):
        read_kiosk_token(short)
    assert read_kiosk_token(write_secret(tmp_path / "good", TOKEN)) == TOKEN


def _mocked(remote: str, cookie: str | None, policy: AccessPolicy) -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda key, default=None: (
        (remote, 40000) if key == "peername" else default
    )
    app = web.Application()
    app[POLICY_KEY] = policy
    headers = {"Host": "127.0.0.1:8080"}
    if cookie is not None:
        headers["Cookie"] = f"{KIOSK_COOKIE}={cookie}"
    return make_mocked_request("GET", "/api/state", headers=headers, transport=transport, app=app)


@on_module_loop
async def test_the_kiosk_is_its_cookie_on_loopback_not_its_address() -> None:
    policy = AccessPolicy(kiosk=KioskKey(TOKEN))
    good = policy.kiosk.cookie
    assert policy.is_kiosk(_mocked("127.0.0.1", good, policy))
    assert not policy.is_kiosk(_mocked("127.0.0.1", None, policy))  # the address alone
    assert not policy.is_kiosk(_mocked("127.0.0.1", "0" * 64, policy))
    assert not policy.is_kiosk(_mocked("203.0.113.9", good, policy))  # only on the table's
    # The credential's endpoints answer the table computer only (from loopback they give it:
    # test_the_endpoints_give_the_cookie_for_a_ticket_and_nothing_else).
    for endpoint in (api_kiosk_ticket, api_kiosk):
        assert (await endpoint(_mocked("203.0.113.9", None, policy))).status == 403


# --- the guard ---------------------------------------------------------------------------------


class FakeTransport(asyncio.Transport):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.closed = False
        self.aborted = False
        self.protocol: asyncio.BaseProtocol | None = None

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self.protocol is not None
        return self.protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000 + self.n) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


def _guard(max_connections: int = 4, reserve: int = 2) -> ConnectionGuard:
    return ConnectionGuard(
        lambda: mock.Mock(spec=asyncio.Protocol),
        max_connections=max_connections,
        request_timeout=30.0,
        reserve=reserve,
    )


def _connect(guard: ConnectionGuard, n: int) -> FakeTransport:
    """A connection the guard's protocol takes, as the loop makes it (the transport knows its
    protocol, as asyncio's do)."""
    transport = FakeTransport(n)
    protocol = guard()
    transport.set_protocol(protocol)
    protocol.connection_made(transport)
    return transport


@on_module_loop
async def test_an_idle_connection_makes_room_oldest_first_never_a_busy_or_the_kiosks() -> None:
    guard = _guard()
    t = [_connect(guard, n) for n in range(4)]
    assert guard.request_arrived(t[0], kiosk=True)  # the kiosk's, and in flight
    guard.request_done(t[0])  # idle now, but the kiosk's: never closed for room
    assert guard.request_arrived(t[1], kiosk=False)  # in flight
    t.append(_connect(guard, 4))
    assert t[2].closed and not (t[0].closed or t[1].closed or t[3].closed)  # the oldest idle
    t.append(_connect(guard, 5))
    assert t[3].closed
    assert guard.connections == 4
    assert guard.tally.counts["connection_evicted"] == 2
    guard.request_done(t[1])  # idle again: now the newest idle, so the last to go
    t.append(_connect(guard, 6))
    assert t[4].closed and not t[1].closed


@on_module_loop
async def test_a_connection_that_sent_data_is_closed_last() -> None:
    guard = _guard()
    t = [_connect(guard, n) for n in range(4)]
    kiosk = t[0].get_protocol()
    assert isinstance(kiosk, asyncio.Protocol)
    kiosk.data_received(b"GET / HT")  # the kiosk's head on its way, say
    _connect(guard, 4)
    assert t[1].closed and not t[0].closed


@on_module_loop
async def test_when_nothing_is_idle_only_the_kiosk_keeps_the_reserve() -> None:
    guard = _guard(max_connections=2, reserve=2)
    busy = [_connect(guard, n) for n in range(2)]
    for transport in busy:
        assert guard.request_arrived(transport, kiosk=False)
    kiosk = _connect(guard, 2)
    assert not kiosk.is_closing()  # held beyond the cap, provisionally
    assert guard.request_arrived(kiosk, kiosk=True)  # the kiosk's: it stays
    other = _connect(guard, 3)
    assert not other.is_closing()
    assert not guard.request_arrived(other, kiosk=False)  # not the kiosk's: a 503, closed
    other.get_protocol().connection_lost(None)
    assert guard.request_arrived(_connect(guard, 4), kiosk=True)  # the reserve's last
    beyond = _connect(guard, 5)  # cap + reserve, none idle: refused at once
    assert beyond.aborted and guard.connections == 4
    assert guard.tally.counts["connection_refused"] == 2


def test_the_kiosks_stream_is_never_closed_for_anothers_whatever_its_address() -> None:
    limiter = StreamLimiter(max_streams=3, reserve=1)
    closed: list[object] = []
    assert limiter.admit("kiosk", True, closed.append)
    for n in range(10):
        assert limiter.admit(f"other-{n}", False, closed.append)  # loopback or not: alike
    assert "kiosk" not in closed and closed[0] == "other-0" and limiter.streams == 3
    assert limiter.admit("kiosk-2", True, closed.append)  # another of the kiosk's
    assert limiter.admit("kiosk-3", True, closed.append)
    assert limiter.admit("kiosk-4", True, closed.append)  # 3 of the kiosk's + its reserve
    assert not limiter.admit("other-late", False, closed.append)  # only the kiosk's left
    assert not limiter.admit("kiosk-5", True, closed.append)  # and its reserve is full


# --- the endpoints and the launcher, against the real server ---------------------------------


def _config(tmp_path: Path) -> str:
    token = write_secret(tmp_path / "kiosk-token", TOKEN)
    return f'\n[display]\nkiosk_token_file = "{token}"\n'


async def _post(url: str, path: str, body: dict[str, str]) -> aiohttp.ClientResponse:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + path, json=body, headers={"Origin": url}) as response,
    ):
        await response.read()
        return response


@on_module_loop
async def test_the_endpoints_give_the_cookie_for_a_ticket_and_nothing_else(tmp_path: Path) -> None:
    display = DisplayService(port=0)
    async with running_table(tmp_path, services=[display], config_extra=_config(tmp_path)):
        await display.wait_started()
        url = display.url
        assert display.kiosk_token == TOKEN  # from kiosk_token_file
        assert (await _post(url, "/api/kiosk/ticket", {"token": "wrong" * 8})).status == 403
        ticket = await asyncio.to_thread(fetch_ticket, url, TOKEN)
        async with (
            aiohttp.ClientSession() as session,
            # a change from another origin is refused, as every change is
            session.post(
                f"{url}/api/kiosk", json={"ticket": ticket}, headers={"Origin": "http://evil"}
            ) as refused,
        ):
            assert refused.status == 403
        spent = await _post(url, "/api/kiosk", {"ticket": ticket})
        assert spent.status == 200
        morsel = spent.cookies[KIOSK_COOKIE]
        assert morsel["httponly"] and morsel["samesite"] == "Strict" and morsel["path"] == "/"
        assert not morsel["max-age"] and not morsel["expires"]  # it ends with the browser
        assert morsel.value == KioskKey(TOKEN).cookie
        assert (await _post(url, "/api/kiosk", {"ticket": ticket})).status == 403  # once only
        with pytest.raises(TicketRefused):
            await asyncio.to_thread(fetch_ticket, url, "wrong" * 8)
        # The cookie is what the page's requests carry; it grants nothing but the preference.
        async with aiohttp.ClientSession() as session:
            cookie = {"Cookie": f"{KIOSK_COOKIE}={morsel.value}"}
            async with session.get(f"{url}/api/state", headers=cookie) as r:
                assert (await r.json())["controls"]["kiosk"] is True
            async with session.get(f"{url}/api/state") as r:
                assert (await r.json())["controls"]["kiosk"] is False


FAKE_BROWSER = """
import json, os, stat, sys, urllib.parse
page = urllib.parse.urlsplit(sys.argv[-1]).path
st, dt = os.stat(page), os.stat(os.path.dirname(page))
with open(os.environ["FAKE_BROWSER_OUT"], "w") as out:
    json.dump({"argv": sys.argv, "page_mode": stat.S_IMODE(st.st_mode),
               "dir_mode": stat.S_IMODE(dt.st_mode), "content": open(page).read()}, out)
"""


@on_module_loop
async def test_the_launcher_never_puts_the_ticket_on_a_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    browser = tmp_path / "fake-browser.py"
    browser.write_text(FAKE_BROWSER, encoding="utf-8")
    out = tmp_path / "browser-saw.json"
    monkeypatch.setenv("FAKE_BROWSER_OUT", str(out))
    display = DisplayService(port=0)
    config = _config(tmp_path)
    async with running_table(tmp_path / "run", services=[display], config_extra=config):
        await display.wait_started()
        url = display.url
        argv = [sys.executable, str(browser), "--kiosk"]
        code = await asyncio.to_thread(launch, url, tmp_path / "kiosk-token", argv, wait=5)
        assert code == 0
        saw = json.loads(out.read_text())
        assert saw["argv"][:-1] == argv[1:] and saw["argv"][-1].startswith("file:///")
        assert saw["page_mode"] == 0o600 and saw["dir_mode"] == 0o700
        assert not Path(urllib.parse.urlsplit(saw["argv"][-1]).path).exists()  # removed
        target = saw["content"].split("url=", 1)[1].split('"', 1)[0]
        assert target.startswith(f"{url}/kiosk#")
        ticket = urllib.parse.unquote(target.split("#", 1)[1])
        assert ticket not in " ".join(saw["argv"]) and TOKEN not in saw["content"]
        assert (await _post(url, "/api/kiosk", {"ticket": ticket})).status == 200
        # A wrong token, or none: the dealer page all the same, without the credential.
        write_secret(tmp_path / "wrong-token", "w" * 40)
        code = await asyncio.to_thread(launch, url, tmp_path / "wrong-token", argv, wait=5)
        assert code == 0 and f"{url}/dealer" in json.loads(out.read_text())["content"]
        monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
        code = await asyncio.to_thread(launch, url, None, argv, wait=5)
        assert code == 0 and f"{url}/dealer" in json.loads(out.read_text())["content"]
    err = capsys.readouterr().err
    assert "403" in err and "without the kiosk's credential" in err


def test_the_start_page_escapes_what_it_is_given(tmp_path: Path) -> None:
    page = write_start_page(tmp_path / "d", 'http://127.0.0.1:8080/"><script>', "t/+?&#")
    text = page.read_text()
    assert "<script>" not in text and "%2F%2B%3F%26%23" in text
    assert stat.S_IMODE(os.stat(page).st_mode) == 0o600
    assert "/dealer" in start_page("http://127.0.0.1:8080", None)


# --- in Chromium -------------------------------------------------------------------------------


@on_module_loop
async def test_the_kiosk_page_opened_by_the_launcher_works_with_its_credential_under_a_flood(
    browser: Browser, tmp_path: Path, raise_nofile: None
) -> None:
    display = DisplayService(port=0)
    async with running_table(
        tmp_path / "run", services=[display], config_extra=_config(tmp_path), seed=5
    ) as t:
        await display.wait_started()
        url = display.url
        ticket = await asyncio.to_thread(fetch_ticket, url, TOKEN)
        start = write_start_page(tmp_path / "kiosk", url, ticket)
        context = await browser.new_context(viewport=VIEWPORT)
        errors: list[str] = []
        try:
            page = await context.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(start.as_uri())  # as the launcher's browser opens it
            await page.wait_for_url(f"{url}/dealer")
            await page.wait_for_selector("#link.up")
            await expect(page.locator("body")).to_have_attribute("data-kiosk", "yes")
            [cookie] = [c for c in await context.cookies() if c["name"] == KIOSK_COOKIE]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert cookie["expires"] == -1  # a session cookie: gone when the browser quits
            assert await page.evaluate("document.cookie") == ""  # out of the page's reach
            # The ticket left no trace in the address the page can see.
            assert ticket not in await page.evaluate("location.href + history.length")
            # The dealer page works as ever: dealer input and the next round.
            await page.locator("#btn-seats").click()
            await page.locator('.seat-toggle[data-seat="6"]').click()
            await expect(page.locator('.seat-toggle[data-seat="6"]')).to_have_attribute(
                "aria-pressed", "false"
            )
            assert t.daemon.table.occupied["6"] is False
            await page.locator("#modal-close").click()
            result = await t.deal(rng_number=2)
            selector = f'#dealer-setting[data-state="set"][data-round-seq="{result.round_seq}"]'
            await expect(page.locator(selector)).to_be_visible()
            await shot(page, "dealer-kiosk-credential-1920x1080")

            # 1,100 idle connections from the kiosk's own address: the page is loaded again
            # (every connection of it new) and is live within 5 s; the next round shows.
            port = display.port or 0
            flood = []
            for _ in range(1_100):
                flood.append(await asyncio.open_connection("127.0.0.1", port))
            started = time.monotonic()
            await page.reload()
            await page.wait_for_selector("#link.up", timeout=5_000)
            print(
                f"\nthe kiosk page live again under the flood in {time.monotonic() - started:.2f} s"
            )
            await expect(page.locator("body")).to_have_attribute("data-kiosk", "yes")
            result = await t.deal(rng_number=3)  # the dealer has two Jacks this time
            selector = f'#dealer-setting[data-round-seq="{result.round_seq}"]'
            await expect(page.locator(selector)).to_be_visible()
            for _, writer in flood:
                writer.close()

            # The same start page again (its ticket spent): the dealer page, without the
            # credential, once the reason was shown.
            other = await browser.new_context(viewport=VIEWPORT)
            try:
                again = await other.new_page()
                await again.goto(start.as_uri())
                await expect(again.locator("#kiosk-note")).to_contain_text("spent")
                await again.wait_for_url(f"{url}/dealer", timeout=10_000)
                await again.wait_for_selector("#link.up")
                await expect(again.locator("body")).to_have_attribute("data-kiosk", "no")
            finally:
                await other.close()
            assert errors == [], errors
        finally:
            await context.close()


def test_the_cli_runs_the_launcher_with_the_browser_and_its_arguments(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from controller.cli.main import main

    calls: list[tuple[Any, ...]] = []

    def launched(*args: Any, **kwargs: Any) -> int:
        calls.append((*args, kwargs))
        return 0

    monkeypatch.setattr("controller.display.kiosk.launch", launched)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert main(["kiosk", "--browser", "/usr/bin/chromium"]) == 0
    assert main(["kiosk", "--token-file", "/t", "--", "--kiosk", "--lang=en"]) == 0
    first, second = calls
    assert first[0] == "http://127.0.0.1:8080" and first[1] == tmp_path / "kiosk-token"
    assert first[2] == ["/usr/bin/chromium", "--kiosk", "--incognito", "--no-first-run",
                        "--noerrdialogs"]  # fmt: skip
    assert second[1] == Path("/t") and second[2] == ["/usr/bin/chromium", "--kiosk", "--lang=en"]
