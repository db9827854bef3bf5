"""The .deb installed the way a casino's IT installs it: `apt-get install ./paigow-table_*.deb`
as root on this Debian system, `dpkg --verify` clean, `run` started as the service user paigow
(`runuser -u paigow --`, as the guide says) with simulated devices on ptys, rounds settled and
journaled, `authenticate` verified; then the installed venv attacked (a planted .pyc, a .pth)
and refused with exit 70; then purged.

What this cannot test here: the unit under systemd (this machine's PID 1 is not systemd; the
unit's directives are checked in tests/packaging/test_unit.py and docs/operations.md gives the
manual procedure). The test needs root and dpkg; it refuses to touch a machine where
paigow-table is already installed by someone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import importlib.util
import json
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from controller.wiring import EXIT_SOFTWARE_CHANGED
from simulators.demo import DEMO_CONFIG
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from tests.packaging.conftest import Built, clean_env, planted_pyc

pytestmark = pytest.mark.slow

VENV = Path("/opt/paigow-table/.venv")
USER = "paigow"


def _sh(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**clean_env(), "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(
        args, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if check:
        assert done.returncode == 0, (
            f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
    return done


def _installed_version() -> str | None:
    done = _sh("dpkg-query", "-W", "-f", "${Status} ${Version}", "paigow-table", check=False)
    return done.stdout.split()[-1] if done.returncode == 0 and "installed" in done.stdout else None


@pytest.fixture(scope="module")
def deb_installed(built: Built) -> Iterator[Path]:
    # CI and every machine of this project run as root on Debian: the package is installed.
    assert os.geteuid() == 0 and shutil.which("dpkg"), (
        "installing the .deb needs root and dpkg: run the suite as root (CI does), or follow "
        "docs/operations.md by hand"
    )
    marker = Path("/var/lib/paigow-table/.installed-by-tests")
    assert _installed_version() is None or marker.exists(), (
        "paigow-table is installed on this machine by someone else: the test will not replace "
        "it (dpkg --purge paigow-table first)"
    )
    _sh("apt-get", "install", "-y", "--no-install-recommends", str(built.deb), timeout=600)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    try:
        yield built.deb
    finally:
        _sh("dpkg", "--purge", "paigow-table", check=False)
        marker.unlink(missing_ok=True)


def _as_paigow(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", USER, "--", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
        check=False,
        cwd="/",
    )


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    """A directory the service user owns (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="paigow-deb-"))
    entry = pwd.getpwnam(USER)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def _devices(work: Path) -> AsyncIterator[tuple[ShufflerSimulator, RngSimulator]]:
    shuffler = ShufflerSimulator(PtyPort(work / "shuffler"), seed=11)
    rng = RngSimulator(PtyPort(work / "rng"), seed=11)
    async with shuffler, rng:
        entry = pwd.getpwnam(USER)
        for link in (work / "shuffler", work / "rng"):
            os.chown(os.path.realpath(link), entry.pw_uid, -1)  # as udev gives dialout the port
        yield shuffler, rng


def _count(journal: Path, query: str) -> int:
    if not journal.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
        try:
            row = conn.execute(query).fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(row[0])


def _settled(journal: Path) -> int:
    return _count(journal, "SELECT COUNT(*) FROM rounds WHERE status = 'settled'")


def _online(journal: Path) -> int:
    return _count(journal, "SELECT COUNT(*) FROM events WHERE kind = 'device_online'")


async def _until(condition, proc: subprocess.Popen[str], timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, (
            f"run exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
        )
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"not in time; run said: {proc.communicate()[1]}")
        await asyncio.sleep(0.1)


def _config(work: Path) -> Path:
    config = work / "table.toml"
    config.write_text(
        DEMO_CONFIG.format(
            table="PG-DEB",
            shuffler=work / "shuffler",
            rng=work / "rng",
            journal=work / "journal.sqlite3",
        )
    )
    config.chmod(0o644)
    return config


def test_dpkg_verify_is_clean(deb_installed: Path) -> None:
    done = _sh("dpkg", "--verify", "paigow-table", check=False)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    assert pwd.getpwnam(USER).pw_shell  # the postinst made the service user


