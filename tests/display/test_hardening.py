"""The display server under the attack requests of the outside audit (docs/display.md, "Access"
and "What is refused"), sent to the real server and daemon over real sockets: a cross-site
``text/plain`` post, bodies that are not JSON of the expected shape (30,000 deep, too large,
wrong types), dice as strings, the supervisor token in a URL, and a ``Server`` header naming
aiohttp's version."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import structlog

from controller.badges import hash_pin
from controller.display import DisplayService
from controller.logging import configure_logging
from tests.display.conftest import unavailable, write_secret
from tests.display.test_access import non_loopback_address
from tests.harness import RunningTable, journal_events, running_table

TOKEN = "pit-boss-token-5d1e9c"
PIN = "735102"
JSON = {"Content-Type": "application/json"}

#: Every POST the server answers, with a body of the right shape (the page's own).
POSTS: dict[str, dict[str, Any]] = {
    "/api/dice": {"dice": [3, 5, 6]},
    "/api/seats": {"occupied": {"6": False}},
    "/api/player-setting": {"seat": "2", "house_way": True, "round_id": None},
    "/api/player-setting/preview": {"seat": "2", "front": ["As", "Kd"], "round_id": None},
    "/api/void": {"pin": PIN, "reason": "Cards exposed", "round_id": None},
    "/api/alarms/acknowledge": {"alarm_id": "a-1", "by": "Kim", "pin": PIN},
    "/api/sign-in": {"badge": "D-17", "pin": "4821"},
    "/api/sign-out": {},
    "/api/login": {"token": TOKEN},
}


@dataclass
class Table:
    table: RunningTable
    display: DisplayService
    remote: str  # the server through this machine's own network address
    local: str  # the server through loopback (the kiosk's side)

    def commands(self) -> list[str]:
        """The kinds of every command and refusal journaled so far."""
        return [k for k, _ in journal_events(self.table.journal) if k.startswith("command")]


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """Everything logged (structlog and the standard library, aiohttp's too), as JSON lines."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    out = io.StringIO()
    configure_logging("DEBUG", "json", stream=out)
    try:
        yield out
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.configure(**config)
        logging.captureWarnings(False)


@pytest_asyncio.fixture
async def table(tmp_path: Path) -> AsyncIterator[Table]:
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    token = write_secret(tmp_path / "supervisor.token", TOKEN)
    pin = write_secret(tmp_path / "void.pin", PIN)
    dealers = tmp_path / "dealers"
    dealers.write_text(f"D-17 {hash_pin('4821', iterations=10_000)}\n", encoding="utf-8")
    extra = (
        f'[display]\nhost = "0.0.0.0"\nsupervisor_token_file = "{token}"\n'
        f'void_pin_file = "{pin}"\ndealers_file = "{dealers}"\n'
    )
    display = DisplayService(host="0.0.0.0", port=0)
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        yield Table(
            t, display, f"http://{address}:{display.port}", f"http://127.0.0.1:{display.port}"
        )


async def _send(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, dict[str, str], bytes]:
    async with http.request(method, url, allow_redirects=False, **kwargs) as r:
        return r.status, dict(r.headers), await r.read()


# --- 1. a state-changing POST must be JSON from the page's own origin ------------------------


async def test_a_cross_site_post_changes_nothing(table: Table) -> None:
    """``text/plain`` with no ``Origin`` is what a cross-site form or a no-cors ``fetch`` sends;
    no POST accepts it, nor JSON with no or a foreign ``Origin``."""
    origin = {"Origin": table.local}
    async with aiohttp.ClientSession() as http:
        for path, body in POSTS.items():
            url = table.local + path
            before = table.commands()
            text = json.dumps(body).encode()
            attacks = [
                {"Content-Type": "text/plain"},  # a cross-site form, fetch(mode: "no-cors")
                {"Content-Type": "text/plain", **origin},
                {"Content-Type": "application/x-www-form-urlencoded", **origin},
                {"Content-Type": "multipart/form-data; boundary=x", **origin},
                {},  # no Content-Type at all
                JSON,  # JSON but no Origin
                {**JSON, "Origin": "http://evil.example"},
                {**JSON, "Origin": "null"},  # a sandboxed frame, a redirect
                {**JSON, "Origin": f"http://127.0.0.1:{(table.display.port or 0) + 1}"},
            ]
            for headers in attacks:
                status, _, raw = await _send(http, "POST", url, data=text, headers=headers)
                assert status in (403, 415), (path, headers, status, raw)
                assert json.loads(raw)["ok"] is False
            assert table.commands() == before, f"an attack request on {path} reached the table"
            # What the pages send is accepted as before (the table may still refuse it: 409).
            status, _, raw = await _send(http, "POST", url, data=text, headers={**JSON, **origin})
            assert status in (200, 404, 409), (path, status, raw)


# --- 2. a body that is not JSON of the expected shape is a 400, never a 500 -------------------


MALFORMED: list[bytes] = [
    b"[" * 30_000 + b"]" * 30_000,  # 30,000 deep: a RecursionError in json.loads
    b'{"dice": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    b'{"occupied": {"6": [[[[[[[[[[[[[[[[[[[[false]]]]]]]]]]]]]]]]]]]}}',
    b"x" * 70_000,  # beyond the 64 KiB a body may have
    b'{"reason": "' + b"a" * 70_000 + b'"}',
    b"",
    b"not json",
    b"\xff\xfe{}",  # not UTF-8
    b'{"dice": [NaN, Infinity, -Infinity]}',
    b'{"seat": "2", "front": ["As", "Kd"]',  # cut short
    b"[1, 2, 3]",  # not an object
    b'"a string"',
    b"null",
    b'{"dice": ' + b"9" * 5000 + b"}",  # an integer Python will not parse from text
]

WRONG_TYPES: dict[str, list[Any]] = {
    "/api/dice": [{"dice": "356"}, {"dice": {"a": 1}}, {"dice": None}, {}],
    "/api/seats": [{"occupied": [1]}, {"occupied": {"6": "no"}}, {"occupied": {"6": 0}}],
    "/api/player-setting": [
        {"seat": {"a": 1}, "house_way": True},
        {"seat": "2", "front": "AsKd"},
        {"seat": "2", "front": [1, 2]},
        {"seat": "2", "house_way": "yes"},
        {"seat": 2, "house_way": True},
        {"seat": "2", "house_way": True, "round_id": 7},
    ],
    "/api/player-setting/preview": [
        {"seat": [], "front": ["As", "Kd"]},
        {"seat": "2", "front": 5},
        {"seat": "2", "front": [["As"], "Kd"]},
    ],
    "/api/void": [
        {"pin": 735102},
        {"pin": [PIN]},
        {"pin": PIN, "reason": {"why": 1}},
        {"pin": PIN, "round_id": 12},
    ],
    "/api/alarms/acknowledge": [{"alarm_id": 1, "by": "Kim", "pin": PIN}, {"by": ["K"]}],
    "/api/sign-in": [{"badge": 17, "pin": "4821"}, {"badge": "D-17", "pin": 4821}],
    "/api/sign-out": [{"extra": 1}, []],
    "/api/login": [{"token": 123}, {"token": [TOKEN]}, {}],
}


async def test_a_malformed_body_is_a_400_with_a_json_error(table: Table) -> None:
    headers = {**JSON, "Origin": table.local}
    async with aiohttp.ClientSession() as http:
        for path in POSTS:
            bodies = MALFORMED + [json.dumps(b).encode() for b in WRONG_TYPES[path]]
            for body in bodies:
                status, got, raw = await _send(
                    http, "POST", table.local + path, data=body, headers=headers
                )
                assert status == 400, (path, body[:60], status, raw[:300])
                assert got["Content-Type"].startswith("application/json"), (path, body[:60])
                answer = json.loads(raw)
                assert answer["ok"] is False and answer["error"], (path, body[:60])
                assert b"Traceback" not in raw and b"File " not in raw
    assert table.commands() == [], "a malformed body reached the table"
    # The server is still there for the kiosk.
    async with aiohttp.ClientSession() as http, http.get(f"{table.local}/api/state") as r:
        assert r.status == 200


async def test_an_unforeseen_failure_is_a_json_500_without_a_traceback(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug, with a secret detail")

    monkeypatch.setattr(table.table.daemon, "submit", broken)
    headers = {**JSON, "Origin": table.local, "Accept": "text/html"}
    async with aiohttp.ClientSession() as http:
        status, got, raw = await _send(
            http, "POST", f"{table.local}/api/dice", json={"dice": [1, 2, 3]}, headers=headers
        )
    assert status == 500
    assert got["Content-Type"].startswith("application/json")
    assert json.loads(raw) == {"ok": False, "error": "internal error: see the controller's log"}
    assert b"secret detail" not in raw and b"Traceback" not in raw


# --- 3. dice are integers 1-6, strictly -------------------------------------------------------


async def test_dice_must_be_three_integers_from_1_to_6(table: Table) -> None:
    headers = {**JSON, "Origin": table.local}
    refused: list[Any] = [
        ["1", "2", "3"],
        ["1", 2, 3],
        [1.0, 2.0, 3.0],
        [1, 2, 3.5],
        [True, 2, 3],
        [True, True, True],
        [1, 2, 7],
        [0, 1, 2],
        [-1, 2, 3],
        [1, 2],
        [1, 2, 3, 4],
        [[1], 2, 3],
        [None, 2, 3],
    ]
    async with aiohttp.ClientSession() as http:
        for dice in refused:
            status, _, raw = await _send(
                http, "POST", f"{table.local}/api/dice", json={"dice": dice}, headers=headers
            )
            assert status == 400, (dice, status, raw)
            assert json.loads(raw)["error"].startswith("dice"), raw
        assert table.commands() == []
        status, _, raw = await _send(
            http, "POST", f"{table.local}/api/dice", json={"dice": [1, 2, 3]}, headers=headers
        )
        assert status != 400, raw  # integers reach the table (which may refuse: no round)
    assert table.commands() == ["command.enter_dice"]


# --- 4. the supervisor token never travels in a URL --------------------------------------------


async def test_the_token_is_refused_in_the_url_and_taken_by_header_or_login(
    table: Table, log_lines: io.StringIO
) -> None:
    remote = table.remote
    async with aiohttp.ClientSession() as http:
        # In the query string it grants nothing: an API request is refused, a page is sent to
        # the same address without it.
        for path in ("/api/state", "/api/events", "/api/rounds?limit=5", "/api/overview"):
            sep = "&" if "?" in path else "?"
            status, _, raw = await _send(http, "GET", f"{remote}{path}{sep}token={TOKEN}")
            assert status == 400, (path, status, raw)
            assert "not accepted in the address" in json.loads(raw)["error"]
        status, headers, _ = await _send(http, "GET", f"{remote}/supervisor?token={TOKEN}&round=7")
        assert status == 303 and headers["Location"] == "/supervisor?round=7"
        status, headers, _ = await _send(http, "GET", f"{remote}/?token={TOKEN}")
        assert status == 303 and headers["Location"] == "/"
        # Wrong and right tokens in the header.
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        status, _, _ = await _send(http, "GET", f"{remote}/api/state", headers=bearer)
        assert status == 200
        wrong = {"Authorization": "Bearer nope"}
        assert (await _send(http, "GET", f"{remote}/api/state", headers=wrong))[0] == 403
        # A browser without a session gets the sign-in page (401), never the data.
        page = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
        status, headers, raw = await _send(http, "GET", f"{remote}/supervisor", headers=page)
        assert status == 401 and b'id="login-form"' in raw and b"PIT SUPERVISOR" not in raw
        assert headers["Cache-Control"] == "no-store"

    # The login exchange: JSON from the page's own origin, the token in the body; a session
    # cookie comes back (HttpOnly, SameSite=Strict) and carries the page and its live stream.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        login = f"{remote}/api/login"
        origin = {**JSON, "Origin": remote}
        status, _, raw = await _send(http, "POST", login, json={"token": TOKEN})
        assert status == 403  # no Origin: a cross-site login is refused too
        status, _, raw = await _send(http, "POST", login, json={"token": "nope"}, headers=origin)
        assert status == 403 and json.loads(raw)["error"] == "wrong supervisor token"
        assert len(http.cookie_jar) == 0
        status, headers, raw = await _send(
            http, "POST", login, json={"token": TOKEN}, headers=origin
        )
        assert status == 200, raw
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert (await _send(http, "GET", f"{remote}/api/state"))[0] == 200
        status, _, raw = await _send(http, "GET", f"{remote}/supervisor")
        assert status == 200 and b"PIT SUPERVISOR" in raw
        async with http.get(f"{remote}/api/events") as stream:
            assert stream.status == 200
            assert (await asyncio.wait_for(stream.content.readuntil(b"\n\n"), 5)).startswith(
                b"retry:"
            )
        # A session does not make a remote client the dealer.
        status, _, _ = await _send(
            http, "POST", f"{remote}/api/dice", json={"dice": [1, 2, 3]}, headers=origin
        )
        assert status == 403
        status, _, _ = await _send(http, "POST", f"{remote}/api/logout", json={}, headers=origin)
        assert status == 200
        assert (await _send(http, "GET", f"{remote}/api/state"))[0] == 401
        # Guessing is slow: five wrong tokens lock the source out, even for the right one.
        for _ in range(5):
            status, _, _ = await _send(http, "POST", login, json={"token": "x"}, headers=origin)
            assert status == 403
        status, _, raw = await _send(http, "POST", login, json={"token": TOKEN}, headers=origin)
        assert status == 403 and "too many wrong tries" in json.loads(raw)["error"]

    # A request aiohttp cannot parse, with the token in it: answered, and not logged either.
    reader, writer = await asyncio.open_connection("127.0.0.1", table.display.port)
    writer.write(f"GET /api/state?token={TOKEN}\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    assert (await asyncio.wait_for(reader.read(4096), 5)).startswith(b"HTTP/1.0 400")
    writer.close()

    logged = log_lines.getvalue()
    assert "display_refused" in logged  # the refusals were logged, the token never
    assert "token=<redacted>" in logged  # aiohttp's line about the malformed request
    assert TOKEN not in logged


async def test_the_supervisor_page_never_puts_the_token_in_a_url() -> None:
    static = Path(__file__).resolve().parents[2] / "controller" / "display" / "static"
    for name in ("common.js", "supervisor.js", "dealer.js", "login.js"):
        source = (static / name).read_text(encoding="utf-8")
        assert "token=" not in source and 'get("token")' not in source, name


# --- 5. a neutral Server header ---------------------------------------------------------------


async def test_the_server_header_names_no_software_version(table: Table) -> None:
    async with aiohttp.ClientSession() as http:
        answers = [
            await _send(http, "GET", f"{table.local}/api/state"),
            await _send(http, "GET", f"{table.local}/dealer"),
            await _send(http, "GET", f"{table.local}/static/common.css"),
            await _send(http, "GET", f"{table.local}/no-such-page"),
            await _send(http, "GET", f"{table.remote}/api/state"),  # 401
            await _send(http, "POST", f"{table.local}/api/dice", data=b"x"),  # 403
        ]
    for status, headers, _ in answers:
        assert headers["Server"] == "paigow-table", (status, headers)
    # A request aiohttp cannot parse is answered before any route: the same header.
    reader, writer = await asyncio.open_connection("127.0.0.1", table.display.port)
    writer.write(b"GET /\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    head = (await asyncio.wait_for(reader.read(4096), 5)).decode("latin-1")
    writer.close()
    assert head.split("\r\n", 1)[0].endswith(" 400 Bad Request"), head
    assert "\r\nServer: paigow-table\r\n" in head, head
    assert "aiohttp" not in head and "Python" not in head
