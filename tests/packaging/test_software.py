"""Software authentication on the installed wheel (docs/audit.md), attacked the way the outside
audit did: an edited source, a planted ``.pyc`` stamped with the source's mtime and size, a
``.pth`` file, an edited dependency, a file no manifest lists, a path injected through the
environment. Each makes `run` refuse (exit 70, one line naming the file) and changes
`authenticate`'s answer; the untouched install verifies, and its answer is an HMAC a
regulator's tool recomputes by reading the disk itself."""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from controller.wiring import EXIT_SOFTWARE_CHANGED
from simulators.demo import DEMO_CONFIG
from tests.packaging.conftest import Installed, clean_env, planted_pyc

pytestmark = pytest.mark.slow


def site_packages(installed: Installed) -> Path:
    [site] = list((installed.venv / "lib").glob("python3*/site-packages"))
    return site


def _trees(installed: Installed) -> dict[str, Path]:
    """The three trees, as the regulator's tool finds them (not from the table's code)."""
    python = installed.venv / "bin" / "python"
    out = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import sys,sysconfig,os;"
            "print(sysconfig.get_path('stdlib'));print(os.path.realpath(sys.executable))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return {"venv": installed.venv, "stdlib": Path(out[0]), "interpreter": Path(out[1])}


def _expected_hmac(installed: Installed, nonce: str) -> tuple[str, int]:
    """What a regulator's tool computes by walking the disk (docs/audit.md gives the layout)."""
    trees = _trees(installed)
    items: dict[str, Path] = {}
    for scope in ("venv", "stdlib"):
        root = trees[scope]
        for top, dirs, files in os.walk(root):
            rel = Path(top).relative_to(root)
            if (
                scope == "stdlib"
                and rel.parts
                and rel.parts[0] in {"site-packages", "dist-packages"}
            ):
                dirs.clear()
                continue
            for name in [*files, *[d for d in dirs if (Path(top) / d).is_symlink()]]:
                if scope == "venv" and rel == Path(".") and name == "paigow-table.manifest":
                    continue
                items[f"{scope}/{(rel / name).as_posix()}"] = Path(top) / name
    items["interpreter"] = trees["interpreter"]
    mac = hmac.new(nonce.encode(), digestmod=hashlib.sha256)
    for key in sorted(items):
        path = items[key]
        data = path.read_bytes() if path.is_file() else b""
        if path.is_symlink():
            linked = os.readlink(path).encode() + b"\0" + data
            line = f"link {hashlib.sha256(linked).hexdigest()} {len(data)} {key}"
        else:
            line = f"file {hashlib.sha256(data).hexdigest()} {len(data)} {key}"
        mac.update(line.encode() + b"\n" + data)
    return mac.hexdigest(), len(items)