def test_the_installed_table_starts_as_paigow_settles_and_authenticates(
    deb_installed: Path,
) -> None:
    checked = _as_paigow("paigow-table", "software", "check")
    assert checked.returncode == 0 and "files verified" in checked.stdout, (
        checked.stdout + checked.stderr
    )
    answer = json.loads(_as_paigow("paigow-table", "authenticate", "--nonce", "gat-1").stdout)
    assert answer["verified"] is True and answer["files"] > 1000

    async def deal() -> None:
        with _workdir() as work:
            config = _config(work)
            assert _as_paigow("paigow-table", "check-config", str(config)).returncode == 0
            async with _devices(work) as (shuffler, rng):
                proc = subprocess.Popen(
                    [
                        "runuser",
                        "-u",
                        USER,
                        "--",
                        "/usr/bin/paigow-table",
                        "run",
                        "--config",
                        str(config),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=clean_env(),
                    cwd="/",
                )
                try:
                    await _until(lambda: _online(work / "journal.sqlite3") >= 2, proc)
                    for n in (1, 2, 3):
                        await rng.press()
                        await shuffler.deal()
                        await _until(lambda n=n: _settled(work / "journal.sqlite3") >= n, proc)
                finally:
                    # The daemon itself, as systemd stops it (runuser would kill it after 2 s).
                    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text()
                    for child in children.split():
                        os.kill(int(child), signal.SIGTERM)
                    try:
                        code = proc.wait(20)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        raise
                assert code == 0, proc.stderr.read() if proc.stderr else ""
            owner = (work / "journal.sqlite3").stat().st_uid
            assert owner == pwd.getpwnam(USER).pw_uid  # written by the service user

    asyncio.run(deal())
    # Running the table wrote nothing into the installation.
    assert _as_paigow("paigow-table", "software", "check").returncode == 0
    assert _sh("dpkg", "--verify", "paigow-table", check=False).stdout == ""


def test_a_planted_pyc_or_pth_in_the_installed_venv_stops_run(deb_installed: Path) -> None:
    [site] = list((VENV / "lib").glob("python3*/site-packages"))
    source = site / "controller" / "game" / "paytables.py"
    pyc = Path(importlib.util.cache_from_source(str(source)))
    original = pyc.read_bytes()
    planted = planted_pyc(source, source.read_bytes() + b"\nMARK = 40\n")
    pth = site / "zz.pth"
    before = json.loads(_as_paigow("paigow-table", "authenticate", "--nonce", "x").stdout)
    with _workdir() as work:
        config = _config(work)
        try:
            pyc.write_bytes(planted)
            done = _as_paigow("paigow-table", "run", "--config", str(config))
            assert done.returncode == EXIT_SOFTWARE_CHANGED and pyc.name in done.stderr, done.stderr
            after = json.loads(_as_paigow("paigow-table", "authenticate", "--nonce", "x").stdout)
            assert after["verified"] is False and after["hmac_sha256"] != before["hmac_sha256"]
            pyc.write_bytes(original)
            pth.write_text("import os\n")
            done = _as_paigow("paigow-table", "run", "--config", str(config))
            assert done.returncode == EXIT_SOFTWARE_CHANGED and "zz.pth" in done.stderr, done.stderr
        finally:
            pyc.write_bytes(original)
            pth.unlink(missing_ok=True)
        assert not (work / "journal.sqlite3").exists()
    again = json.loads(_as_paigow("paigow-table", "authenticate", "--nonce", "x").stdout)
    assert again["verified"] is True and again["hmac_sha256"] == before["hmac_sha256"]


PIT_USER = "paigow-pit"
PIT_DIR = Path("/etc/paigow-pit")


def _as_pit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", PIT_USER, "--", *args],
        capture_output=True, text=True, env=clean_env(), timeout=timeout, check=False, cwd="/",
    )  # fmt: skip


def _mode(path: Path) -> tuple[str, str, int]:
    st = path.stat()
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name, st.st_mode & 0o777


