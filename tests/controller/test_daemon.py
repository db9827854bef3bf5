"""The daemon end to end: simulators on ptys → real serial drivers → table → journal."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from controller.game.cards import parse_cards
from controller.game.house_way import house_way
from controller.journal import Journal
from controller.messages import VoidRound
from controller.table import AlarmRaised
from simulators.demo import DEMO_CONFIG
from simulators.mosquitto import free_port
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from tests.harness import running_table


async def test_fifty_rounds_are_journaled_with_the_house_way_setting(tmp_path: Path) -> None:
    async with running_table(tmp_path, seed=50) as t:
        results = [await t.deal() for _ in range(50)]
        assert [r.status for r in results] == ["settled"] * 50
        assert [r.round_seq for r in results] == list(range(1, 51))
        for result in results:
            record = t.journal.history.get_round(result.round_id)
            assert record is not None and record.status == "settled"
            stored = record.result
            assert stored is not None and stored["round_id"] == result.round_id
            dealer = stored["dealer"]
            kinds = [e.kind for e in record.events]
            assert kinds.count("packet_dealt") == 7 and "stub_verified" in kinds
            # Exactly its own draw: the next deal's RNG press is not journaled under this round.
            assert kinds.count("position_assigned") + kinds.count("position_drawn") == 1
            if dealer["two_jacks"]:
                assert dealer["setting"] is None
                continue
            expected = house_way(parse_cards(dealer["cards"])).to_dict()
            assert dealer["setting"] == expected
        assert len({r.round_id for r in results}) == 50
        assert t.journal.history.stats().by_status == {"settled": 50}


async def test_faults_through_the_whole_stack(tmp_path: Path) -> None:
    async with running_table(tmp_path, seed=7) as t:
        short = await t.deal(faults="short_packet")
        assert short.status == "dead" and short.reasons[0].code == "short_packet"
        dup = await t.deal(faults="duplicate_card")
        assert dup.status == "misdeal" and "duplicate_card" in [r.code for r in dup.reasons]
        alarms = [e.payload for e in t.effects if isinstance(e, AlarmRaised)]
        assert any(a.code == "deck_integrity" and a.round_id == dup.round_id for a in alarms)
        lost = await t.deal(faults="checksum_error")
        assert lost.status == "dead" and lost.reasons[0].code == "missing_packet"
        assert any(
            isinstance(e, AlarmRaised) and e.payload.code == "frame_error" for e in t.effects
        )
        garbled = await t.deal(faults="garbled_bytes")
        assert garbled.status == "settled"  # the codec resynchronised at the next frame
        good = await t.deal()
        assert good.status == "settled"
        reply = await t.daemon.submit(VoidRound(reason="cards flashed"))
        assert reply.ok
        voided = await t.next_closed()
        assert voided.round_id == good.round_id and voided.status == "void"
        record = t.journal.history.get_round(good.round_id)
        assert record is not None and record.status == "void"
        assert "settled_result_voided" in [e.kind for e in record.events]


# --- the daemon as a process: kill -9, restart, systemd notify --------------------------------


def _config(tmp: Path) -> Path:
    text = DEMO_CONFIG.format(
        table="PG-P1", shuffler=tmp / "shuffler", rng=tmp / "rng", journal=tmp / "journal.sqlite3"
    )
    path = tmp / "table.toml"
    # A broker nobody answers on: the table's messages wait in its outbox.
    path.write_text(
        text
        + "\n[display]\nport = 0  # any free port: tests may run beside a demo\n"
        + f'\n[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {free_port()}\n'
    )
    return path


def _start(config: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def _until(condition, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def _count_events(tmp: Path, kind: str) -> int:
    with sqlite3.connect(tmp / "journal.sqlite3") as conn:
        return int(
            conn.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0]
        )


def _journal_view(tmp: Path) -> Journal:
    return Journal.open(tmp / "journal.sqlite3", "PG-P1")


async def test_kill_9_mid_round_voids_it_on_restart_and_loses_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path)
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=3)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=3)
    async with shuffler, rng:
        proc = _start(config)
        try:
            view = _journal_view(tmp_path)
            await _until(lambda: _count_events(tmp_path, "device_online") >= 2)
            for n in (1, 2):
                await rng.press()
                await shuffler.deal()
                await _until(lambda n=n: view.history.stats().by_status.get("settled", 0) == n)
            await rng.press()
            await shuffler.deal("silence_mid_deal")  # three packets, then nothing
            # Two whole deals of seven packets, then three of the third.
            await _until(
                lambda: (
                    view.rounds.open_id() is not None
                    and _count_events(tmp_path, "packet_dealt") >= 17
                )
            )
            open_id = view.rounds.open_id()
            before = view.history.stats()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            proc = _start(config)
            await _until(lambda: view.history.stats().by_status.get("void", 0) == 1)
            record = view.history.get_round(open_id or "")
            assert record is not None and record.status == "void" and record.reason == "restart"
            after = view.history.stats()
            assert after.by_status == {"settled": 2, "void": 1}
            assert after.events >= before.events  # every committed event is still there
            # The void is announced: its message waits in the outbox (the broker is down).
            topics = [row.topic for row in view.outbox.pending(100)]
            assert topics.count("casino/demo/paigow/PG-P1/dead") == 1
            assert topics.count("casino/demo/paigow/PG-P1/round") == 2
            # And the table deals on, once the restarted daemon has its devices back.
            await _until(lambda: _count_events(tmp_path, "device_online") >= 4)
            await rng.press()
            await shuffler.deal()
            await _until(lambda: view.history.stats().by_status.get("settled", 0) == 3)
            view.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0


async def test_systemd_notify_ready_watchdog_and_stopping(tmp_path: Path) -> None:
    config = _config(tmp_path)
    sock_path = tmp_path / "notify.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(sock_path))
    server.settimeout(15)
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=4)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=4)
    async with shuffler, rng:
        proc = _start(config, {"NOTIFY_SOCKET": str(sock_path), "WATCHDOG_USEC": "400000"})
        try:
            seen: list[str] = []
            started = time.monotonic()

            def receive_until(word: str) -> None:
                while not any(word in m for m in seen):
                    seen.append(server.recv(4096).decode())

            await asyncio.to_thread(receive_until, "READY=1")
            await asyncio.to_thread(receive_until, "WATCHDOG=1")
            pings = sum("WATCHDOG=1" in m for m in seen)

            def receive_three() -> None:
                for _ in range(3):
                    seen.append(server.recv(4096).decode())

            await asyncio.to_thread(receive_three)
            assert sum("WATCHDOG=1" in m for m in seen) >= pings + 2  # pinging at half of 0.4 s
            assert time.monotonic() - started < 15
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(receive_until, "STOPPING=1")
            assert await asyncio.to_thread(proc.wait, 15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            server.close()


def test_device_options_reach_drivers_and_refused_ones_stop_the_start(tmp_path: Path) -> None:
    from controller.config import ConfigError
    from controller.devices import build_devices
    from simulators.demo import demo_config

    extra = """
