"""The .deb from a clean copy: its contents, control fields and maintainer scripts, and the
virtualenv it carries, unpacked and run (without installing the package on this machine)."""

from __future__ import annotations

import configparser
import gzip
import hashlib
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging.conftest import RELEASE_MAINTAINER, REPO, Built, run

pytestmark = pytest.mark.slow

OPT = "/opt/paigow-table"
VENV = f"{OPT}/.venv"


@dataclass(frozen=True)
class Entry:
    """One line of `dpkg-deb --contents`."""

    mode: str
    owner: str
    target: str | None  # a symlink's target


def contents(deb: Path) -> dict[str, Entry]:
    """Path (absolute, as installed) → entry."""
    entries = {}
    for line in run(["dpkg-deb", "--contents", deb], cwd=deb.parent).splitlines():
        mode, owner, _size, _date, _time, rest = line.split(None, 5)
        name, _, target = rest.partition(" -> ")
        entries["/" + name.removeprefix("./").rstrip("/")] = Entry(mode, owner, target or None)
    return entries


def unit(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def unpacked(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deb-root")
    run(["dpkg-deb", "--extract", built.deb, root], cwd=root)
    run(["dpkg-deb", "--control", built.deb, root / "DEBIAN"], cwd=root)
    return root


def test_deb_is_named_after_the_version_and_architecture(built: Built) -> None:
    arch = run(["dpkg", "--print-architecture"], cwd=built.source).strip()
    assert built.deb.name == f"paigow-table_{built.version}_{arch}.deb"


def test_contents_list_the_unit_rules_config_and_venv(built: Built) -> None:
    entries = contents(built.deb)
    site = next(p for p in entries if re.fullmatch(f"{VENV}/lib/python3\\.\\d+/site-packages", p))
    for path in (
        "/lib/systemd/system/paigow-table.service",
        "/lib/systemd/system/paigow-table-backup.service",
        "/lib/systemd/system/paigow-table-backup.timer",
        "/usr/share/doc/paigow-table/examples/paigow-kiosk.service",
        "/lib/udev/rules.d/99-paigow-table.rules",
        "/etc/paigow-table/table.toml",
        "/lib/systemd/system/paigow-pit.service",
        "/etc/paigow-pit/pit.toml",
        f"{VENV}/pyvenv.cfg",
        f"{site}/controller/display/static/dealer.html",
        f"{site}/controller/display/static/dealer.js",
        f"{OPT}/docs/operations.md",
        "/usr/share/paigow-table/prometheus/paigow.rules.yml",
        "/usr/share/paigow-table/prometheus/paigow.rules.test.yml",
        "/usr/share/paigow-table/grafana/paigow-floor.json",
    ):
        assert path in entries and entries[path].mode == "-rw-r--r--", path
    assert entries[f"{VENV}/bin/paigow-table"].mode == "-rwxr-xr-x"
    assert entries["/usr/bin/paigow-table"].target == f"{VENV}/bin/paigow-table"
    assert entries[f"{VENV}/bin/python"].target is not None
    assert {e.owner for e in entries.values()} == {"root/root"}
    assert not any(p.startswith(f"{site}/pip/") for p in entries), "pip is left in the venv"


def test_control_fields(built: Built, unpacked: Path) -> None:
    fields = dict(
        line.split(": ", 1)
        for line in (unpacked / "DEBIAN" / "control").read_text(encoding="utf-8").splitlines()
        if ": " in line and not line.startswith(" ")
    )
    python = Path(unpacked / VENV.lstrip("/") / "bin" / "python").resolve().name  # python3.11
    assert fields["Package"] == "paigow-table"
    assert fields["Version"] == built.version
    assert fields["Architecture"] == built.deb.name.rsplit("_", 1)[1].removesuffix(".deb")
    depends = [d.strip() for d in fields["Depends"].split(",")]
    assert python in depends and "adduser" in depends and "libusb-1.0-0" in depends
    assert fields["Maintainer"] and int(fields["Installed-Size"]) > 10_000
    conffiles = (unpacked / "DEBIAN" / "conffiles").read_text(encoding="utf-8").split()
    assert conffiles == ["/etc/paigow-table/table.toml", "/etc/paigow-pit/pit.toml"]


def test_package_matches_the_unit(unpacked: Path) -> None:
    """The unit's program, documentation and user are the ones the package provides."""
    service = unit(unpacked / "lib/systemd/system/paigow-table.service")
    assert (unpacked / "lib/systemd/system/paigow-table.service").read_bytes() == (
        REPO / "systemd/paigow-table.service"
    ).read_bytes()
    program = service["Service"]["ExecStart"].split()[0]
    assert (unpacked / program.lstrip("/")).is_file(), program
    doc = service["Unit"]["Documentation"].removeprefix("file://")
    assert (unpacked / doc.lstrip("/")).is_file(), doc
    config = service["Service"]["ExecStart"].split("--config", 1)[1].split()[0]
    assert (unpacked / config.lstrip("/")).is_file(), config
    postinst = (unpacked / "DEBIAN" / "postinst").read_text(encoding="utf-8")
    assert f"USER={service['Service']['User']}\n" in postinst
    assert service["Service"]["Group"] == service["Service"]["User"]  # adduser --ingroup "$USER"
    for group in service["Service"]["SupplementaryGroups"].split():
        assert f'adduser --quiet "$USER" {group}\n' in postinst


def test_package_ships_the_pit_unit_config_and_user(unpacked: Path) -> None:
    """The pit as a casino installs it (docs/pit.md §1): its unit, as in the repository, runs a
    program and reads a config the package ships, as a user postinst makes; the example config
    is the repository's; prerm stops it on removal; postinst restarts it on upgrade."""
    path = unpacked / "lib/systemd/system/paigow-pit.service"
    assert path.read_bytes() == (REPO / "systemd/paigow-pit.service").read_bytes()
    service = unit(path)
    for key in ("ExecStart", "ExecStartPre"):
        program = service["Service"][key].split()[0]
        assert (unpacked / program.lstrip("/")).is_file(), program
        config = service["Service"][key].split("--config", 1)[1].split()[0]
        assert config == "/etc/paigow-pit/pit.toml"
    assert (unpacked / "etc/paigow-pit/pit.toml").read_bytes() == (
        REPO / "config/pit.example.toml"
    ).read_bytes()
    doc = service["Unit"]["Documentation"].removeprefix("file://")
    assert (unpacked / doc.lstrip("/")).is_file(), doc
    assert service["Service"]["User"] == service["Service"]["Group"] == "paigow-pit"
    assert "78" in service["Service"]["RestartPreventExitStatus"].split()
    postinst = (unpacked / "DEBIAN" / "postinst").read_text(encoding="utf-8")
    assert "addgroup --system --quiet paigow-pit" in postinst
    assert "--ingroup paigow-pit --no-create-home" in postinst
    assert '--gecos "Pai Gow pit" paigow-pit\n' in postinst
    assert "install -d -m 0750 -o paigow-pit -g paigow-pit /var/lib/paigow-pit" in postinst
    assert "systemctl try-restart paigow-pit.service" in postinst
    prerm = (unpacked / "DEBIAN" / "prerm").read_text(encoding="utf-8")
    assert "systemctl disable --now paigow-pit.service" in prerm


@pytest.mark.parametrize("script", ["postinst", "prerm", "postrm"])
def test_maintainer_scripts_are_valid_shell(unpacked: Path, script: str) -> None:
    path = unpacked / "DEBIAN" / script
    assert path.stat().st_mode & 0o777 == 0o755
    run(["sh", "-n", path], cwd=unpacked)


def test_unpacked_venv_names_only_its_final_paths(unpacked: Path) -> None:
    venv = unpacked / VENV.lstrip("/")
    assert (
        (venv / "bin" / "paigow-table")
        .read_text(encoding="utf-8")
        .startswith(f"#!{VENV}/bin/python")
    )
    assert (venv / "pyvenv.cfg").read_text(encoding="utf-8").rstrip().endswith(f"-m venv {VENV}")
    leaked = [
        str(p.relative_to(unpacked))
        for p in unpacked.rglob("*")
        if p.is_file() and not p.is_symlink() and b"paigow-package." in p.read_bytes()
    ]
    assert leaked == [], "files name the build directory"
    sources = list((venv / "lib").rglob("*.py"))
    uncompiled = [str(s) for s in sources if not list(s.parent.glob(f"__pycache__/{s.stem}.*.pyc"))]
    assert sources and uncompiled == []  # /opt is read-only to the service: no bytecode later


def test_unpacked_venv_runs_the_demo(built: Built, unpacked: Path, tmp_path: Path) -> None:
    """The packaged venv, run from where it was unpacked (its interpreter finds its own
    pyvenv.cfg), answers --version and deals rounds with the installed code."""
    venv = unpacked / VENV.lstrip("/")
    python, command = venv / "bin" / "python", venv / "bin" / "paigow-table"
    assert run([python, command, "--version"], cwd=tmp_path) == f"paigow-table {built.version}\n"
    out = run(
        [
            python,
            command,
            "demo",
            "--rounds",
            "2",
            "--interval",
            "0",
            "--seed",
            "3",
            "--no-mqtt",
            "--http-port",
            "0",
        ],
        cwd=tmp_path,
        timeout=120,
    )
    assert "2 rounds closed; journal: 2 rounds" in out, out
    where = run([python, "-c", "import controller; print(controller.__file__)"], cwd=tmp_path)
    assert venv in Path(where.strip()).parents


def test_md5sums_cover_every_file_but_the_conffiles(unpacked: Path) -> None:
    """`dpkg --verify paigow-table` can tell any changed program file on a table computer."""
    listed = {}
    for line in (unpacked / "DEBIAN" / "md5sums").read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    files = {
        str(p.relative_to(unpacked))
        for p in unpacked.rglob("*")
        if p.is_file() and not p.is_symlink() and p.parts[len(unpacked.parts)] != "DEBIAN"
    }
    conffiles = (unpacked / "DEBIAN" / "conffiles").read_text(encoding="utf-8").split()
    assert set(listed) == files - {c.lstrip("/") for c in conffiles}
    for name in ("lib/systemd/system/paigow-table.service", f"{VENV.lstrip('/')}/bin/paigow-table"):
        assert listed[name] == hashlib.md5((unpacked / name).read_bytes()).hexdigest()


def test_lintian_says_nothing_but_what_is_overridden_with_a_reason(built: Built) -> None:
    """Every tag lintian would give is fixed or overridden, each override with its reason."""
    done = subprocess.run(
        ["lintian", "--tag-display-limit", "0", str(built.deb)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    tags = [line for line in done.stdout.splitlines() if line[:2] in ("E:", "W:", "I:")]
    assert tags == [] and done.returncode == 0, done.stdout + done.stderr
    overrides = (REPO / "packaging" / "lintian-overrides").read_text(encoding="utf-8").splitlines()
    reason = False  # a comment above each block of overrides says why
    for line in overrides:
        if line.startswith("#"):
            reason = True
        elif line.startswith("paigow-table:"):
            assert reason, f"no reason above {line!r}"
        else:
            reason = False


def test_copyright_names_every_dependency_and_the_changelog_the_version(
    built: Built, unpacked: Path
) -> None:
    copyright_text = (unpacked / "usr/share/doc/paigow-table/copyright").read_text()
    assert copyright_text.startswith("Format: https://www.debian.org/doc/packaging-manuals/")
    versions = (unpacked / OPT.lstrip("/") / "versions.txt").read_text().split()
    for pinned in versions:
        name, version = pinned.split("==")
        if name != "paigow-table":
            assert f"Copyright: the {name} authors ({name} {version})" in copyright_text, name
    assert copyright_text.count("\nLicense: ") >= len(versions)
    changelog = gzip.decompress(
        (unpacked / "usr/share/doc/paigow-table/changelog.gz").read_bytes()
    ).decode()
    assert changelog.startswith(f"paigow-table ({built.version}) ")
    assert f" -- {RELEASE_MAINTAINER}  " in changelog


def test_release_checksums_and_their_detached_signature(built: Built, tmp_path: Path) -> None:
    """What docs/operations.md tells a casino to run, against a release signed here."""
    dist = tmp_path / "dist"
    shutil.copytree(built.deb.parent, dist)
    key, public = tmp_path / "release-key.pem", tmp_path / "release.pub.pem"
    run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], cwd=tmp_path)
    run(["openssl", "pkey", "-in", key, "-pubout", "-out", public], cwd=tmp_path)
    run([REPO / "packaging" / "sign-release", key, dist], cwd=tmp_path)
    verify: list[str | Path] = [
        "openssl", "pkeyutl", "-verify", "-pubin", "-inkey", public, "-rawin",
        "-in", dist / "SHA256SUMS", "-sigfile", dist / "SHA256SUMS.sig",
    ]  # fmt: skip
    assert "Signature Verified Successfully" in run(verify, cwd=dist)
    listed = run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist)
    assert f"{built.deb.name}: OK" in listed and f"{built.wheel.name}: OK" in listed
    # A changed package fails its checksum; checksums rewritten to match fail the signature.
    deb = dist / built.deb.name
    deb.write_bytes(deb.read_bytes() + b"\0")
    changed = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True)
    assert changed.returncode != 0
    sums = (dist / "SHA256SUMS").read_text().splitlines()
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    (dist / "SHA256SUMS").write_text(
        "\n".join(f"{digest}  {deb.name}" if deb.name in s else s for s in sums) + "\n"
    )
    forged = subprocess.run([str(v) for v in verify], cwd=dist, capture_output=True, text=True)
    assert forged.returncode != 0 and "Verified Successfully" not in forged.stdout
