"""Issue 30: a person acknowledges, not a typed name; the pit page answers only its own Host and
takes changes only as same-origin JSON; sessions end at logout; streams are capped; the
cookie is Secure over TLS. Attacked as an adversary would: a cross-site ``text/plain`` POST
naming supervisor "S100" (from a real Chromium page of another origin, with the pit's session
cookie in the browser), a foreign Host (DNS rebinding, in Chromium too), a typed name without
a PIN, guessed PINs, a logged-out cookie replayed, a flood of event streams."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import secrets
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
from aiohttp import web

from controller.badges import hash_pin
from controller.messages import AlarmPayload, envelope
from pit.config import PitConfig, parse_pit_config
from pit.service import page_store_factory, store_factory
from pit.store import Incoming, migrate
from pit.web import PitWeb, serving
from simulators.feed import SimTable, wire
from simulators.mosquitto import Mosquitto
from tests.display.conftest import chromium
from tests.pit.conftest import feed_keys_file

PIN = "482915"


def _secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def _config(tmp: Path, broker: int, db_url: str, extra_web: str = "") -> tuple[PitConfig, str]:
    token = secrets.token_urlsafe(24)
    token_file = _secret(tmp / "token", token)
    key = _secret(tmp / "command.key", secrets.token_hex(32))
    supervisors = _secret(tmp / "supervisors", f"S100 {hash_pin(PIN, iterations=20_000)}")
    config = parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker}\n[database]\nurl = "{db_url}"\n'
        f'[record]\nfeed_keys_file = "{feed_keys_file(tmp / "feed-keys", ["PG-01"])}"\n'
        f'[commands]\nkey_file = "{key}"\nsupervisors_file = "{supervisors}"\n'
        f'[web]\nhost = "127.0.0.1"\nport = 0\ntoken_file = "{token_file}"\nmax_streams = 2\n'
        + extra_web
    )
    return config, token


def _seed(config: PitConfig) -> str:
    """PG-01 with a latched alarm; returns its id."""
    migrate(config.database_url)
    store = store_factory(config)()
    table = SimTable("PG-01")
    now = dt.datetime.now(dt.UTC)
    table.seq += 1
    alarm = AlarmPayload(
        code="command_refused", severity="critical", detail="x", alarm_id="PG-01-AL1"
    )
    body = envelope(alarm, msg_id="PG-01-M1", table_id="PG-01", seq=table.seq, time=now)
    status = table.status(now)
    store.ingest(
        [
            Incoming(status[0], wire(status[1]), False, now.timestamp()),
            Incoming(f"{table.prefix}alarm", wire(body), False, now.timestamp()),
        ]
    )
    store.close()
    return "PG-01-AL1"


@contextlib.asynccontextmanager
async def _commands(port: int) -> AsyncIterator[list[dict[str, Any]]]:
    """Every command published on the tables' command topics while inside."""
    got: list[dict[str, Any]] = []
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe("casino/demo/paigow/+/cmd/#", qos=1)

        async def read() -> None:
            async for m in client.messages:
                assert isinstance(m.payload, bytes)
                got.append(json.loads(m.payload))

        task = asyncio.create_task(read())
        try:
            yield got
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _login(http: aiohttp.ClientSession, url: str, token: str) -> str:
    async with http.post(f"{url}/api/login", json={"token": token}, headers={"Origin": url}) as r:
        assert r.status == 200, await r.text()
        return r.cookies["pit_session"].value


