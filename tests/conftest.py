"""What each test needs, as markers, so a change can be checked in minutes (`make check`) and the
whole suite still runs everything on both cores (`make test`; docs/architecture.md "Tests").

A test is marked by what it uses, never by hand-kept lists of names:
- by its fixtures (``FIXTURE_MARKS``): a broker, a browser, a built package, the census;
- by the helpers its module runs (``HELPER_MARKS``): a whole table daemon, a private Mosquitto;
- by the database it is given (``db_url``'s PostgreSQL parameter);
- by its own mark only where no fixture or helper shows it: a test that runs the daemon or the
  demo as a subprocess says ``@pytest.mark.daemon``, one that walks every hand ``exhaustive``.

`make check` deselects ``daemon``, ``browser``, ``broker``, ``database``, ``package``,
``exhaustive`` and ``slow``. Under pytest-xdist (``--dist loadgroup``) each module runs on one
worker (its module-scoped fixtures are made once), every package test on the same one (one
build, one dpkg at a time), and each exhaustive test alone; the longest groups are sent first.

Hypothesis: the ``full`` profile by default, ``quick`` when HYPOTHESIS_PROFILE=quick
(`make check`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("full", deadline=None)
settings.register_profile("quick", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "full"))

#: A fixture's name, and what a test that uses it needs.
FIXTURE_MARKS: dict[str, str] = {
    "browser": "browser",
    "broker": "broker",
    "make_broker": "broker",
    "gated": "broker",
    "built": "package",
    "installed": "package",
    "deb_installed": "package",
    "census": "exhaustive",
    "demo_journal": "daemon",  # the demo's whole daemon writes it
}

#: A helper a test module imports (module, name), and what its tests need.
HELPER_MARKS: dict[tuple[str, str], str] = {
    ("tests.harness", "running_table"): "daemon",
    ("tests.harness", "RunningTable"): "daemon",
    ("simulators.tables", "TableDaemon"): "daemon",  # a real table daemon for the pit's tests
    ("tests.display.conftest", "kiosk"): "browser",
    ("simulators.mosquitto", "Mosquitto"): "broker",
}

#: Groups sent to the workers first: the longest.
FIRST = ("package", "exhaustive")


def _helper_marks(module: Any) -> set[str]:
    names = vars(module) if module is not None else {}
    found: set[str] = set()
    for (where, name), mark in HELPER_MARKS.items():
        helper = getattr(sys.modules.get(where), name, None)
        if helper is not None and any(v is helper for v in names.values()):
            found.add(mark)
    return found


def _needs(item: pytest.Item) -> set[str]:
    needs = {FIXTURE_MARKS[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURE_MARKS}
    needs |= _helper_marks(getattr(item, "module", None))
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("db_url") == "postgresql":
        needs.add("database")
    if item.get_closest_marker("exhaustive") is not None:
        needs.add("exhaustive")
    return needs


def _join_group(item: pytest.Item, group: str) -> None:
    """The test's xdist group, by xdist's public marker (xdist puts the group after an '@' in
    the node id the --dist loadgroup scheduler reads: :func:`_grouped` checks it did)."""
    if item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(group))


def _group(item: pytest.Item, needs: set[str]) -> str:
    named = item.get_closest_marker("xdist_group")
    if named is not None:  # tests that share work name their group (e.g. the shipped ways)
        return str(named.args[0] if named.args else named.kwargs["name"])
    if "package" in needs:
        return "package"
    if "exhaustive" in needs:  # alone; no ']' in a group's name (xdist would not see it)
        return "exhaustive:" + item.nodeid.replace("[", "(").replace("]", ")")
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by what it needs and put it in its xdist group, longest groups first."""
    rank: dict[int, int] = {}
    for item in items:
        needs = _needs(item)
        for mark in sorted(needs):
            item.add_marker(mark)
        group = _group(item, needs)
        if getattr(config.option, "loadgroup", False):
            _join_group(item, group)
        rank[id(item)] = next((i for i, g in enumerate(FIRST) if group.startswith(g)), len(FIRST))
    items.sort(key=lambda it: rank[id(it)])  # stable: collection order within a rank


class _Grouped:
    """After xdist's own hook: every test of a --dist loadgroup run is in its group, or the run
    stops at once (a pytest whose node ids xdist cannot rename: pytest 9.2 with xdist 3.8, which
    is why pyproject.toml holds pytest below 9.2), never one that quietly runs `dpkg` twice."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if getattr(config.option, "loadgroup", False):
            lost = [item.nodeid for item in items if "@" not in item.nodeid]
            if lost:
                raise pytest.UsageError(
                    f"not in an xdist group: {lost[0]} (and {len(lost) - 1} more)"
                )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Grouped(), "paigow-xdist-groups")