[devices.dice]
driver = "hid_dice"
role = "position"
transport = "usb"
vendor_id = "0x1209"
product_id = "0x0001"
options = { backoff_initial = 0.2, backoff_cap = 1.5 }

[devices.pole]
driver = "esc_pos_pole"
role = "pole"
transport = "serial"
port = "/dev/null"
baudrate = 9600
"""
    config = demo_config(tmp_path, tmp_path / "j.sqlite3", extra=extra)
    devices, sinks = build_devices(config)
    assert [d.name for d in sinks] == ["pole"]
    assert {d.name for d in devices} == {"shuffler", "rng", "dice", "pole"}
    bad = demo_config(
        tmp_path, tmp_path / "j.sqlite3", extra=extra.replace("backoff_cap", "colour")
    )
    try:
        build_devices(bad, "table.toml")
    except ConfigError as exc:
        assert [(i.file, i.key) for i in exc.errors] == [("table.toml", "devices.dice")]
        assert "colour" in exc.errors[0].message
    else:
        raise AssertionError("an unknown driver option must be refused")
    path = tmp_path / "bad.toml"
    path.write_text(
        DEMO_CONFIG.format(
            table="PG-X", shuffler="/dev/null", rng="/dev/null", journal=tmp_path / "x.db"
        )
        + extra.replace("backoff_cap", "colour")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 78 and "devices.dice" in proc.stderr and "colour" in proc.stderr


async def test_a_redrawn_first_position_is_the_one_journaled_alarmed_and_used(
    tmp_path: Path,
) -> None:
    """Two RNG presses between deals: the alarm, the journal and the round agree on the newer."""
    async with running_table(tmp_path, seed=11) as t:
        await t.deal(rng_number=1)
        await t.rng.press(3)
        await t.rng.press(5)

        def replaced() -> AlarmRaised | None:
            return next(
                (
                    e
                    for e in t.effects
                    if isinstance(e, AlarmRaised) and e.payload.code == "position_replaced"
                ),
                None,
            )

        async def alarmed() -> None:
            while replaced() is None:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(alarmed(), timeout=10)
        await t.shuffler.deal()
        result = await t.next_closed()
        assert result.first_position is not None and result.first_position.position == 5
        record = t.journal.history.get_round(result.round_id)
        assert record is not None
        [assigned] = [e for e in record.events if e.kind == "position_assigned"]
        assert assigned.payload["position"] == 5
        alarm = replaced()
        assert alarm is not None and "next deal uses position 5" in alarm.payload.detail


async def test_every_line_of_run_follows_the_logging_section(tmp_path: Path) -> None:
    """[logging] format = "json": the drivers' device lines too (they are built before logging
    is configured), all on stderr as JSON, nothing on stdout."""
    config = _config(tmp_path)
    text = config.read_text().replace('level = "WARNING"', 'level = "INFO"\nformat = "json"')
    config.write_text(text)
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=4)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=4)
    async with shuffler:
        await rng.port.open()
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(
                [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
                stdout=o,
                stderr=e,
            )
        try:
            await _until(lambda: b'"daemon_ready"' in err.read_bytes())
            await _until(lambda: _count_events(tmp_path, "device_online") >= 2)
            await rng.close()  # the RNG box goes away: device_offline from the driver
            await _until(lambda: b"device_offline" in err.read_bytes())
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
    assert out.read_bytes() == b""
    lines = err.read_text().splitlines()
    events = [json.loads(line)["event"] for line in lines if line.strip()]
    assert "device_online" in events and "device_offline" in events


def _plain_lines(stderr: str) -> list[str]:
    """What ``run`` printed besides its JSON log lines (config warnings: no devices here)."""
    return [line for line in stderr.splitlines() if not line.startswith("{")]


def _run_once(config: Path, preexec=None) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=preexec,
        check=False,
    )


def test_a_garbage_journal_stops_run_with_one_line_and_status_65(tmp_path: Path) -> None:
    config = _config(tmp_path)
    (tmp_path / "journal.sqlite3").write_bytes(os.urandom(64 * 1024))
    done = _run_once(config)
    assert done.returncode == 65
    lines = _plain_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert "is damaged" in lines[0] and "journal salvage" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_journal_of_a_newer_schema_is_refused_with_status_65(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with _journal_view(tmp_path) as journal:
        journal.close()
    with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    done = _run_once(config)
    assert done.returncode == 65 and "schema 99" in done.stderr
    assert len(_plain_lines(done.stderr)) == 1


def test_a_journal_that_cannot_be_written_stops_run_with_status_73(tmp_path: Path) -> None:
    """The file-size limit makes every write past the first pages fail, as a full disk does
    (SQLite reports an I/O error or SQLITE_FULL): one line, status 73, no traceback."""
    config = _config(tmp_path)

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    done = _run_once(config, small_disk)
    assert done.returncode == 73, done.stderr
    lines = _plain_lines(done.stderr)
    assert len(lines) == 1 and "cannot be written" in lines[0], done.stderr


async def test_a_round_costs_two_durable_commits(tmp_path: Path) -> None:
    """Opening and settling a round wait for the disk; the packets, the draw and the deal's end
    between them do not (a restart voids an open round anyway): two syncs a round."""
    async with running_table(tmp_path, seed=89) as t:
        await t.deal(rng_number=1)  # the first round after start (devices online: durable too)
        durable, relaxed = t.journal.commits.durable, t.journal.commits.relaxed
        for n in range(5):
            result = await t.deal(rng_number=n + 2)
            assert result.status == "settled"
        await _until(lambda: _count_events(tmp_path, "deal_ended") >= 6)
        assert t.journal.commits.durable - durable == 5 * 2
        assert t.journal.commits.relaxed - relaxed >= 5 * 9  # 7 packets, the draw, the end
        # What the table heard is on file (read by another connection, as after a crash).
        with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
            settled = conn.execute("SELECT count(*) FROM rounds WHERE status = 'settled'")
            assert settled.fetchone()[0] == 6
