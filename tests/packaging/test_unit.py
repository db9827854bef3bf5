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


def test_the_backup_units_run_the_backup_command_as_the_service_user() -> None:
    """The timer's service runs `journal backup` on the table's journal, as paigow, into the
    directory the postinst makes, and the command parses exactly those arguments."""
    from controller.cli.main import command_parser

    systemd = UNIT.parent
    service = (systemd / "paigow-table-backup.service").read_text(encoding="utf-8")
    timer = (systemd / "paigow-table-backup.timer").read_text(encoding="utf-8")
    [exec_start] = [line for line in service.splitlines() if line.startswith("ExecStart=")]
    program, *argv = exec_start.removeprefix("ExecStart=").split()
    assert program == _settings()["ExecStart"][0].split()[0]  # the same installed command
    args = command_parser().parse_args(argv)
    assert args.action == "backup" and args.journal.startswith("/var/lib/paigow-table/")
    assert "User=paigow" in service and f"ReadWritePaths={args.to}" in service
    postinst = (systemd.parent / "packaging" / "postinst").read_text(encoding="utf-8")
    assert args.to in postinst
    assert "Persistent=true" in timer and "OnCalendar=" in timer


def test_the_kiosk_unit_runs_the_kiosk_launcher_with_its_credential_and_restarts() -> None:
    """The shipped example starts `paigow-table kiosk` (arguments the CLI parses) under a
    kiosk compositor, hands it the token as a credential, and restarts the browser if it dies."""
    from controller.cli.main import command_parser

    unit = (UNIT.parent / "paigow-kiosk.service").read_text(encoding="utf-8")
    [exec_start] = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    argv = exec_start.removeprefix("ExecStart=").split()
    program = argv.index(_settings()["ExecStart"][0].split()[0])  # the installed command
    args = command_parser().parse_args(argv[program + 1 :])
    assert args.command == "kiosk" and args.url.startswith("http://127.0.0.1:")
    assert "LoadCredential=kiosk-token:" in unit and "Restart=always" in unit
    assert "User=paigow\n" not in unit  # the browser is not the service's user