def run_command(
    installed: Installed, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.command), *args],
        cwd=installed.home,
        env={**clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _authenticate(installed: Installed, nonce: str = "n") -> dict[str, object]:
    done = run_command(installed, "authenticate", "--nonce", nonce)
    answer: dict[str, object] = json.loads(done.stdout)
    assert done.returncode == (0 if answer["verified"] else 1), done.stderr
    return answer


def table_config(tmp_path: Path) -> Path:
    config = tmp_path / "table.toml"
    config.write_text(
        DEMO_CONFIG.format(
            table="PG-SW", shuffler=tmp_path / "s", rng=tmp_path / "r", journal=tmp_path / "j"
        )
    )
    return config


def _refused(
    installed: Installed, tmp_path: Path, names: str, env: dict[str, str] | None = None
) -> None:
    """`run` refuses before touching the journal, with one line that names ``names``."""
    done = run_command(installed, "run", "--config", str(table_config(tmp_path)), env=env)
    assert done.returncode == EXIT_SOFTWARE_CHANGED, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1 and names in lines[0], done.stderr
    assert not (tmp_path / "j").exists()


@contextmanager
def _restored(*paths: Path) -> Iterator[None]:
    """Put every path back as it was (or remove it if it was not there) afterwards."""
    saved = {p: p.read_bytes() if p.exists() else None for p in paths}
    stats = {p: p.stat() for p in paths if p.exists()}
    try:
        yield
    finally:
        for path, data in saved.items():
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
                os.utime(path, ns=(stats[path].st_atime_ns, stats[path].st_mtime_ns))


def test_authenticate_is_an_hmac_the_regulator_can_recompute(installed: Installed) -> None:
    answer = _authenticate(installed, "gat-4711")
    expected, files = _expected_hmac(installed, "gat-4711")
    assert answer["hmac_sha256"] == expected and answer["files"] == files > 1000
    assert answer["verified"] is True and len(str(answer["software_digest"])) == 64
    other = _authenticate(installed, "other")
    assert other["hmac_sha256"] != expected  # keyed: a recorded answer does not replay
    check = run_command(installed, "software", "check")
    assert check.returncode == 0 and "verified" in check.stdout


def test_an_edited_source_stops_run_and_changes_authenticate(
    installed: Installed, tmp_path: Path
) -> None:
    target = site_packages(installed) / "controller" / "game" / "paytables.py"
    before = _authenticate(installed)["hmac_sha256"]
    with _restored(target):
        target.write_bytes(target.read_bytes() + b"\n# paying 500\n")
        _refused(installed, tmp_path, "controller/game/paytables.py")
        answer = _authenticate(installed)
        assert answer["verified"] is False and answer["hmac_sha256"] != before
    assert _authenticate(installed)["hmac_sha256"] == before


def test_a_planted_pyc_that_python_would_load_is_found(
    installed: Installed, tmp_path: Path
) -> None:
    source = site_packages(installed) / "controller" / "game" / "paytables.py"
    pyc = Path(importlib.util.cache_from_source(str(source)))
    assert pyc.is_file()  # pip compiled it at install, and the seal lists it
    before = _authenticate(installed)["hmac_sha256"]
    text = source.read_bytes()
    assert b"PAYTABLE_MARKER" not in text
    edited = text + b"\nPAYTABLE_MARKER = 40\n"
    with _restored(pyc):
        pyc.write_bytes(planted_pyc(source, edited))
        # Python does load it: the attack is real.
        loaded = subprocess.run(
            [
                str(installed.venv / "bin" / "python"),
                "-c",
                "import controller.game.paytables as p; print(p.PAYTABLE_MARKER)",
            ],
            cwd=installed.home,
            env=clean_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert loaded.stdout.strip() == "40", loaded.stderr
        _refused(installed, tmp_path, pyc.name)
        assert _authenticate(installed)["hmac_sha256"] != before


def test_a_pth_file_an_edited_dependency_and_an_unlisted_module_are_found(
    installed: Installed, tmp_path: Path
) -> None:
    site = site_packages(installed)
    before = _authenticate(installed)["hmac_sha256"]
    pth = site / "zz-evil.pth"
    with _restored(pth):
        pth.write_text("import os\n")
        _refused(installed, tmp_path, "zz-evil.pth (not in the package)")
        assert _authenticate(installed)["hmac_sha256"] != before
    dependency = site / "aiohttp" / "__init__.py"
    with _restored(dependency):
        dependency.write_bytes(dependency.read_bytes() + b"\n# patched\n")
        _refused(installed, tmp_path, "aiohttp/__init__.py")
        assert _authenticate(installed)["hmac_sha256"] != before
    extra = site / "controller" / "game" / "extra_payouts.py"
    with _restored(extra):
        extra.write_text("X = 1\n")
        _refused(installed, tmp_path, "extra_payouts.py (not in the package)")
    assert _authenticate(installed)["hmac_sha256"] == before


def test_code_from_outside_the_installation_is_refused(
    installed: Installed, tmp_path: Path
) -> None:
    """A path injected through the environment is not even read by the installed command (it
    starts Python with -I: tests/packaging/test_isolation.py); one added while running is."""
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "sitecustomize.py").write_text("")
    done = run_command(installed, "software", "check", env={"PYTHONPATH": str(evil)})
    assert done.returncode == 0 and str(evil) not in done.stdout, done.stdout
    code = (
        f"import sys; sys.path.insert(0, {str(evil)!r}); "
        "from controller.software import check_software; print(check_software().findings())"
    )
    found = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-I", "-c", code],
        cwd=installed.home,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert f"sys.path {evil}" in found.stdout, found.stderr


def test_an_unsealed_or_damaged_manifest_refuses(installed: Installed, tmp_path: Path) -> None:
    manifest = installed.venv / "paigow-table.manifest"
    with _restored(manifest):
        text = manifest.read_text()
        manifest.write_text(text.replace("file ", "file 00", 1))  # the first entry's digest
        _refused(installed, tmp_path, "interpreter")
        manifest.write_text("not a manifest\n")
        _refused(installed, tmp_path, "paigow-table.manifest")
        manifest.unlink()
        _refused(installed, tmp_path, "no manifest")
        assert _authenticate(installed)["verified"] is False


def test_the_interpreter_is_covered(installed: Installed, tmp_path: Path) -> None:
    """A copy of the interpreter with one byte changed, put where the venv's python points."""
    python = installed.venv / "bin" / "python"
    real = Path(os.path.realpath(python))
    fake = tmp_path / real.name
    shutil.copy2(real, fake)
    with fake.open("r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(b"\0")  # appended: still runs, no longer the sealed interpreter
    links = [p for p in (installed.venv / "bin").iterdir() if p.is_symlink()]
    saved = {p: os.readlink(p) for p in links}
    try:
        for p in links:
            p.unlink()
            p.symlink_to(fake)
        _refused(installed, tmp_path, "interpreter")
    finally:
        for p, target in saved.items():
            p.unlink()
            p.symlink_to(target)
    assert _authenticate(installed)["verified"] is True


def test_commands_never_write_bytecode_into_the_installation(installed: Installed) -> None:
    """A module whose .pyc is missing (sealed that way): the CLI imports it and must not write
    one, or the next start would find a file the seal does not list."""
    source = site_packages(installed) / "controller" / "cli" / "audit.py"
    pyc = Path(importlib.util.cache_from_source(str(source)))
    manifest = installed.venv / "paigow-table.manifest"
    with _restored(pyc, manifest):
        pyc.unlink()
        assert run_command(installed, "software", "seal").returncode == 0
        # It imports controller.cli.audit.
        assert run_command(installed, "audit", "--help").returncode == 0
        assert not pyc.exists()
        assert run_command(installed, "software", "check").returncode == 0
