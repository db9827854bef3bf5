"""`paigow-table --version`: the version of the installed distribution, from pyproject.toml."""

from __future__ import annotations

from importlib.metadata import version

import pytest

import controller
from controller.cli import main


def test_version_option_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"paigow-table {version('paigow-table')}\n"
    assert controller.__version__ == version("paigow-table")
