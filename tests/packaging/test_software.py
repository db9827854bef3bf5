"""Software authentication on the installed wheel (docs/audit.md): the installed files verify at
start and on demand; `authenticate --nonce` is an HMAC a regulator's tool can recompute from the
package's own RECORD; a changed program file makes `run` refuse with one line and status 70."""

from __future__ import annotations

import base64
import csv
import hashlib
import hmac
import json
import subprocess
from pathlib import Path

import pytest

from controller.wiring import EXIT_SOFTWARE_CHANGED
from simulators.demo import DEMO_CONFIG
from tests.packaging.conftest import Installed, clean_env

pytestmark = pytest.mark.slow


def _site(installed: Installed) -> Path:
    [site] = list((installed.venv / "lib").glob("python3*/site-packages"))
    return site


def _expected_hmac(site: Path, nonce: str) -> tuple[str, int]:
    """What a regulator's tool computes from the released wheel's RECORD."""
    [record] = list(site.glob("paigow_table-*.dist-info/RECORD"))
    rows = [r for r in csv.reader(record.read_text().splitlines()) if r and r[1]]
    mac = hmac.new(nonce.encode(), digestmod=hashlib.sha256)
    for name, digest, _ in sorted(rows):
        data = (site / name).read_bytes()
        assert (
            digest
            == "sha256="
            + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        )
        mac.update(f"{name}\0{len(data)}\0".encode() + data)
    return mac.hexdigest(), len(rows)


def _run(installed: Installed, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.command), *args],
        cwd=installed.home,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_authenticate_is_an_hmac_the_regulator_can_recompute(installed: Installed) -> None:
    done = _run(installed, "authenticate", "--nonce", "gat-4711")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    expected, files = _expected_hmac(_site(installed), "gat-4711")
    assert answer["hmac_sha256"] == expected and answer["files"] == files > 100
    assert answer["verified"] is True and len(answer["software_digest"]) == 64
    other = json.loads(_run(installed, "authenticate", "--nonce", "other").stdout)
    assert other["hmac_sha256"] != expected  # keyed: a recorded answer does not replay


def test_a_changed_program_file_stops_run_and_fails_authentication(
    installed: Installed, tmp_path: Path
) -> None:
    target = _site(installed) / "controller" / "game" / "paytables.py"
    original = target.read_bytes()
    config = tmp_path / "table.toml"
    config.write_text(
        DEMO_CONFIG.format(
            table="PG-SW", shuffler=tmp_path / "s", rng=tmp_path / "r", journal=tmp_path / "j"
        )
    )
    try:
        target.write_bytes(original + b"\n# paying 500\n")
        done = _run(installed, "run", "--config", str(config))
        assert done.returncode == EXIT_SOFTWARE_CHANGED
        lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
        assert len(lines) == 1 and "controller/game/paytables.py" in lines[0], done.stderr
        assert not (tmp_path / "j").exists()  # refused before the journal was touched
        checked = _run(installed, "authenticate", "--nonce", "n")
        assert checked.returncode == 1 and json.loads(checked.stdout)["verified"] is False
    finally:
        target.write_bytes(original)
    assert _run(installed, "authenticate", "--nonce", "n").returncode == 0
