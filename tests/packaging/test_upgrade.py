"""An upgrade keeps everything (issue 43), and a downgrade cannot quietly lose anything.

An older release is built from a git worktree of ``OLD_COMMIT`` by its own
``packaging/build-package`` and installed as a casino installs it (`apt-get install ./…deb` as
root). A table runs as the service user ``paigow`` on the installed venv, with the config in
``/etc/paigow-table/table.toml`` and its journal and feed key in ``/var/lib/paigow-table``, its
devices simulated on ptys, its feed on a Mosquitto of the test's own; the pit runs as
``paigow-pit`` (``pit migrate``, then ``pit run``) on a PostgreSQL database made for the test.
Rounds are dealt until the pit's database holds them.

Then this checkout's .deb (the ``built`` fixture) goes over it with ``dpkg -i``, and the test
shows: ``dpkg-query`` says the new version; the feed key is the same bytes and key id; both
configs are the same bytes and mode (conffiles kept, the new examples beside them as
``.dpkg-dist``); the pit's database still holds every round, ``pit migrate`` brings it to the new
schema; the new table migrates the journal at its first start, deals, and the new rounds reach the
pit; ``audit verify`` passes on the journal, alone and against the pit's export of the feed,
rounds from both versions together.

Then the old .deb goes back over the new one (``dpkg -i``): dpkg allows a downgrade, and the old
table refuses the newer journal in one line with status 65 (the unit does not restart on it),
leaving the journal as it was (docs/operations.md §8, "Going back"). Whatever happens, the package
is purged and what the test made is removed.

Not covered here: systemd itself (PID 1 is not systemd on the test machine: the unit's
``ExecStartPre`` migrate and the postinst's ``try-restart`` are not run; the test runs the same
commands by hand), and a floor of several machines upgraded one by one (the order is argued in
docs/operations.md from the code, not run). Needs root, dpkg, git, PostgreSQL on 127.0.0.1:5432
and Mosquitto; it refuses to touch a machine where paigow-table is installed by someone else, or
where /var/lib/paigow-table already holds a journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from controller.journal import SCHEMA_VERSION
from controller.wiring import EXIT_JOURNAL_DAMAGED
from simulators.demo import DEMO_CONFIG
from simulators.mosquitto import Mosquitto
from simulators.tables import table_mqtt_section
from tests.packaging.conftest import RELEASE_MAINTAINER, REPO, Built, clean_env, run
from tests.packaging.test_deb_install import (
    VENV,
    _as_paigow,
    _as_pit,
    _devices,
    _installed_version,
    _online,
    _settled,
    _sh,
    _until,
    _workdir,
)
from tests.pit.conftest import postgres_database

# One dpkg at a time: the same xdist group as test_deb_install (the `built` fixture puts both in
# it too; tests/conftest.py). The table and the pit run as processes, on PostgreSQL.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.daemon,
    pytest.mark.database,
    pytest.mark.xdist_group("package"),
]

#: The release upgraded from: f08d666 (2026-11-28), a build of 0.1.0 just before 5389a45 brought
#: journal schema 4, so the upgrade migrates the journal (3 -> 4) and the pit's database (0003 ->
#: 0007), and the downgrade meets a journal newer than the old table reads. It already had what
#: an upgrade must keep: the signed feed (the table's feed key, the pit's registered keys), the
#: pit as a casino installs it (its unit, user and conffile) and the journal in /var/lib.
#: (455f07d, the last 0.1.0 CI passed, has schema 4 already: no migration to show.)
OLD_COMMIT = "f08d666"
OLD_SCHEMA = 3

TABLE = "PG-UPG"
COMMAND = str(VENV / "bin" / "paigow-table")  # the installed venv's, as the units run it
JOURNAL = Path("/var/lib/paigow-table/journal.sqlite3")
FEED_KEY = JOURNAL.parent / "feed.key"
TABLE_CONFIG = Path("/etc/paigow-table/table.toml")
TABLE_CHECKPOINT_KEY = TABLE_CONFIG.parent / "checkpoint-key"
PIT_CONFIG = Path("/etc/paigow-pit/pit.toml")
PIT_CHECKPOINT_KEY = PIT_CONFIG.parent / "tables-checkpoint.key"  # not test_deb_install's
PIT_FEED_KEYS = PIT_CONFIG.parent / "feed-keys"
#: Left after a purge by design (the table's record, the pit's) or by this test (its keys): each
#: is removed afterwards if it was not there before, else only what the test added to it.
LEFT_BEHIND = (
    JOURNAL.parent,
    Path("/var/backups/paigow-table"),
    Path("/var/lib/paigow-pit"),
    TABLE_CONFIG.parent,
    PIT_CONFIG.parent,
)
MARKER = JOURNAL.parent / ".installed-by-tests"  # test_deb_install's: a test's install


def _old_deb(out: Path) -> Path:
    """OLD_COMMIT's .deb, built by its own packaging/build-package from a worktree in ``out``
    (removed afterwards: nothing is kept in the repository)."""
    source = out / "source"
    run(["git", "worktree", "add", "--detach", source, OLD_COMMIT], cwd=REPO)
    try:
        run(
            [source / "packaging" / "build-package", out / "dist"],
            cwd=source,
            timeout=600,
            env={"DEB_MAINTAINER": RELEASE_MAINTAINER},
        )
    finally:
        run(["git", "worktree", "remove", "--force", source], cwd=REPO)
    [deb] = (out / "dist").glob("paigow-table_*.deb")
    return deb


def _dpkg_i(deb: Path) -> str:
    """``dpkg -i`` over the installed package, as an administrator upgrades: the edited conffiles
    kept (--force-confold, what answering 'N' at dpkg's question does)."""
    done = _sh("dpkg", "-i", "--force-confold", str(deb), timeout=600)
    return done.stdout + done.stderr


def _schema() -> int:
    with contextlib.closing(sqlite3.connect(f"file:{JOURNAL}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0])


def _journal_rounds() -> set[str]:
    with contextlib.closing(sqlite3.connect(f"file:{JOURNAL}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT round_id FROM rounds WHERE status != 'open'").fetchall()
    return {str(r[0]) for r in rows}


def _pit_rounds(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT round_id FROM rounds WHERE table_id = %s", (TABLE,)).fetchall()
    return {str(r[0]) for r in rows}


def _file_state(path: Path) -> tuple[str, int, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_uid, st.st_gid, st.st_mode


def _install_secret(text: str, path: Path, group: str) -> None:
    """A secret as docs/operations.md and docs/pit.md install them: root:<group> 0640."""
    path.write_text(text, encoding="utf-8")
    os.chown(path, 0, grp.getgrnam(group).gr_gid)
    path.chmod(0o640)


def _configure(work: Path, broker_port: int, database_url: str) -> str:
    """The table's and the pit's configs where the docs put them, their shared checkpoint key,
    and the table's feed key registered with the pit; returns the key id `feed-key show` says."""
    key = os.urandom(32).hex() + "\n"
    _install_secret(key, TABLE_CHECKPOINT_KEY, "paigow")
    _install_secret(key, PIT_CHECKPOINT_KEY, "paigow-pit")
    table = DEMO_CONFIG.format(
        table=TABLE, shuffler=work / "shuffler", rng=work / "rng", journal=JOURNAL
    )
    # The config the older release was installed with: it knows no device identity (0.2.0's
    # [devices.NAME] identity), which it would refuse as an unknown key.
    table = "\n".join(line for line in table.splitlines() if not line.startswith("identity ="))
    table += "\n[display]\nenabled = false\n"
    table += table_mqtt_section(broker_port, checkpoint_key_file=TABLE_CHECKPOINT_KEY)
    _install_secret(table, TABLE_CONFIG, "paigow")
    shown = _as_paigow(COMMAND, "feed-key", "show")
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(" ", 1) for line in shown.stdout.splitlines())
    _install_secret(f"{TABLE} {fields['public_key']}\n", PIT_FEED_KEYS, "paigow-pit")
    pit = (
        '[site]\nid = "demo"\n'  # the demo config's site
        f'[broker]\nhost = "127.0.0.1"\nport = {broker_port}\n'
        f'[database]\nurl = "{database_url}"\n'
        f'[record]\ncheckpoint_key_file = "{PIT_CHECKPOINT_KEY}"\n'
        f'feed_keys_file = "{PIT_FEED_KEYS}"\n'
        "[web]\nenabled = false\n"
    )
    _install_secret(pit, PIT_CONFIG, "paigow-pit")
    checked = _as_paigow(COMMAND, "check-config", str(TABLE_CONFIG))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    checked = _as_pit(COMMAND, "pit", "check-config", str(PIT_CONFIG))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return fields["key_id"]


def _migrate_pit() -> str:
    done = _as_pit(COMMAND, "pit", "migrate", "--config", str(PIT_CONFIG))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _as(user: str, *args: str) -> list[str]:
    """``args`` exec'd as ``user`` (setpriv execs, as systemd's User= does: the process is the
    daemon itself, which gets the SIGTERM)."""
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *args]


@contextlib.asynccontextmanager
async def _pit(work: Path) -> AsyncIterator[None]:
    """``pit run`` as paigow-pit until it has subscribed; SIGTERM at the end, exit 0."""
    log_path = work / "pit.log"
    with log_path.open("a") as log:
        proc = subprocess.Popen(
            _as("paigow-pit", COMMAND, "pit", "run", "--config", str(PIT_CONFIG)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=clean_env(),
            cwd="/",
        )  # fmt: skip
    start = log_path.stat().st_size
    try:
        async with asyncio.timeout(60):
            while "pit_subscribed" not in log_path.read_text()[start:]:
                assert proc.poll() is None, (
                    f"pit run exited {proc.returncode}: {log_path.read_text()}"
                )
                await asyncio.sleep(0.1)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
    assert code == 0, log_path.read_text()


async def _deal(work: Path, rounds: int, *, old: bool = False, url: str | None = None) -> None:
    """The installed table as paigow until its devices are online, ``rounds`` rounds dealt and
    settled (and, with ``url``, the pit holds every round the journal settled), then SIGTERM
    (as systemd stops it): it must exit 0. The older release (``old``)
    has twice been seen not to stop within 120 s of SIGTERM on a loaded machine (a bug of that
    release, whose code this test cannot change): it is then killed, as systemd would after
    its stop timeout, and the upgrade starts from a killed table, which it must survive
    anyway (its rounds are committed before the SIGTERM)."""
    online, settled = _online(JOURNAL), _settled(JOURNAL)
    async with _devices(work) as (shuffler, rng):
        # The same seeded shuffler as the last run: past the decks it dealt then, or the table
        # rightly refuses them as replayed deals (deck_integrity, the replay memory it keeps).
        for _ in range(settled):
            shuffler.next_plan()
        proc = subprocess.Popen(
            _as("paigow", COMMAND, "run", "--config", str(TABLE_CONFIG)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=clean_env(), cwd="/",
        )  # fmt: skip
        try:
            await _until(lambda: _online(JOURNAL) >= online + 2, proc)
            for n in range(settled + 1, settled + rounds + 1):
                await rng.press()
                await shuffler.deal()
                await _until(lambda n=n: _settled(JOURNAL) >= n, proc)
            if url is not None:  # the pit's copy whole while the table can still send
                await _until_the_pit_holds(work, url)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:  # generous: a loaded machine once kept the old release past 30 s
                code = await asyncio.to_thread(proc.wait, 120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                said = proc.stderr.read()[-3000:] if proc.stderr else ""
                if not old:
                    raise AssertionError(
                        f"the table did not stop within 120 s of SIGTERM: {said}"
                    ) from None
                print(f"the older release did not stop within 120 s of SIGTERM: killed; {said}")
                return
        assert code == 0, proc.stderr.read() if proc.stderr else ""


async def _until_the_pit_holds(work: Path, url: str, timeout: float = 240) -> None:
    """Until the pit holds every round the journal settled, asked while the table still runs
    (a table stopped with messages in its outbox sends them at its next start, not before).
    Generous: on a loaded machine (two CPU hogs beside the suite) 60 s once was not enough, and
    the failure then says what the pit holds and what it logged."""
    try:
        async with asyncio.timeout(timeout):
            while not (rounds := _journal_rounds()) <= _pit_rounds(url):
                await asyncio.sleep(0.2)
    except TimeoutError:
        held = _pit_rounds(url)
        log = (work / "pit.log").read_text()[-3000:]
        raise AssertionError(
            f"the pit holds {len(held & rounds)} of the table's {len(rounds)} rounds after "
            f"{timeout:.0f} s; missing {sorted(rounds - held)}; the pit said: {log}"
        ) from None


def _audit_verify(work: Path) -> None:
    """audit verify as paigow on the installed command: the journal alone, then against the
    casino's copy of the feed (``pit export``, as the pit kept it) with the checkpoint key."""
    done = _as_paigow(COMMAND, "audit", "verify", "--journal", str(JOURNAL))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = _as_pit(COMMAND, "pit", "export", "--config", str(PIT_CONFIG), "--table", TABLE,
                       "--output", "-")  # fmt: skip
    assert exported.returncode == 0 and exported.stdout, exported.stderr
    feed = work / "feed.jsonl"
    feed.write_text(exported.stdout, encoding="utf-8")
    feed.chmod(0o644)
    done = _as_paigow(COMMAND, "audit", "verify", "--journal", str(JOURNAL), "--feed", str(feed),
                      "--checkpoint-key", str(TABLE_CHECKPOINT_KEY))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def _snapshot() -> dict[Path, set[str] | None]:
    return {d: set(os.listdir(d)) if d.is_dir() else None for d in LEFT_BEHIND}


def _restore(before: dict[Path, set[str] | None]) -> None:
    """Remove what the test (and the package it purged) left: a directory that was not there,
    else the entries it did not hold."""
    for directory, entries in before.items():
        if not directory.is_dir():
            continue
        if entries is None:
            shutil.rmtree(directory)
            continue
        for name in set(os.listdir(directory)) - entries:
            path = directory / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


@contextlib.contextmanager
def _machine() -> Iterator[None]:
    """This machine lent to the test: refused if paigow-table is someone else's or a journal is
    there; purged and put back as found (the users paigow and paigow-pit stay, as a purge
    leaves them) whatever happens."""
    assert os.geteuid() == 0 and shutil.which("dpkg") and shutil.which("git"), (
        "the upgrade test installs .debs: run it as root on Debian with git (CI does)"
    )
    assert _installed_version() is None or MARKER.exists(), (
        "paigow-table is installed on this machine by someone else: the test will not replace "
        "it (dpkg --purge paigow-table first)"
    )
    if _installed_version() is not None:  # a test's, left by a killed run
        _sh("dpkg", "--purge", "paigow-table")
    assert not JOURNAL.exists(), (
        f"{JOURNAL} exists: a table's record, which the test would upgrade; move it away first"
    )
    before = _snapshot()
    try:
        yield
    finally:
        _sh("dpkg", "--purge", "paigow-table", check=False)
        _restore(before)


@dataclass(frozen=True)
class Kept:
    """What the old release left that the upgrade must keep."""

    version: str
    key_id: str
    feed_key: bytes
    configs: dict[Path, tuple[str, int, int, int]]
    rounds: set[str]


async def _old_release_deals(old_deb: Path, work: Path, broker_port: int, url: str) -> Kept:
    """The old release installed, configured, migrated and dealing into its pit."""
    await asyncio.to_thread(
        _sh, "apt-get", "install", "-y", "--no-install-recommends", str(old_deb), timeout=600
    )
    MARKER.touch()
    version = old_deb.name.split("_")[1]
    assert _installed_version() == version
    key_id = _configure(work, broker_port, url)
    assert "0003" in _migrate_pit()
    async with _pit(work):
        await _deal(work, 3, old=True, url=url)
        rounds = _journal_rounds()
        assert len(rounds) == 3 and rounds <= _pit_rounds(url)
    assert _schema() == OLD_SCHEMA
    configs = {path: _file_state(path) for path in (TABLE_CONFIG, PIT_CONFIG)}
    return Kept(version, key_id, FEED_KEY.read_bytes(), configs, rounds)


async def _upgrade_keeps_everything(built: Built, work: Path, url: str, kept: Kept) -> None:
    await asyncio.to_thread(_dpkg_i, built.deb)
    assert _installed_version() == built.version != kept.version
    assert _as_paigow(COMMAND, "--version").stdout == f"paigow-table {built.version}\n"
    assert FEED_KEY.read_bytes() == kept.feed_key, "the upgrade changed the table's feed key"
    shown = _as_paigow(COMMAND, "feed-key", "show")
    assert f"key_id {kept.key_id}\n" in shown.stdout, shown.stdout + shown.stderr
    for path, state in kept.configs.items():
        assert _file_state(path) == state, f"the upgrade changed {path} (or its owner or mode)"
        # The new example beside it, for the administrator to compare (docs/operations.md §8).
        assert path.with_name(path.name + ".dpkg-dist").is_file()
    assert _pit_rounds(url) >= kept.rounds
    migrated = _migrate_pit()
    assert "0004" in migrated and "0007" in migrated, migrated
    assert _pit_rounds(url) >= kept.rounds
    assert _schema() == OLD_SCHEMA  # the package leaves the journal to the table's first start
    async with _pit(work):
        await _deal(work, 3, url=url)
        rounds = _journal_rounds()
        assert len(rounds) == 6 and kept.rounds < rounds and rounds <= _pit_rounds(url)
    assert _schema() == SCHEMA_VERSION
    _audit_verify(work)


async def _downgrade_is_refused_by_the_old_table(old_deb: Path, kept: Kept) -> None:
    """dpkg allows it (with its warning); the old table will not open the newer journal: one
    line naming the schema, status 65, the journal untouched."""
    rounds = _journal_rounds()
    said = await asyncio.to_thread(_dpkg_i, old_deb)
    assert "downgrading" in said.lower(), said
    assert _installed_version() == kept.version
    done = await asyncio.to_thread(
        subprocess.run,
        _as("paigow", COMMAND, "run", "--config", str(TABLE_CONFIG)),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=clean_env(), cwd="/",
        timeout=120,
    )  # fmt: skip
    said_lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert done.returncode == EXIT_JOURNAL_DAMAGED and len(said_lines) == 1, done.stderr
    newer = f"journal schema {SCHEMA_VERSION} is newer than this program's {OLD_SCHEMA}"
    assert newer in said_lines[0], said_lines
    assert _schema() == SCHEMA_VERSION and _journal_rounds() == rounds
    assert FEED_KEY.read_bytes() == kept.feed_key
    # The pit's database has no such guard (yet): the old pit's migrate takes a database the
    # newer one migrated as current (docs/operations.md §8 says so, and to restore its dump).
    assert "applied nothing (current)" in _migrate_pit()


async def test_an_upgrade_keeps_the_record_and_a_downgrade_refuses_the_newer_journal(
    built: Built, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with _machine(), _workdir() as work, postgres_database() as url:
        old_deb = await asyncio.to_thread(_old_deb, tmp_path_factory.mktemp("old-release"))
        async with Mosquitto(work / "broker") as broker:
            kept = await _old_release_deals(old_deb, work, broker.port, url)
            await _upgrade_keeps_everything(built, work, url, kept)
            await _downgrade_is_refused_by_the_old_table(old_deb, kept)
