"""The systemd unit agrees with the daemon: the exit statuses it must not restart on, and limits
that leave room for the devices under a connection flood (docs/faults.md)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from controller.config import EXIT_CONFIG_ERROR
from controller.config.models import DisplayConfig
from controller.wiring import (
    EXIT_JOURNAL_DAMAGED,
    EXIT_JOURNAL_UNWRITABLE,
    EXIT_SOFTWARE_CHANGED,
)

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "paigow-table.service"


def _settings() -> dict[str, list[str]]:
    """Every ``Key=value`` of the unit, keys that repeat keeping all their values."""
    out: dict[str, list[str]] = defaultdict(list)
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            out[key].append(value)
    return out


def test_statuses_a_restart_cannot_mend_are_not_restarted() -> None:
    [prevent] = _settings()["RestartPreventExitStatus"]
    assert {int(s) for s in prevent.split()} == {
        EXIT_JOURNAL_DAMAGED,
        EXIT_JOURNAL_UNWRITABLE,
        EXIT_SOFTWARE_CHANGED,
        EXIT_CONFIG_ERROR,
    }


def test_open_files_leave_room_beyond_the_display_cap() -> None:
    [nofile] = _settings()["LimitNOFILE"]
    cap = DisplayConfig().max_connections
    # Each display connection is one file; the reserve, devices, broker, journal fit in the rest.
    assert int(nofile) >= 4 * cap


def test_memory_proc_and_network_are_bounded() -> None:
    s = _settings()
    assert s["MemoryMax"] and s["ProcSubset"] == ["pid"]
    assert s["IPAddressDeny"] == ["any"]
    [allow] = s["IPAddressAllow"]
    assert "localhost" in allow.split()
    assert "~@privileged @resources" in s["SystemCallFilter"]


def test_the_start_has_time_for_the_journal_check() -> None:
    [timeout] = _settings()["TimeoutStartSec"]
    assert int(timeout) >= 90  # a cold check of a 900 MB journal takes ~14 s (docs/journal.md)
