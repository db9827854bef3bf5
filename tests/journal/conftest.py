"""Shared by the journal's tests: a journal the demo wrote, copies of it, the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def demo_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five rounds the demo dealt (simulated devices through the real daemon), and one with
    a fault (a short packet: a dead round)."""
    path = tmp_path_factory.mktemp("audit") / "demo.sqlite3"
    done = cli(
        "demo", "--rounds", "8", "--no-mqtt", "--journal", str(path), "--interval", "0",
        "--seed", "3", "--http-port", "0", "--fault-rate", "0.4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path


def copy_journal(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy.sqlite3"
    shutil.copy(path, target)
    return target
