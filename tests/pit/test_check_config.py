"""The pit as a casino's IT installs it (issue 31): ``paigow-table pit check-config FILE`` says
every error at once with the key meant, as the table's check-config does; a missing config or a
directory is one line and an exit status (controller/exits.py), never a traceback, for
``check-config`` and ``run`` alike (``pit run --config config/pit.example.toml`` from a checkout
ended in a FileNotFoundError traceback); with the broker down the ingest's warnings back off."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from pit.config_check import check_pit_config
from pit.service import LogThrottle, install_throttle
from simulators.mosquitto import free_port
from tests.pit.conftest import KEY, make_config

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "pit", *args],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip


def _secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_every_error_at_once_with_did_you_mean(tmp_path: Path) -> None:
    weak = _secret(tmp_path / "report.key", KEY.hex(), 0o644)  # readable by everyone
    short = _secret(tmp_path / "command.key", "abcd")  # not 32 bytes
    config = tmp_path / "pit.toml"
    config.write_text(
        '[site]\nid = "riverside"\n'
        '[broker]\nhots = "broker.example"\nport = "eighty"\n'
        f'[databse]\nurl = "postgresql://pit@db/pit"\n'
        f'[database]\npath = "{tmp_path / "gone" / "pit.sqlite3"}"\n'
        f'[commands]\nkey_file = "{short}"\nsupervisors_file = "{tmp_path / "nobody"}"\n'
        f'[shift]\nreport_key_file = "{weak}"\ntimezone = "Europe/Lodnon"\n'
        '[web]\nhost = "0.0.0.0"\n'
    )
    result = check_pit_config(config)
    assert result.config is None
    said = {issue.key: issue.message for issue in result.errors}
    assert "did you mean 'host'?" in said["broker.hots"]
    assert "did you mean 'database'?" in said["databse"]
    assert "valid integer" in said["broker.port"] and "'eighty'" in said["broker.port"]
    assert "shorter than 32 bytes" in said["commands.key_file"]
    assert "no such file" in said["commands.supervisors_file"]
    assert "readable" in said["shift.report_key_file"]
    assert "unknown time zone" in said["shift.timezone"]
    assert "web.token_file" in said and "web.allowed_hosts" in said
    assert "no such directory" in said["database.path"]
    assert len(result.errors) == 10, result.errors
    # The same from the command line: every line FILE: KEY: MESSAGE, exit 1 (a finding, as the
    # table's check-config), no traceback.
    run = _cli("check-config", str(config))
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if ": warning: " not in line]
    assert len(lines) == 11 and lines[-1].endswith("10 error(s)"), run.stderr
    assert all(line.startswith(f"{config}: ") for line in lines)


def test_a_good_config_passes(tmp_path: Path) -> None:
    key = _secret(tmp_path / "checkpoint.key", KEY.hex())
    config = tmp_path / "pit.toml"
    config.write_text(
        f'[site]\nid = "riverside"\n[database]\npath = "{tmp_path / "pit.sqlite3"}"\n'
        f'[record]\ncheckpoint_key_file = "{key}"\n'
    )
    run = _cli("check-config", str(config))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{config}: OK")
    assert "supervisors_file: warning:" in run.stderr  # said, not refused


@pytest.mark.parametrize("command", ["check-config", "run", "migrate"])
def test_missing_file_or_directory_is_one_line(tmp_path: Path, command: str) -> None:
    for target, code, words in ((tmp_path / "nope.toml", 66, "no such file"),
                                (tmp_path, 66, "is a directory")):  # fmt: skip
        args = [str(target)] if command == "check-config" else ["--config", str(target)]
        run = _cli(command, *args)
        assert run.returncode == code, run.stderr
        assert run.stderr.count("\n") == 1 and words in run.stderr, run.stderr


def test_the_example_config_from_a_checkout_says_what_is_missing() -> None:
    """The README's command, run from a checkout: the files the example names are not there
    (they are the casino's); each said on its line, exit 78, no traceback."""
    run = _cli("run", "--config", "config/pit.example.toml")
    assert run.returncode == 78, run.stderr
    assert "Traceback" not in run.stderr
    assert "broker.password_file: /etc/paigow-pit/mqtt-password: no such file" in run.stderr
    assert "broker.ca_file: /etc/paigow-pit/casino-ca.pem: no such file" in run.stderr


def test_backoff_lets_the_first_through_then_fewer() -> None:
    now = [0.0]
    backoff = LogThrottle(clock=lambda: now[0])

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("pit.ingest", logging.WARNING, __file__, 1, msg, None, None)

    passed = []
    for _ in range(120):  # a retry every 0.5 s for a minute
        r = record("pit_mqtt_lost: [Errno 111] Connection refused")
        if backoff.filter(r):
            passed.append((now[0], r.getMessage()))
        now[0] += 0.5
    assert [t for t, _ in passed] == [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]
    assert "(1 more like it held back" in passed[1][1]
    assert "(15 more like it" in passed[4][1]
    assert backoff.filter(record("pit_subscribed topic=x session=True"))
    assert backoff.filter(record("pit_mqtt_lost: again"))  # the link came back: said at once


async def test_broker_down_warnings_back_off(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """A pit whose broker is not there for 4 s: without the log's throttle, a warning each try;
    with it, at most 3. The tries themselves wait 0.5, 1, 2 … s (``pit.ingest.RETRY``, the
    table's Backoff; they waited a fixed 0.5 s before issue 41): 3 to 5 in the 4 s."""
    from pit.ingest import Ingest
    from pit.store import Store, migrate

    config = make_config(free_port(), f"sqlite:///{tmp_path / 'pit.sqlite3'}")
    migrate(config.database_url)
    install_throttle()
    ingest = Ingest(config, lambda: Store(config.database_url, root=config.site.root))
    stop = asyncio.Event()
    caplog.set_level(logging.WARNING, logger="pit.ingest")
    task = asyncio.create_task(ingest.run(stop))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), 4.0)  # the broker stays down this long
    stop.set()
    await asyncio.wait_for(task, 10)
    lost = [r for r in caplog.records if r.getMessage().startswith("pit_mqtt_lost")]
    assert 1 <= len(lost) <= 3, [r.getMessage() for r in lost]
    assert 3 <= ingest.stats.link_errors <= 5, ingest.stats  # it kept trying, less and less often


