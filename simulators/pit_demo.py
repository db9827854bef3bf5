"""``paigow-table pit demo --tables 6`` (also ``paigow-table demo --tables 6``): a pit of live
simulated tables in one command. A private Mosquitto (persistence on), N real table daemons
(``paigow-table run``, their shuffler and RNG box simulated on ptys, a round every
``--interval`` s, every message signed with the table's own feed key, checkpoints signed,
commands signed), and the pit (SQLite in a temporary directory unless ``--database``) with its
page on 127.0.0.1. Each table's ``feed.key`` is made before the pit starts and its public key
registered with the pit (``[record] feed_keys_file``), as IT would at install; the pit and the
tables share one supervisors file (a badge and a fresh PIN, printed)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import tomli_w

from pit.config import parse_pit_config
from pit.service import Pit
from pit.store import migrate
from simulators.mosquitto import Mosquitto, free_port
from simulators.tables import TableDaemon, table_mqtt_section


def _secret_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def demo_pit_config(
    workdir: Path,
    broker_port: int,
    http_port: int,
    database: str = "",
    *,
    checkpoint_key: Path,
    command_key: Path,
    report_key: Path,
    feed_keys: Path,
    supervisors: Path,
    tables: int = 6,
) -> str:
    db = database or f"sqlite:///{workdir / 'pit.sqlite3'}"
    config = {
        "log_level": "WARNING",
        "site": {"id": "demo"},
        "broker": {"host": "127.0.0.1", "port": broker_port, "protocol": "5",
                   "client_id": "paigow-pit-demo"},
        "database": {"url": db},
        "record": {"checkpoint_key_file": str(checkpoint_key), "feed_keys_file": str(feed_keys)},
        "commands": {"key_file": str(command_key), "key_id": "pit",
                     "supervisors_file": str(supervisors)},
        "web": {"host": "127.0.0.1", "port": http_port},
        "shift": {"report_key_file": str(report_key)},
        "protection": {"shufflers": {f"PG-{i:02d}": f"SIM-{1 + i % 2} {1000 + i}"
                                     for i in range(1, tables + 1)}},
    }  # fmt: skip
    return tomli_w.dumps(config)


@dataclass(frozen=True)
class _Files:
    """The demo's keys and books, each written as IT would at install (mode 0600)."""

    checkpoint_key: Path
    command_key: Path
    command_keys: Path  # the tables' book of the pit's command key
    report_key: Path
    feed_keys: Path
    supervisors: Path
    pin: str  # the supervisor's, printed for the newcomer


def _demo_files(workdir: Path, names: list[str]) -> _Files:
    command_secret = secrets.token_hex(32)
    pin, supervisors = _supervisor(workdir)
    return _Files(
        checkpoint_key=_secret_file(workdir / "checkpoint.key", secrets.token_hex(32)),
        command_key=_secret_file(workdir / "pit-command.key", command_secret),
        command_keys=_secret_file(workdir / "command-keys", f"pit hmac-sha256 {command_secret}"),
        report_key=_secret_file(workdir / "report.key", secrets.token_hex(32)),
        feed_keys=register_feed_keys(workdir, names),
        supervisors=supervisors,
        pin=pin,
    )


