"""The installed product: `make package` run on a clean copy of the repository, its wheel
installed in a fresh venv outside the checkout, its .deb inspected and unpacked.

The clean copy holds the files git tracks (as they are in the working tree), nothing else: a
file the program needs but nobody added to git is missing here as it is in a clean clone.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.display.conftest import browser

__all__ = ["browser"]

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("controller", "drivers", "simulators")
BUILD_TIMEOUT_S = 600


def tracked_files() -> list[str]:
    """The repository's files as git tracks them, relative to its root."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"the packaging tests need the git checkout (git ls-files): {exc}")
    return [name for name in listing.decode().split("\0") if name]


def planted_pyc(source: Path, edited: bytes) -> bytes:
    """A .pyc Python will load for ``source``: compiled from ``edited``, stamped with the
    original source's mtime and size (the audit's attack), in the format Python writes (PEP
    552: its magic number, flags 0 for a timestamp check, the mtime and size, the code)."""
    st = source.stat()
    code = compile(edited, str(source), "exec")
    stamp = [0, int(st.st_mtime), st.st_size]
    header = b"".join((n & 0xFFFFFFFF).to_bytes(4, "little") for n in stamp)
    return importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)


def clean_env() -> dict[str, str]:
    """The environment for a child that must not see this checkout or the outer make."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHONHOME"}
    return {k: v for k, v in os.environ.items() if k not in drop}


#: Who builds the release: the control file's Maintainer and the changelog's signer.
RELEASE_MAINTAINER = "Table Games IT <tablegames-it@casino.example.com>"


def run(
    args: list[str | Path], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> str:
    """Run a command; its output is the failure message when it fails."""
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env={**clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, args))} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@dataclass(frozen=True)
class Built:
    """What `make package` made from the clean copy ``source``."""

    source: Path
    wheel: Path
    deb: Path

    @property
    def version(self) -> str:
        return self.wheel.name.split("-")[1]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    source = tmp_path_factory.mktemp("clean-copy")
    for name in tracked_files():
        path = REPO / name
        if path.is_file() or path.is_symlink():  # a tracked file deleted in the tree is not copied
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name, follow_symlinks=False)
    run(
        ["make", "-C", source, "package"],
        cwd=source,
        timeout=BUILD_TIMEOUT_S,
        env={"DEB_MAINTAINER": RELEASE_MAINTAINER},
    )
    wheels = sorted((source / "dist").glob("paigow_table-*-py3-none-any.whl"))
    debs = sorted((source / "dist").glob("paigow-table_*.deb"))
    assert len(wheels) == 1 and len(debs) == 1, f"dist/ holds {wheels + debs}"
    return Built(source, wheels[0], debs[0])


@dataclass(frozen=True)
class Installed:
    """A fresh venv outside the checkout with the wheel installed; ``home`` is a scratch cwd."""

    venv: Path
    home: Path

    @property
    def command(self) -> Path:
        return self.venv / "bin" / "paigow-table"


@pytest.fixture(scope="session")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("installed")
    venv, home = base / "venv", base / "home"
    home.mkdir()
    assert REPO not in venv.parents
    run([sys.executable, "-m", "venv", venv], cwd=home)
    run([venv / "bin" / "pip", "install", "--quiet", built.wheel], cwd=home, timeout=300)
    # As docs/operations.md installs the wheel: sealed once, by whoever installed it.
    run([venv / "bin" / "paigow-table", "software", "seal"], cwd=home)
    return Installed(venv, home)
