"""`make demo` is for an ordinary user (issue 34 item 3): setting up the venv and running the demo
install nothing with apt; packaging tools (deb-tools) belong to `make package` and `make test`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def planned(target: str) -> str:
    """What `make` would run for ``target``, every prerequisite remade (-B), nothing run (-n)."""
    assert shutil.which("make"), "make is part of the README's first command"
    done = subprocess.run(
        ["make", "-n", "-B", target], capture_output=True, text=True, cwd=REPO, check=True
    )
    return done.stdout


@pytest.mark.parametrize("target", ["venv", "demo", "demo-pit"])
def test_the_demo_needs_no_root(target: str) -> None:
    plan = planned(target)
    assert "-m venv .venv" in plan
    for root_only in ("apt-get", "dpkg-query", "lintian", "sudo"):
        assert root_only not in plan, f"make {target} runs {root_only}"


@pytest.mark.parametrize("target", ["package", "test"])
def test_packaging_tools_come_with_package_and_test(target: str) -> None:
    assert "dpkg-query" in planned(target)
