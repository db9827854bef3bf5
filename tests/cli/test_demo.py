"""The demos as a newcomer meets them (issue 34): `paigow-table demo` with its port taken says so
in one line at once; a fresh demo warns of nothing that is not trouble; the pit
demo shows the whole product: the pit page, each table's dealer and supervisor page, a supervisor
and PIN, and a latched alarm the pit acknowledges."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def paigow_table(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli", *args]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", [["demo"], ["demo", "--tables", "2"], ["pit", "demo"]])
def test_a_taken_port_is_one_line_naming_it_and_the_option(
    command: list[str], taken_port: int
) -> None:
    started = time.monotonic()
    done = subprocess.run(
        paigow_table(*command, "--http-port", str(taken_port)),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 69
    name = " ".join(command[:2]) if command[0] == "pit" else "demo"
    assert done.stderr.splitlines() == [
        f"paigow-table {name}: port {taken_port} on 127.0.0.1 is in use (another demo, or "
        f"a table?): choose another with --http-port {taken_port + 1}"
    ]
    assert done.stdout == ""
    assert time.monotonic() - started < 10  # before any daemon or broker starts


@pytest.mark.daemon  # runs the demo: whole table daemons as subprocesses
def test_a_fresh_demo_warns_of_nothing(tmp_path: Path) -> None:
    """A first start is not a change of House Way, and unsigned commands in a demo are said as
    what they are, not as a warning."""
    done = subprocess.run(
        paigow_table(
            "demo",
            "--rounds",
            "1",
            "--interval",
            "0",
            "--seed",
            "2",
            "--http-port",
            "0",
            "--journal",
            str(tmp_path / "j.sqlite3"),
        ),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    both = done.stdout + done.stderr
    assert "[warning" not in both, both
    assert "house_way_changed" not in both
    assert "mqtt ▸ round " in both  # the feed printed, through the demo's own Mosquitto …
    assert not re.search(r"mqtt ▸ (round|dead) .*\(replayed\)", both)  # … its rounds live


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        body = response.read()
    return json.loads(body) if "/api/" in url else body.decode()


def _post(url: str, body: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(
        url,
        json.dumps(body).encode(),
        # Same-origin JSON, as the page's own script sends it (issue 30).
        {"Content-Type": "application/json", "Origin": url.split("/api/", 1)[0]},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _until(what: str, check: Any, timeout: float = 90.0) -> Any:
    """Ask the running demo until ``check()`` answers (a process of its own: nothing to await)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout} s")


@pytest.mark.daemon  # runs the demo: whole table daemons as subprocesses
def test_the_pit_demo_shows_every_page_and_an_alarm_to_acknowledge() -> None:
    proc = subprocess.Popen(
        paigow_table("demo", "--tables", "2", "--interval", "1", "--http-port", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        head: list[str] = []
        while not head or "latched alarm" not in head[-1]:
            line = proc.stdout.readline()
            assert line, head
            head.append(line.rstrip("\n"))
        text = "\n".join(head)
        pit = re.search(r"^pit page (http://\S+)/", text, re.MULTILINE)
        badge = re.search(r"badge (\S+)  PIN (\d{6})", text)
        pages = re.findall(r"^  (PG-\d\d)  dealer (\S+)   supervisor (\S+)$", text, re.MULTILINE)
        assert pit and badge and len(pages) == 2, text
        for _table, dealer, supervisor in pages:
            assert "<html" in _get(dealer).lower() and "<html" in _get(supervisor).lower()
        api = pit.group(1) + "/api"

        def latched() -> dict[str, Any] | None:
            try:
                alarms = _get(f"{api}/table/PG-01")["table_alarms"]
            except urllib.error.HTTPError as exc:  # 404: the pit has not stored PG-01 yet
                if exc.code != 404:  # (its batches wait batch_wait to fill)
                    raise
                return None
            return next((a for a in alarms if a["ack_required"] and not a["acked_by"]), None)

        alarm = _until("latched alarm on PG-01", latched)
        ids = {"table_id": "PG-01", "alarm_id": alarm["alarm_id"]}
        status, answer = _post(f"{api}/acknowledge", {**ids, "by": badge.group(1)})
        assert status == 400, answer  # a typed name is no credential
        wrong = "000000" if badge.group(2) != "000000" else "111111"
        status, answer = _post(f"{api}/acknowledge", {**ids, "badge": badge.group(1), "pin": wrong})
        assert status in (401, 403), answer  # only the demo's supervisor, with the PIN
        status, answer = _post(
            f"{api}/acknowledge", {**ids, "badge": badge.group(1), "pin": badge.group(2)}
        )
        assert status == 200 and answer["ok"], answer

        def acknowledged() -> bool:
            alarms = _get(f"{api}/table/PG-01")["table_alarms"]
            return any(
                a["alarm_id"] == alarm["alarm_id"] and a["acked_by"] == badge.group(1)
                for a in alarms
            )

        _until("acknowledgement from the table", acknowledged)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
