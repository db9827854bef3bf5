"""The table's feed key (controller/mqtt/feed_key.py, `paigow-table feed-key`): made once, mode
0600, never replaced; `show` prints what the pit registers; a file that is no key is a one-line
refusal; the table's key is the configured file, else feed.key beside the journal."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from controller.feed_signature import keyring, public_key_line
from controller.mqtt.feed_key import create_feed_key, feed_key_path, read_feed_key, table_signer
from controller.mqtt.publisher import MqttService
from simulators.demo import DEMO_CONFIG, demo_config
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import mqtt_section


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "feed-key", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_makes_the_key_once_and_show_prints_what_the_pit_registers(tmp_path: Path) -> None:
    key_file = tmp_path / "feed.key"
    made = _cli("init", "--key-file", str(key_file))
    assert made.returncode == 0, made.stderr
    assert "a new key, readable by this user only" in made.stderr
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    before = key_file.read_bytes()
    again = _cli("init", "--key-file", str(key_file))
    assert again.returncode == 0 and again.stderr == ""
    assert key_file.read_bytes() == before  # never replaced
    shown = _cli("show", "--key-file", str(key_file))
    assert shown.stdout == made.stdout == again.stdout
    lines = dict(line.split(" ", 1) for line in shown.stdout.splitlines())
    signer = read_feed_key(key_file)
    assert lines == {"key_id": signer.key_id, "public_key": public_key_line(signer.public_key)}
    assert keyring([lines["public_key"]]) == {signer.key_id: signer.public_key}
    assert "PRIVATE" not in shown.stdout and list(tmp_path.iterdir()) == [key_file]


def test_a_file_that_is_no_key_is_a_one_line_refusal(tmp_path: Path) -> None:
    missing = _cli("show", "--key-file", str(tmp_path / "none"))
    assert missing.returncode == 66 and missing.stderr.count("\n") == 1  # issue 39: 66
    garbage = tmp_path / "feed.key"
    garbage.write_text("not a key\n")
    refused = _cli("show", "--key-file", str(garbage))
    assert refused.returncode == 65  # not what it reads
    assert refused.stderr == (
        f"paigow-table feed-key show: {garbage}: expected an unencrypted Ed25519 private key "
        "in PEM (paigow-table feed-key init makes one)\n"
    )
    assert _cli("init", "--key-file", str(garbage)).returncode == 65  # refused, not replaced
    assert garbage.read_text() == "not a key\n"
    rsa = tmp_path / "rsa.pem"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:1024",
         "-out", str(rsa)],
        check=True, capture_output=True,
    )  # fmt: skip
    with pytest.raises(ValueError, match="expected an Ed25519 private key"):
        read_feed_key(rsa)


def test_the_table_key_is_the_configured_file_else_beside_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "state" / "journal.sqlite3"
    journal.parent.mkdir()
    config = demo_config(tmp_path, journal)
    assert feed_key_path(config) == journal.parent / "feed.key"
    signer = table_signer(config)  # made at the first start
    assert read_feed_key(journal.parent / "feed.key").key_id == signer.key_id
    assert table_signer(config).key_id == signer.key_id  # and kept
    other, created = create_feed_key(tmp_path / "other.key")
    assert created and other.key_id != signer.key_id
    configured = demo_config(
        tmp_path, journal, extra=f'\n[mqtt]\nfeed_key_file = "{tmp_path / "other.key"}"\n'
    )
    assert table_signer(configured).key_id == other.key_id
    shown = _cli("show", "--config", str(_written(tmp_path, journal)))
    assert shown.returncode == 0 and signer.key_id in shown.stdout
    memory = demo_config(tmp_path, Path(":memory:"))
    assert feed_key_path(memory) is None and table_signer(memory).key_id.startswith("ed25519:")


def _written(tmp_path: Path, journal: Path) -> Path:
    config = tmp_path / "table.toml"
    text = DEMO_CONFIG.format(
        table="PG-T1", shuffler=tmp_path / "shuffler", rng=tmp_path / "rng", journal=journal
    )
    config.write_text(text)
    return config


async def test_a_garbled_key_beside_the_journal_publishes_nothing_and_loses_nothing(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """Nothing leaves unsigned: the table deals on, says why in one line, and its messages wait
    in the journal until the key is fixed."""
    workdir = tmp_path / "table"
    workdir.mkdir()
    (workdir / "feed.key").write_text("not a key\n")
    service = MqttService()
    with structlog.testing.capture_logs() as events:
        async with running_table(
            workdir, services=[service], config_extra=mqtt_section(broker)
        ) as t:
            settled = await t.deal(rng_number=4)
            assert settled.status == "settled"
            assert t.journal.outbox.count() > 0 and service.connects == 0
    assert (
        service.last_error is not None and "expected an unencrypted Ed25519" in service.last_error
    )
    [logged] = [e for e in events if e["event"] == "mqtt_feed_key_unusable"]
    assert "\n" not in logged["error"]