async def run_demo(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    import logging

    from controller.logging import configure_logging

    configure_logging("WARNING", "console")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with tempfile.TemporaryDirectory(prefix="paigow-pit-demo-") as tmp:
        workdir = Path(tmp)
        names = [f"PG-{i + 1:02d}" for i in range(args.tables)]
        files = _demo_files(workdir, names)
        async with Mosquitto(workdir / "broker", persistence=True) as broker:
            text = demo_pit_config(
                workdir, broker.port, args.http_port, args.database,
                checkpoint_key=files.checkpoint_key, command_key=files.command_key,
                report_key=files.report_key, feed_keys=files.feed_keys,
                supervisors=files.supervisors, tables=args.tables,
            )  # fmt: skip
            config = parse_pit_config(text, "<demo>")
            await asyncio.to_thread(migrate, config.database_url)
            pit = Pit(config)
            pit_task = asyncio.create_task(pit.run(stop))
            await pit.ingest.connected.wait()
            try:
                await _tables_dealing(args, out, stop, pit, broker.port, files, workdir, names)
            finally:
                stop.set()
                await pit_task
                stats = pit.ingest.stats
                print(
                    f"pit demo: {stats.stored} messages stored, {stats.duplicates} duplicates "
                    f"skipped, {stats.gaps_reported} gaps reported, {stats.gaps_filled} filled",
                    file=out,
                    flush=True,
                )
    return 0


async def _tables_dealing(
    args: argparse.Namespace, out: TextIO, stop: asyncio.Event, pit: Pit, broker_port: int,
    files: _Files, workdir: Path, names: list[str],
) -> None:  # fmt: skip
    """The tables started, the pages printed, and a round every ``--interval`` s on each until
    ``stop`` (or ``--rounds`` on every table); the tables closed on the way out."""
    extra = table_mqtt_section(
        broker_port, checkpoint_key_file=files.checkpoint_key, command_keys_file=files.command_keys
    )
    # The [display] keys TableDaemon writes come last in its section: these join them.
    pages = f'supervisors_file = "{files.supervisors}"\n' + extra
    tables = [
        TableDaemon(name, workdir / name, extra=pages, seed=i + 1, display_port=free_port())
        for i, name in enumerate(names)
    ]
    dealers: list[asyncio.Task[None]] = []
    try:
        await asyncio.gather(*(t.start() for t in tables))
        assert pit.web is not None
        await pit.web.started.wait()
        _print_pit(out, args, broker_port, pit.web.url, tables, files.pin)
        for i, t in enumerate(tables):
            await asyncio.sleep(args.interval / max(1, len(tables)))
            dealers.append(asyncio.create_task(_deal(t, args, out, alarm=i == 0)))
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            if args.rounds is not None and all(d.done() for d in dealers):
                await asyncio.sleep(2.0)  # the last rounds reach the pit
                stop.set()
    finally:
        stop.set()
        for d in dealers:
            d.cancel()
        await asyncio.gather(*dealers, return_exceptions=True)
        await asyncio.gather(*(t.close() for t in tables), return_exceptions=True)


#: The demo's supervisor: the badge the tables' pages and the pit page both know.
SUPERVISOR = "S-DEMO"

#: The round of the first table dealt with a duplicate card: a latched alarm (deck_integrity)
#: for the pit's acknowledge flow to be tried on.
ALARM_ROUND = 2


def register_feed_keys(workdir: Path, table_ids: list[str]) -> Path:
    """Each table's own feed key, made in its workdir (where the daemon finds it: ``feed.key``
    beside its journal) as ``paigow-table feed-key init`` makes it at install, and the pit's
    ``feed_keys_file`` registering their public keys."""
    from controller.mqtt.feed_key import create_feed_key
    from pit.keys import keys_line

    lines = []
    for table_id in table_ids:
        (workdir / table_id).mkdir(parents=True, exist_ok=True)
        signer, _ = create_feed_key(workdir / table_id / "feed.key")
        lines.append(keys_line(table_id, signer.public_key))
    path = workdir / "feed-keys"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _supervisor(workdir: Path) -> tuple[str, Path]:
    """A fresh six-digit PIN for :data:`SUPERVISOR`, and the tables' supervisors file (its
    salted hash only)."""
    from controller.badges import hash_pin

    pin = f"{secrets.randbelow(900_000) + 100_000}"
    return pin, _secret_file(workdir / "supervisors", f"{SUPERVISOR} {hash_pin(pin)}")


def _print_pit(
    out: TextIO, args: argparse.Namespace, broker: int, pit_url: str, tables: list[TableDaemon],
    pin: str,
) -> None:  # fmt: skip
    """What a newcomer needs to click through the pit: every page and the supervisor."""
    lines = [
        f"pit demo: {len(tables)} tables on a private Mosquitto at 127.0.0.1:{broker}, "
        f"a round every {args.interval:g} s each",
        f"pit page {pit_url}/   (Ctrl-C stops)",
        f"supervisor (this demo only): badge {SUPERVISOR}  PIN {pin}  — on the tables' pages "
        "and on the pit page (acknowledging takes both)",
    ]
    for t in tables:
        web = f"http://127.0.0.1:{t.display_port}"
        lines.append(f"  {t.table_id}  dealer {web}/dealer   supervisor {web}/supervisor")
    if tables:
        lines.append(
            f"{tables[0].table_id}'s round {ALARM_ROUND} is dealt with a duplicate card: a "
            "latched alarm to acknowledge from the pit page (click the table's tile)"
        )
    print("\n".join(lines), file=out, flush=True)


async def _deal(table: TableDaemon, args: argparse.Namespace, out: TextIO, *, alarm: bool) -> None:
    """A round every ``--interval`` s (``--rounds`` of them); the first table's
    :data:`ALARM_ROUND` with a duplicate card."""
    assert table.shuffler is not None and table.rng is not None
    n = 0
    while args.rounds is None or n < args.rounds:
        if table.alive:
            n += 1
            fault = ["duplicate_card"] if alarm and n == ALARM_ROUND else None
            if fault:
                print(f"{table.table_id}: a duplicate card dealt (an alarm)", file=out, flush=True)
            await table.rng.press()
            await table.shuffler.deal(fault)
            table.dealt += 1
        await asyncio.sleep(args.interval)