def test_a_feed_keys_file_that_is_not_one_is_named_with_its_line(tmp_path: Path) -> None:
    """The tables' public keys are read as the pit reads them: a line that is not
    ``TABLE_ID ed25519 <hex>`` is an error of check-config, not a refusal at the first start."""
    keys = tmp_path / "feed-keys"
    keys.write_text("PG-01 ed25519 " + "ab" * 32 + "\nPG-02 rsa 1234\n")
    config = tmp_path / "pit.toml"
    config.write_text(
        '[site]\nid = "riverside"\n'
        f'[database]\nurl = "sqlite:///{tmp_path / "pit.sqlite3"}"\n'
        f'[record]\nfeed_keys_file = "{keys}"\n'
    )
    result = check_pit_config(config)
    said = {issue.key: issue.message for issue in result.errors}
    assert f"{keys}:2:" in said["record.feed_keys_file"] or "PG-02" in said["record.feed_keys_file"]


def test_the_demo_config_keeps_a_path_with_quotes_and_backslashes(tmp_path: Path) -> None:
    """The pit demo's config is written by a TOML writer (issue 41: it was an f-string, and a
    path with a quote or a backslash was another path, or no TOML at all)."""
    from pit.config import parse_pit_config
    from simulators.pit_demo import demo_pit_config

    odd = tmp_path / 'a "quoted" dir\\with\\backslashes'
    files = {name: odd / name for name in ("checkpoint", "command", "report", "feed", "sup")}
    text = demo_pit_config(
        odd, 1883, 8090, checkpoint_key=files["checkpoint"], command_key=files["command"],
        report_key=files["report"], feed_keys=files["feed"], supervisors=files["sup"], tables=3,
    )  # fmt: skip
    config = parse_pit_config(text)
    assert config.record.checkpoint_key_file == files["checkpoint"]
    assert config.commands.supervisors_file == files["sup"]
    assert config.database_url == f"sqlite:///{odd / 'pit.sqlite3'}"
    assert config.protection.shufflers["PG-03"] == "SIM-2 1003"
