"""What a casino's IT person meets installing (issue 34 item 9), checked where it is written:
the package's data directories declared (no setuptools "Package would be ignored" on
`pip install -e`), no stale picture in docs/, no `sudo` (Debian minimal has none), the purge
naming everything it keeps, the placeholder maintainer said out loud, and the docs creating the
state directory the daemon needs without systemd."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_directory_of_package_data_is_a_declared_package() -> None:
    """setuptools warns, once per directory, when package data lives in a directory that is not
    in `packages` (controller/display/static, controller/game/ways, pit/static, pit/migrations)."""
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    namespaces = find.get("namespaces", True)  # setuptools' find: any directory, or __init__.py
    packages = {
        ".".join(d.relative_to(REPO).parts)
        for d in REPO.glob("*/**/")
        if any(fnmatch.fnmatch(".".join(d.relative_to(REPO).parts), i) for i in find["include"])
        and (namespaces or (d / "__init__.py").exists())
    }
    data_dirs = set()
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        root = REPO / package.replace(".", "/")
        for pattern in patterns:
            for path in root.glob(pattern):
                if path.is_file() and "__pycache__" not in path.parts:
                    data_dirs.add(".".join(path.parent.relative_to(REPO).parts))
    assert {"controller.display.static", "controller.game.ways", "pit.static"} <= data_dirs
    assert data_dirs - packages == set()


def test_every_picture_in_docs_is_shown_somewhere() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    for picture in sorted((REPO / "docs").glob("*.png")):
        assert picture.name in text, f"docs/{picture.name} is shown nowhere (an old page?)"


def test_no_sudo_where_an_installer_reads() -> None:
    for path in (REPO / "config").glob("*.toml"):
        assert "sudo" not in path.read_text(encoding="utf-8"), path.name
    for path in (REPO / "README.md", REPO / "docs" / "operations.md"):
        assert not re.search(r"^\s*(\$ )?sudo ", path.read_text(encoding="utf-8"), re.M), path


def test_purge_names_what_it_keeps() -> None:
    postrm = (REPO / "packaging" / "postrm").read_text(encoding="utf-8")
    [said] = re.findall(r'echo "(paigow-table: kept [^"]*)"', postrm)
    for kept in ("/var/lib/paigow-table", "/var/backups/paigow-table", "paigow"):
        assert kept in said


def test_the_placeholder_maintainer_is_said_out_loud() -> None:
    build = (REPO / "packaging" / "build-package").read_text(encoding="utf-8")
    assert re.search(r'if \[\[ -z \$\{DEB_MAINTAINER:-\}.*\n\s*echo "build-package: warning', build)


def test_running_without_systemd_creates_the_state_directory_first() -> None:
    ops = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    made = ops.find("install -d -o paigow -g paigow -m 0750 /var/lib/paigow-table")
    run = ops.find("runuser -u paigow -- paigow-table run --config")
    assert 0 < made < run
