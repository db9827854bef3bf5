"""``paigow-table pit …`` as an operator runs it: migrate (twice: the second applies nothing),
shift --csv, the signed report and its check (a changed figure is caught), export; a config the
pit cannot use exits 78 saying why; the page refuses to listen beyond loopback without a token;
a secret file others may read is refused."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pit.config import PitConfigError, parse_pit_config
from pit.store import Incoming, Store
from pit.web import PitWeb
from simulators.feed import SimTable, SimulatedKeys, wire
from tests.pit.conftest import KEY


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "pit", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _config(tmp_path: Path, db_url: str) -> Path:
    key = tmp_path / "report.key"
    key.write_text(KEY.hex() + "\n")
    key.chmod(0o600)
    path = tmp_path / "pit.toml"
    path.write_text(
        f'[site]\nid = "demo"\n[database]\nurl = "{db_url}"\n'
        f'[shift]\nreport_key_file = "{key}"\nstarts = ["06:00", "18:00"]\n'
    )
    return path


def test_migrate_shift_report_and_export(tmp_path: Path, db_url: str) -> None:
    config = _config(tmp_path, db_url)
    first = _cli("migrate", "--config", str(config))
    assert first.returncode == 0 and "0001.initial" in first.stdout, first.stderr
    again = _cli("migrate", "--config", str(config))
    assert again.returncode == 0 and "nothing (current)" in again.stdout
    store = Store(db_url, root="casino/demo/paigow/", feed_keys=SimulatedKeys())
    table = SimTable("PG-09", key=KEY, seed=9)
    start = datetime.now(UTC) - timedelta(minutes=5)
    for i in range(20):
        messages = table.next_round(start + timedelta(seconds=6 * i))
        store.ingest([Incoming(t, wire(b), False, time.time()) for t, b in messages])
    store.close()
    csv = _cli("shift", "--config", str(config), "--csv")
    assert csv.returncode == 0, csv.stderr
    header, row = csv.stdout.splitlines()[:2]
    assert header.startswith("shift,table_id,dealer_id,rounds,settled")
    assert ",PG-09,D-100,20," in row or ",PG-09,D-100," in row
    report = tmp_path / "report.json"
    made = _cli("report", "--config", str(config), "--output", str(report))
    assert made.returncode == 0, made.stderr
    body = json.loads(report.read_text())
    assert body["numbers"][0]["table_id"] == "PG-09" and body["hmac"]
    assert body["tables"]["PG-09"]["high_seq"] == table.seq
    checked = _cli("verify-report", "--config", str(config), str(report))
    assert checked.returncode == 0 and "ok" in checked.stdout
    body["numbers"][0]["rounds"] -= 1
    report.write_text(json.dumps(body))
    assert _cli("verify-report", "--config", str(config), str(report)).returncode == 1
    feed = tmp_path / "PG-09.jsonl"
    exported = _cli("export", "--config", str(config), "--table", "PG-09", "--output", str(feed))
    assert exported.returncode == 0
    seqs = [json.loads(line)["seq"] for line in feed.read_text().splitlines()]
    assert seqs == list(range(1, table.seq + 1))


def test_a_config_the_pit_cannot_use(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[site]\nid = "demo"\n[shift]\nstarts = ["25:00"]\n')
    result = _cli("migrate", "--config", str(bad))
    assert result.returncode == 78 and "shift.starts" in result.stderr
    with pytest.raises(PitConfigError, match="not a loopback address: set token_file"):
        PitWeb(parse_pit_config('[site]\nid = "d"\n[web]\nhost = "0.0.0.0"\n'), lambda: None)  # type: ignore[arg-type,return-value]
    token = tmp_path / "token"
    token.write_text("a-token-everyone-can-read\n")
    token.chmod(0o644)
    config = parse_pit_config(f'[site]\nid = "d"\n[web]\ntoken_file = "{token}"\n')
    with pytest.raises(PitConfigError, match="readable by everyone"):
        PitWeb(config, lambda: None)  # type: ignore[arg-type,return-value]


def test_the_example_config_is_valid() -> None:
    from pit.config import load_pit_config

    example = Path(__file__).resolve().parents[2] / "config" / "pit.example.toml"
    config = load_pit_config(example)
    assert config.web.host == "127.0.0.1" and config.broker.protocol == "5"
    assert config.database_url == "sqlite:////var/lib/paigow-pit/pit.sqlite3"


def test_verify_report_on_a_report_it_cannot_trust_says_so_in_a_line(
    tmp_path: Path,
) -> None:
    """A report whose hmac is not ASCII, holds a lone surrogate, is not an object or not JSON
    at all: 'WRONG' (exit 1, a finding) or one line on stderr (exit 65, not a report: the exit
    codes of controller/exits.py), never a traceback (issue 30)."""
    config = _config(tmp_path, f"sqlite:///{tmp_path / 'pit.sqlite3'}")
    report = tmp_path / "report.json"
    cases = {'{"hmac": "é"}': 1, '{"hmac": "\\ud800", "x": "\\ud800"}': 1, "[1, 2]": 65}
    for text, code in {**cases, "not json": 65}.items():
        report.write_text(text, encoding="utf-8")
        result = _cli("verify-report", "--config", str(config), str(report))
        assert result.returncode == code, (text, result.stderr)
        assert "Traceback" not in result.stderr, (text, result.stderr)
        assert "WRONG" in result.stdout or len(result.stderr.strip().splitlines()) == 1
