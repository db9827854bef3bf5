"""DNS rebinding against the real display server (issue 32, L6′): a page on another site whose
name the attacker points at the table's address makes the browser send the attacker's name in
``Host``. The display answers nothing to a foreign ``Host`` — GETs, static files and the live
stream included, from loopback or over the network — and a name of its own only on its own
port; ``[display] allowed_hosts`` adds the names the floor reaches it by."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from controller.display import DisplayService
from tests.display.conftest import unavailable, write_secret
from tests.display.test_access import TOKEN, non_loopback_address
from tests.harness import running_table

REBOUND = "rebind.attacker.example"
FLOOR_NAME = "table7.floor.example"


async def _status(http: aiohttp.ClientSession, url: str, host: str, **headers: str) -> int:
    async with http.get(url, headers={"Host": host, **headers}, allow_redirects=False) as r:
        return r.status


async def test_a_foreign_host_is_refused_on_every_path(tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    token = write_secret(tmp_path / "supervisor.token", TOKEN)
    display = DisplayService(host="0.0.0.0", port=0)
    extra = (
        f'[display]\nhost = "0.0.0.0"\nsupervisor_token_file = "{token}"\n'
        f'allowed_hosts = ["{FLOOR_NAME}"]\n'
    )
    async with running_table(tmp_path / "run", services=[display], config_extra=extra):
        await display.wait_started()
        port = display.port
        local, remote = f"http://127.0.0.1:{port}", f"http://{address}:{port}"
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession() as http:
            # The attack: the attacker's name, on the table's port, every kind of GET.
            for path in ("/api/state", "/static/dealer.js", "/dealer", "/api/rounds"):
                assert await _status(http, local + path, f"{REBOUND}:{port}") == 403, path
                assert await _status(http, remote + path, f"{REBOUND}:{port}", **bearer) == 403
            # The table's own names, but another port than the one it listens on.
            assert await _status(http, f"{local}/api/state", "localhost:1") == 403
            # What stays open: its names on its port, an address literal, the configured list.
            assert await _status(http, f"{local}/api/state", f"localhost:{port}") == 200
            assert await _status(http, f"{local}/static/dealer.js", f"127.0.0.1:{port}") == 200
            assert await _status(http, f"{remote}/api/state", f"{address}:{port}", **bearer) == 200
            assert (
                await _status(http, f"{remote}/api/state", f"{FLOOR_NAME}:{port}", **bearer) == 200
            )
            assert await _status(http, f"{local}/api/state", FLOOR_NAME.upper()) == 200
