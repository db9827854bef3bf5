"""Who may see the pages and act on the table (controller/display/access.py): unit tests with
aiohttp's mocked requests from a fake remote address, and the real server bound to 0.0.0.0 and
reached through this machine's own non-loopback address."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from unittest import mock

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from controller.badges import Lockouts
from controller.display import DisplayService
from controller.display.access import AccessPolicy
from controller.display.server import POLICY_KEY, access_middleware
from controller.display.supervisors import PinGuard
from controller.http_rules import is_loopback_address
from tests.display.conftest import unavailable, write_secret
from tests.harness import running_table

TOKEN = "s3cret-supervisor-token"
REMOTE = "203.0.113.9"


def request(
    path: str,
    *,
    remote: str = REMOTE,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    policy: AccessPolicy | None = None,
) -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda key, default=None: (
        (remote, 40000) if key == "peername" else default
    )
    app = web.Application()
    app[POLICY_KEY] = policy or AccessPolicy(token=TOKEN)
    return make_mocked_request(
        method,
        path,
        headers={"Host": "127.0.0.1:8080", **(headers or {})},
        transport=transport,
        app=app,
    )


async def through_middleware(req: web.Request) -> web.StreamResponse:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.json_response({"ok": True})

    return await access_middleware(req, handler)


@pytest.mark.parametrize(
    ("remote", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("192.0.2.2", False),
        ("::ffff:192.0.2.2", False),
        ("fe80::1%eth0", False),
        ("", False),
        (None, False),
        ("not-an-address", False),
    ],
)
def test_loopback_addresses(remote: str | None, loopback: bool) -> None:
    assert is_loopback_address(remote) is loopback


async def test_a_remote_request_without_the_token_gets_401() -> None:
    response = await through_middleware(request("/supervisor"))
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    for path in ("/api/rounds", "/api/state", "/api/events", "/dealer", "/"):
        assert (await through_middleware(request(path))).status == 401


async def test_a_remote_request_with_a_wrong_token_gets_403() -> None:
    bad = request("/supervisor", headers={"Authorization": "Bearer nope"})
    assert (await through_middleware(bad)).status == 403


async def test_a_remote_request_with_the_token_may_view() -> None:
    bearer = request("/api/rounds", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (await through_middleware(bearer)).status == 200
    page = request("/supervisor", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (await through_middleware(page)).status == 200


async def test_the_token_in_the_url_grants_nothing() -> None:
    for token in (TOKEN, "nope"):
        assert (await through_middleware(request(f"/api/rounds?token={token}"))).status == 400
        with pytest.raises(web.HTTPSeeOther) as redirect:  # a page: the same, without it
            await through_middleware(request(f"/supervisor?round=9&token={token}"))
        assert redirect.value.location == "/supervisor?round=9"


async def test_without_a_configured_token_remote_access_is_refused() -> None:
    policy = AccessPolicy(token=None)
    for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}):
        response = await through_middleware(request("/supervisor", headers=headers, policy=policy))
        assert response.status == 403
        assert b"no supervisor token is configured" in response.body  # type: ignore[attr-defined]


async def test_forwarding_headers_are_not_trusted() -> None:
    spoofed = request("/supervisor", headers={"X-Forwarded-For": "127.0.0.1"})
    assert (await through_middleware(spoofed)).status == 401


async def test_static_files_hold_no_data_and_are_served_to_anyone() -> None:
    assert (await through_middleware(request("/static/common.css"))).status == 200


PAGE_POST = {"Origin": "http://127.0.0.1:8080", "Content-Type": "application/json"}


async def test_dealer_input_is_for_the_table_computer_only() -> None:
    authorised = {"Authorization": f"Bearer {TOKEN}", **PAGE_POST}
    remote_post = request("/api/dice", method="POST", headers=authorised)
    assert (await through_middleware(remote_post)).status == 403
    local_post = request("/api/dice", method="POST", remote="127.0.0.1", headers=PAGE_POST)
    assert (await through_middleware(local_post)).status == 200
    allowed = AccessPolicy(token=TOKEN, remote_dealer_input=True)
    assert allowed.can_act(request("/api/dice", method="POST", headers=authorised)).allowed
    assert not allowed.can_act(request("/api/dice", method="POST", headers=PAGE_POST)).allowed


async def test_loopback_requests_must_name_a_loopback_host() -> None:
    rebound = request("/api/state", remote="127.0.0.1", headers={"Host": "evil.example:8080"})
    assert (await through_middleware(rebound)).status == 403
    for host in ("localhost:8080", "127.0.0.1", "[::1]:8080"):
        ok = request("/api/state", remote="127.0.0.1", headers={"Host": host})
        assert (await through_middleware(ok)).status == 200


async def test_dealer_input_from_another_site_is_refused() -> None:
    for origin in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {}):
        cross = request(
            "/api/void",
            method="POST",
            remote="127.0.0.1",
            headers={"Content-Type": "application/json", **origin},
        )
        assert (await through_middleware(cross)).status == 403
    plain = request(
        "/api/void",
        method="POST",
        remote="127.0.0.1",
        headers={**PAGE_POST, "Content-Type": "text/plain"},
    )
    assert (await through_middleware(plain)).status == 415
    same = request("/api/void", method="POST", remote="127.0.0.1", headers=PAGE_POST)
    assert (await through_middleware(same)).status == 200


def test_wrong_pins_lock_out_their_source_longer_each_time() -> None:
    now = [100.0]
    guard = PinGuard("246813", Lockouts(clock=lambda: now[0]))
    assert guard.check("246813", "10.0.0.9").allowed
    for _ in range(5):
        assert guard.check("000000", "10.0.0.9").reason == "wrong PIN"
    assert not guard.check("246813", "10.0.0.9").allowed  # locked, even with the right PIN
    assert guard.check("246813", "127.0.0.1").allowed  # the kiosk is not locked out by it
    now[0] += 61
    assert guard.check("246813", "10.0.0.9").allowed
    for _ in range(5):
        guard.check("000000", "10.0.0.9")
    now[0] += 61
    assert "try again in 60 s" in guard.check("246813", "10.0.0.9").reason  # 120 s this time
    for _ in range(20):  # lockouts double up to an hour: 7,200 guesses a day become ~120
        now[0] += 3601
        for _ in range(5):
            guard.check("000000", "10.0.0.9")
    assert "try again in 3601 s" in guard.check("246813", "10.0.0.9").reason
    assert guard.failures_total == 110
    assert PinGuard(None).check("2468").reason.startswith("voiding from the display is disabled")


def test_a_short_void_pin_disables_voiding() -> None:
    guard = PinGuard("2468")
    assert guard.problem is not None and "at least 6 digits" in guard.problem
    assert not guard.check("2468", "127.0.0.1").allowed


# --- the real server, reached from a non-loopback address ------------------------------------


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (None if it has none)."""
    candidates: list[str] = []
    for probe in ("192.0.2.123", "198.51.100.1", "10.255.255.255"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((probe, 9))  # UDP: no packet is sent; the kernel picks a source
            except OSError:
                continue
            candidates.append(s.getsockname()[0])
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
        candidates += [str(info[4][0]) for info in infos]
    except OSError:
        pass
    for address in candidates:
        if not ipaddress.ip_address(address).is_loopback and address != "0.0.0.0":
            return address
    return None


async def test_remote_client_over_the_network_needs_the_token(tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    token = write_secret(tmp_path / "supervisor.token", TOKEN)
    display = DisplayService(host="0.0.0.0", port=0)
    extra = f'[display]\nhost = "0.0.0.0"\nsupervisor_token_file = "{token}"\n'
    async with running_table(tmp_path / "run", services=[display], config_extra=extra):
        await display.wait_started()
        remote = f"http://{address}:{display.port}"
        local = f"http://127.0.0.1:{display.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{remote}/supervisor") as r:
                assert r.status == 401
                assert "supervisor token" in (await r.json())["error"]
            async with http.get(f"{remote}/api/rounds") as r:
                assert r.status == 401
            async with http.get(f"{remote}/api/state", headers={"Authorization": "Bearer x"}) as r:
                assert r.status == 403
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            async with http.get(f"{remote}/api/state", headers=bearer) as r:
                assert r.status == 200
                assert (await r.json())["controls"]["dealer_input"] is False
            async with http.get(f"{remote}/supervisor", params={"token": TOKEN}) as r:
                assert r.status == 401  # redirected to the address without it: not accepted
                assert str(r.url) == f"{remote}/supervisor"
            async with http.get(f"{remote}/supervisor", headers=bearer) as r:
                assert r.status == 200 and "Supervisor" in await r.text()
            async with http.post(
                f"{remote}/api/dice", json={"dice": [1, 2, 3]}, headers={**bearer, "Origin": remote}
            ) as r:
                assert r.status == 403
            async with http.get(f"{local}/api/state") as r:  # the kiosk needs no token
                assert r.status == 200
                assert (await r.json())["controls"]["dealer_input"] is True


async def test_remote_client_is_refused_without_a_configured_token(tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    display = DisplayService(host="0.0.0.0", port=0)
    async with running_table(tmp_path, services=[display]):
        await display.wait_started()
        async with aiohttp.ClientSession() as http:
            url = f"http://{address}:{display.port}/supervisor"
            async with http.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
                assert r.status == 403
                assert "no supervisor token" in (await r.json())["error"]
