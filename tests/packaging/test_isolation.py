"""The installed commands cannot be redirected by their environment (issue 32, S1), attacked on
the installed wheel: the paytable's bytecode edited (a flush at PT3 paying 40 instead of 4) and
kept OUTSIDE the installation, loaded through ``PYTHONPYCACHEPREFIX``; a ``sitecustomize`` on
``PYTHONPATH``; ``PYTHONHOME`` pointing elsewhere; ``PYTHONSTARTUP``. ``paigow-table software
seal`` makes the commands start Python with ``-I``, so none of it is read: nothing planted runs,
``software check`` and ``authenticate`` say the interpreter is isolated, and an interpreter
started without ``-I`` is a finding (``run`` refuses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.wiring import EXIT_SOFTWARE_CHANGED
from tests.packaging.conftest import Installed, clean_env, planted_pyc
from tests.packaging.test_software import run_command, site_packages, table_config

pytestmark = pytest.mark.slow

MARKER_CODE = "\nimport pathlib; pathlib.Path({marker!r}).write_text('planted code ran')\n"


def _plant(installed: Installed, tmp_path: Path, variable: str) -> tuple[dict[str, str], Path]:
    """The environment of the attack and the file its planted code would write."""
    marker = tmp_path / "ran"
    code = MARKER_CODE.format(marker=str(marker))
    if variable == "PYTHONPYCACHEPREFIX":
        # The edited paytable, compiled and stamped with the source's mtime and size, kept under
        # a bytecode prefix outside the installation; and software.py, which every check runs.
        prefix = tmp_path / "pycache"
        tag = sys.implementation.cache_tag
        for name in ("game/paytables.py", "software.py"):
            source = site_packages(installed) / "controller" / name
            flush = b"\nFLUSH_PT3_PAYS = 40\n" if "pay" in name else b""
            edited = source.read_bytes() + flush + code.encode()
            pyc = prefix / source.parent.relative_to("/") / f"{source.stem}.{tag}.pyc"
            pyc.parent.mkdir(parents=True, exist_ok=True)
            pyc.write_bytes(planted_pyc(source, edited))
        return {variable: str(prefix)}, marker
    if variable == "PYTHONPATH":
        evil = tmp_path / "evil"
        evil.mkdir()
        (evil / "sitecustomize.py").write_text(code)
        return {variable: str(evil)}, marker
    if variable == "PYTHONSTARTUP":
        startup = tmp_path / "startup.py"
        startup.write_text(code)
        return {variable: str(startup), "PYTHONINSPECT": "1"}, marker
    home = tmp_path / "home"  # PYTHONHOME: a tree with no standard library at all
    (home / "lib").mkdir(parents=True)
    return {variable: str(home)}, marker


@pytest.mark.parametrize(
    "variable", ["PYTHONPYCACHEPREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"]
)
def test_the_environment_cannot_redirect_the_installed_command(
    installed: Installed, tmp_path: Path, variable: str
) -> None:
    env, marker = _plant(installed, tmp_path, variable)
    check = run_command(installed, "software", "check", env=env)
    assert not marker.exists(), f"code planted through {variable} ran: {check.stdout}"
    assert check.returncode == 0, check.stdout + check.stderr
    assert "isolated from the environment (-I)" in check.stdout
    answer = json.loads(run_command(installed, "authenticate", "--nonce", "n", env=env).stdout)
    assert answer["isolated"] is True and answer["verified"] is True
    assert not marker.exists(), f"code planted through {variable} ran"


def test_an_interpreter_started_without_isolation_is_a_finding(
    installed: Installed, tmp_path: Path
) -> None:
    """The same installation started as ``python -m controller.cli`` (no -I): the check says
    so and ``run`` refuses, with one line."""
    python = str(installed.venv / "bin" / "python")
    done = subprocess.run(
        [python, "-m", "controller.cli", "run", "--config", str(table_config(tmp_path))],
        cwd=installed.home,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_SOFTWARE_CHANGED, done.stderr
    assert "interpreter not isolated" in done.stderr
    script = (installed.venv / "bin" / "paigow-table").read_text().splitlines()
    assert script[0].endswith(" -IB") or " -IB " in script[1]  # as seal made it