async def test_a_forged_acknowledge_is_refused_and_a_badge_and_pin_acknowledge(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    config, token = _config(tmp_path, broker.port, db_url)
    alarm_id = _seed(config)
    pit = PitWeb(config, page_store_factory(config))
    async with serving(pit), _commands(broker.port) as sent:
        url = pit.url
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            cookie = await _login(http, url, token)
            forged = {"table_id": "PG-01", "alarm_id": alarm_id, "by": "S100"}
            # The cross-site form post: text/plain, another site's Origin, the session cookie.
            for headers in (
                {"Content-Type": "text/plain", "Origin": "http://evil.example"},
                {"Content-Type": "text/plain", "Origin": url},
                {"Content-Type": "application/json", "Origin": "http://evil.example"},
                {"Content-Type": "application/json"},  # no Origin, no bearer: not a page of ours
            ):
                body = json.dumps(forged | {"badge": "S100", "pin": PIN})
                async with http.post(f"{url}/api/acknowledge", data=body, headers=headers) as r:
                    assert r.status in (403, 415), (headers, r.status)
            # Same origin, but a typed name is not a credential; nor is a wrong PIN.
            same = {"Origin": url}
            async with http.post(f"{url}/api/acknowledge", json=forged, headers=same) as r:
                assert r.status == 400
            wrong = forged | {"badge": "S100", "pin": "000000"}
            async with http.post(f"{url}/api/acknowledge", json=wrong, headers=same) as r:
                assert r.status == 403
            # A foreign Host (DNS rebinding) is refused on every request, GETs too.
            for path in ("/api/floor", "/login", "/"):
                async with http.get(f"{url}{path}", headers={"Host": "rebind.example"}) as r:
                    assert r.status == 421, path
            assert sent == []
            # The supervisor's own badge and PIN: a signed command naming the badge.
            good = forged | {"badge": "S100", "pin": PIN}
            async with http.post(f"{url}/api/acknowledge", json=good, headers=same) as r:
                assert r.status == 200, await r.text()
            async with asyncio.timeout(10):
                while not sent:
                    await asyncio.sleep(0.05)
            assert sent[0]["by"] == "S100" and sent[0]["signature"] and sent[0]["key_id"] == "pit"
            # Logged out: the same cookie is refused from now on, server-side.
            async with http.post(f"{url}/api/logout", json={}, headers=same) as r:
                assert r.status == 200 and (await r.json())["revoked"]
        replay = aiohttp.ClientSession(cookies={"pit_session": cookie})
        async with replay, replay.get(f"{url}/api/floor") as r:
            assert r.status == 401
        await _guess_pins(url, token, forged)
    store = page_store_factory(config)()
    try:
        assert store.db.all("SELECT by_name FROM commands") == [("S100",)]
    finally:
        store.close()


async def test_one_supervisors_wrong_pins_do_not_lock_out_the_others_behind_one_address(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    """Issue 40 (F6): behind a proxy (here loopback) every supervisor has one address. Five
    wrong PINs for S100 lock S100 out, everywhere; S200 still acknowledges from the same
    address. A scan of badges from that address is then stopped by its own limit."""
    from controller.credentials import ADDRESS_TRIES

    config, token = _config(tmp_path, broker.port, db_url)
    _secret(
        tmp_path / "supervisors",
        f"S100 {hash_pin(PIN, iterations=20_000)}\nS200 {hash_pin('771203', iterations=20_000)}",
    )
    alarm_id = _seed(config)
    pit = PitWeb(config, page_store_factory(config))
    async with serving(pit), _commands(broker.port) as sent, aiohttp.ClientSession() as http:
        url, auth = pit.url, {"Authorization": f"Bearer {token}"}
        ack = {"table_id": "PG-01", "alarm_id": alarm_id}

        async def post(badge: str, pin: str) -> tuple[int, str]:
            body = ack | {"badge": badge, "pin": pin}
            async with http.post(f"{url}/api/acknowledge", json=body, headers=auth) as r:
                return r.status, str((await r.json()).get("error", ""))

        for _ in range(5):
            assert (await post("S100", "000000"))[0] == 403
        status, error = await post("S100", PIN)
        assert status == 403 and "too many" in error  # that badge, even with its right PIN
        status, error = await post("S200", "771203")
        assert status == 200, error  # another supervisor, the same address
        async with asyncio.timeout(10):
            while not sent:
                await asyncio.sleep(0.05)
        assert sent[0]["by"] == "S200"
        for n in range(ADDRESS_TRIES):  # a scan of badges from one address
            await post(f"X{n}", "000000")
        status, error = await post("S200", "771203")
        assert status == 403 and "too many" in error


async def _guess_pins(url: str, token: str, forged: dict[str, str]) -> None:
    """Guessing PINs locks the source out (the table's policy: 5 tries)."""
    async with aiohttp.ClientSession() as guesser:
        auth = {"Authorization": f"Bearer {token}"}
        codes = []
        for guess in range(7):
            guessed = forged | {"badge": "S100", "pin": f"{guess:06d}"}
            async with guesser.post(f"{url}/api/acknowledge", json=guessed, headers=auth) as r:
                codes.append((r.status, (await r.json())["error"]))
        assert all(c == 403 for c, _ in codes) and "too many" in codes[-1][1]


async def test_event_streams_are_capped(broker: Mosquitto, db_url: str, tmp_path: Path) -> None:
    config, token = _config(tmp_path, broker.port, db_url)
    migrate(config.database_url)
    pit = PitWeb(config, page_store_factory(config))
    auth = {"Authorization": f"Bearer {token}"}
    async with serving(pit), aiohttp.ClientSession(headers=auth) as http:
        open_: list[aiohttp.ClientResponse] = []
        try:
            for _ in range(2):
                r = await http.get(f"{pit.url}/api/events")
                assert r.status == 200
                await r.content.readline()  # the stream is open
                open_.append(r)
            async with http.get(f"{pit.url}/api/events") as r:
                assert r.status == 503
        finally:
            for r in open_:
                r.close()


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file = tmp / "web.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file = _secret(
        tmp / "web.key",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )
    return cert_file, key_file


async def test_the_session_cookie_is_secure_over_tls(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    config, token = _config(
        tmp_path, broker.port, db_url, f'cert_file = "{cert}"\nkey_file = "{key}"\n'
    )
    migrate(config.database_url)
    pit = PitWeb(config, page_store_factory(config))
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    async with serving(pit), aiohttp.ClientSession() as http:
        assert pit.url.startswith("https://")
        body = {"token": token}
        async with http.post(
            f"{pit.url}/api/login", json=body, headers={"Origin": pit.url}, ssl=context
        ) as r:
            assert r.status == 200
            morsel = r.cookies["pit_session"]
            assert morsel["secure"] and morsel["httponly"] and morsel["samesite"] == "Strict"


def _evil(target: Callable[[], str], body: str) -> web.Application:
    """Another origin's page that posts ``body`` to ``target()`` as text/plain, no-cors."""
    evil = web.Application()

    async def page(request: web.Request) -> web.Response:
        script = (
            f"fetch({json.dumps(target())}, {{method: 'POST', mode: 'no-cors', credentials: "
            f"'include', headers: {{'Content-Type': 'text/plain'}}, body: {json.dumps(body)}}})"
            ".finally(() => { document.title = 'sent'; });"
        )
        return web.Response(text=f"<html><body><script>{script}</script></body></html>",
                            content_type="text/html")  # fmt: skip

    evil.router.add_get("/", page)
    return evil


async def test_in_chromium_a_cross_site_page_cannot_acknowledge_nor_rebind(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    """The supervisor is logged in to the pit in Chromium; a page of another origin (another
    port: the same site, so the SameSite=Strict cookie goes along) posts the classic form
    payload as text/plain naming S100. Nothing is signed. A name made to resolve to the pit
    (host-resolver-rules, as DNS rebinding would) gets nothing either."""
    config, token = _config(tmp_path, broker.port, db_url)
    alarm_id = _seed(config)
    pit = PitWeb(config, page_store_factory(config))
    forged = json.dumps({"table_id": "PG-01", "alarm_id": alarm_id, "by": "S100",
                         "badge": "S100", "pin": PIN})  # fmt: skip
    runner = web.AppRunner(_evil(lambda: pit.url + "/api/acknowledge", forged))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    evil_url = f"http://127.0.0.1:{runner.addresses[0][1]}/"
    try:
        async with (
            serving(pit),
            _commands(broker.port) as sent,
            chromium("--host-resolver-rules=MAP rebind.test 127.0.0.1") as browser,
        ):
            context = await browser.new_context()
            page_ = await context.new_page()
            await page_.goto(f"{pit.url}/")
            await page_.fill("#token", token)
            await page_.click("button[type=submit]")
            await page_.wait_for_url(f"{pit.url}/")
            cookies = await context.cookies()
            assert any(c["name"] == "pit_session" for c in cookies)
            refused = pit.refused
            attacker = await context.new_page()
            await attacker.goto(evil_url)
            await attacker.wait_for_function("document.title === 'sent'", timeout=20_000)
            assert pit.refused == refused + 1
            port = pit.url.rsplit(":", 1)[1]
            rebound = await attacker.goto(f"http://rebind.test:{port}/api/floor")
            assert rebound is not None and rebound.status == 421
            assert "floor" not in (await rebound.text())
            assert sent == []
    finally:
        await runner.cleanup()
    store = page_store_factory(config)()
    try:
        assert store.db.all("SELECT count(*) FROM commands") == [(0,)]
    finally:
        store.close()
