"""One version, written in three places that must agree: ``pyproject.toml`` (what the wheel and
the .deb are named after, and what ``paigow-table --version`` prints from the metadata),
``packaging/changelog``'s first entry (Debian's changelog, which the build checks against the
wheel) and ``CHANGELOG.md``'s newest released section (what a person reads). Each is a semantic
version (https://semver.org), and a release is dated."""

from __future__ import annotations

import re
import tomllib
from datetime import date
from email.utils import parsedate_to_datetime

from tests.packaging.conftest import REPO

#: semver.org's own expression for a version (2.0.0), without the leading 'v'.
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
#: A released section of CHANGELOG.md: ``## [0.2.0] - 2026-12-05``.
RELEASED = re.compile(r"^## \[([^\]]+)\] - (\d{4}-\d{2}-\d{2})$", re.M)
#: A Debian changelog entry's first line, and its trailer (the date after two spaces).
DEB_ENTRY = re.compile(r"^paigow-table \(([^)]+)\) [a-z-]+; urgency=[a-z]+$", re.M)
DEB_TRAILER = re.compile(r"^ -- .+ <[^>]+>  (.+)$", re.M)


def _pyproject_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def _debian_entries() -> list[tuple[str, date]]:
    text = (REPO / "packaging" / "changelog").read_text(encoding="utf-8")
    versions = DEB_ENTRY.findall(text)
    dates = [parsedate_to_datetime(d).date() for d in DEB_TRAILER.findall(text)]
    assert versions and len(versions) == len(dates), "packaging/changelog: entries without trailer"
    return list(zip(versions, dates, strict=True))


def _changelog_releases() -> list[tuple[str, date]]:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text, "CHANGELOG.md keeps an [Unreleased] section on top"
    assert text.index("## [Unreleased]") < text.index("\n## [", text.index("## [Unreleased]") + 1)
    return [(v, date.fromisoformat(d)) for v, d in RELEASED.findall(text)]


def test_the_version_is_written_once_in_three_agreeing_places() -> None:
    project = _pyproject_version()
    debian_version, debian_date = _debian_entries()[0]
    changelog_version, changelog_date = _changelog_releases()[0]
    assert SEMVER.fullmatch(project), f"pyproject.toml: {project!r} is not a semantic version"
    assert debian_version == project, (
        f"packaging/changelog's first entry is {debian_version}, pyproject.toml says {project}"
    )
    assert changelog_version == project, (
        f"CHANGELOG.md's newest release is {changelog_version}, pyproject.toml says {project}"
    )
    assert changelog_date == debian_date, "the two changelogs date the release differently"


def test_every_release_is_a_semantic_version_newer_than_the_one_below() -> None:
    for where, releases in (
        ("packaging/changelog", _debian_entries()),
        ("CHANGELOG.md", _changelog_releases()),
    ):
        cores = []
        for version, _ in releases:
            parts = SEMVER.fullmatch(version)
            assert parts, f"{where}: {version!r} is not a semantic version"
            cores.append((int(parts[1]), int(parts[2]), int(parts[3])))
        assert cores == sorted(set(cores), reverse=True), f"{where}: versions not newest first"
        dates = [d for _, d in releases]
        assert dates == sorted(dates, reverse=True), f"{where}: dates not newest first"
    # Both changelogs name the same releases.
    assert [v for v, _ in _debian_entries()] == [v for v, _ in _changelog_releases()]


def test_the_semver_expression_refuses_what_is_not_one() -> None:
    for good in ("0.2.0", "1.0.0-rc.1", "1.2.3+build.5"):
        assert SEMVER.fullmatch(good), good
    for bad in ("0.2", "v0.2.0", "01.2.0", "0.2.0.1", "0.2.0-"):
        assert not SEMVER.fullmatch(bad), bad
