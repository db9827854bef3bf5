"""An honest day through a real daemon (issue 39): simulated devices over ptys through the real
serial drivers, the dealer page's sign-in with badge and PIN, 50 rounds with dealers signing in
and out between rounds, a rotation mid-deal and a restart; then `paigow-table audit verify`
exits 0 and `paigow-table journal backup` keeps a good copy, as the daily unit would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controller.badges import hash_pin
from controller.display import DisplayService
from tests.harness import running_table
from tests.journal.conftest import cli

pytestmark = pytest.mark.slow

DEALERS = {"D-17": "4821", "D-23": "9034", "D-40": "5561"}


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    origin = url.split("/api/", 1)[0]  # as the kiosk page posts: its own origin
    async with http.post(url, json=body, headers={"Origin": origin}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_fifty_rounds_with_dealers_signing_in_and_out_verify_and_back_up(
    tmp_path: Path,
) -> None:
    dealers = tmp_path / "dealers"
    dealers.write_text(
        "".join(f"{badge} {hash_pin(pin)}\n" for badge, pin in DEALERS.items()), encoding="utf-8"
    )
    extra = f'[display]\ndealers_file = "{dealers}"\n'
    journal = tmp_path / "journal.sqlite3"
    who: list[str | None] = []
    expected: list[str | None] = []
    for half, rounds in (("a", range(25)), ("b", range(25, 50))):  # a restart between
        display = DisplayService(port=0)
        async with running_table(
            tmp_path / half,
            services=[display],
            config_extra=extra,
            journal_path=journal,
            seed=len(who) + 1,
        ) as t:
            await display.wait_started()
            async with aiohttp.ClientSession() as http:
                signed: str | None = t.daemon.table.dealer_id
                for n in rounds:
                    if n % 10 == 3:  # a rotation while the cards are coming out
                        await t.rng.press(n % 7 + 1)
                        dealing = asyncio.ensure_future(t.shuffler.deal())
                        await asyncio.sleep(0.05)
                        badge = list(DEALERS)[(n // 10 + 1) % 3]  # not the one signed in
                        url = f"{display.url}/api/sign-in"
                        await _post(http, url, {"badge": badge, "pin": DEALERS[badge]})
                        await dealing
                        result = await t.next_closed()
                        # The round opened before the rotation unless the sign-in won the race.
                        assert result.dealer_id in (signed, badge)
                        expected.append(result.dealer_id)
                        signed = badge
                    else:
                        if n % 10 == 0:
                            badge = list(DEALERS)[(n // 10) % 3]
                            url = f"{display.url}/api/sign-in"
                            await _post(http, url, {"badge": badge, "pin": DEALERS[badge]})
                            signed = badge
                        elif n % 10 == 7:
                            await _post(http, f"{display.url}/api/sign-out", {})
                            signed = None
                        result = await t.deal(rng_number=n % 7 + 1)
                        expected.append(signed)
                    who.append(result.dealer_id)
    assert who == expected
    assert {d for d in who if d} == set(DEALERS) and None in who
    verified = cli("audit", "verify", "--journal", str(journal))
    print(f"dealers by round: {who}")
    print(f"audit verify: exit {verified.returncode}: {verified.stdout.strip()}")
    assert verified.returncode == 0, verified.stderr
    assert "50 dealt again" in verified.stdout + verified.stderr
    backup = cli("journal", "backup", "--journal", str(journal), "--to", str(tmp_path / "bk"))
    print(f"journal backup: exit {backup.returncode}: {backup.stdout.strip()}")
    assert backup.returncode == 0, backup.stderr
    assert not list((tmp_path / "bk").glob("*.bad"))