async def _pit_subscribes(config: Path) -> str:
    """``pit run`` as paigow-pit until it has subscribed (its log says so), then SIGTERM (what
    systemd sends): what it logged, and it must exit 0."""
    # setpriv execs the pit as paigow-pit, as systemd's User= does (runuser would stay its parent
    # and answer the SIGTERM itself).
    proc = await asyncio.create_subprocess_exec(
        "setpriv", f"--reuid={PIT_USER}", f"--regid={PIT_USER}", "--init-groups",
        "paigow-table", "pit", "run", "--config", str(config),
        stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd="/",
    )  # fmt: skip
    assert proc.stderr is not None
    said: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not any("pit_subscribed" in line for line in said):
                line = (await proc.stderr.readline()).decode()
                assert line, f"pit run ended: {''.join(said)}"
                said.append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(proc.communicate(), 30)
    said.append(rest[1].decode())
    assert proc.returncode == 0, "".join(said)
    return "".join(said)


async def test_the_installed_pit_as_docs_pit_md_section_1_says(
    deb_installed: Path, tmp_path: Path
) -> None:
    """docs/pit.md §1 on this Debian, step by step: the package made the user, the directories
    and the example config; check-config names every file the example needs (1, no
    traceback); the keys made as §1 makes them; the edited config passes; migrate and run as
    paigow-pit against a real Mosquitto. (systemctl itself cannot run here: PID 1 is not
    systemd; the unit is checked in tests/packaging/test_deb.py.)"""
    from simulators.mosquitto import Mosquitto

    guide = (Path(__file__).resolve().parents[2] / "docs/pit.md").read_text(encoding="utf-8")
    made_keys = (
        "(umask 0027 && openssl rand -hex 32 > pit-command.key && "
        "openssl rand -hex 32 > report.key)"
    )
    assert made_keys in guide and "chgrp paigow-pit pit-command.key report.key" in guide
    assert pwd.getpwnam(PIT_USER).pw_dir == "/nonexistent"
    assert _mode(PIT_DIR) == ("root", PIT_USER, 0o750)
    assert _mode(PIT_DIR / "pit.toml") == ("root", PIT_USER, 0o640)
    assert _mode(Path("/var/lib/paigow-pit")) == (PIT_USER, PIT_USER, 0o750)
    example = PIT_DIR / "pit.toml"
    done = _as_pit("paigow-table", "pit", "check-config", str(example))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{example}: broker.password_file: /etc/paigow-pit/mqtt-password: no such file" in (
        done.stderr
    )
    tables_key = tmp_path / "checkpoint.key"
    tables_key.write_text(os.urandom(32).hex() + "\n")
    _sh("install", "-m", "0640", "-g", PIT_USER, str(tables_key), str(PIT_DIR / "checkpoint.key"))
    _sh("sh", "-c", f"cd {PIT_DIR} && {made_keys} && chgrp paigow-pit pit-command.key report.key")
    database = Path(f"/var/lib/paigow-pit/test-{os.getpid()}.sqlite3")  # purge keeps the dir
    try:
        async with Mosquitto(tmp_path / "broker") as broker:
            example.write_text(
                '[site]\nid = "riverside"\n'
                f'[broker]\nhost = "127.0.0.1"\nport = {broker.port}\n'
                f'[database]\npath = "{database}"\n'
                f'[record]\ncheckpoint_key_file = "{PIT_DIR}/checkpoint.key"\n'
                f'[commands]\nkey_file = "{PIT_DIR}/pit-command.key"\n'
                f'[shift]\nreport_key_file = "{PIT_DIR}/report.key"\n'
                "[web]\nport = 0\n"
            )
            done = _as_pit("paigow-table", "pit", "check-config", str(example))
            assert done.returncode == 0 and done.stdout.startswith(f"{example}: OK"), done.stderr
            done = _as_pit("paigow-table", "pit", "migrate", "--config", str(example))
            assert done.returncode == 0 and "0001" in done.stdout, done.stdout + done.stderr
            assert _mode(database)[0] == PIT_USER
            said = await _pit_subscribes(example)
        assert "pit_web_listening url=http://127.0.0.1:" in said
    finally:
        for leftover in database.parent.glob(f"{database.name}*"):
            leftover.unlink()
