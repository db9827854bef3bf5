"""The wheel from a clean copy, installed in a fresh venv elsewhere: every runtime file is in it,
`--version` answers, and the demo runs and serves the dealer page with every asset."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import tomllib
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.async_api import Browser, Response

from tests.packaging.conftest import PACKAGES, REPO, Built, Installed, clean_env, run, tracked_files

pytestmark = pytest.mark.slow

PAGE_URL = re.compile(r"dealer page (http://127\.0\.0\.1:\d+)/dealer")
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 20


def test_the_wheel_ships_every_file_of_the_packages(built: Built) -> None:
    wanted = {name for name in tracked_files() if name.split("/")[0] in PACKAGES}
    assert any(name.startswith("controller/display/static/") for name in wanted)
    with zipfile.ZipFile(built.wheel) as wheel:
        shipped = set(wheel.namelist())
    assert sorted(wanted - shipped) == []


def test_installed_version_is_the_projects(built: Built, installed: Installed) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert built.version == project["version"]
    out = run([installed.command, "--version"], cwd=installed.home)
    assert out == f"paigow-table {project['version']}\n"


def test_installed_code_runs_from_the_venv_not_the_checkout(installed: Installed) -> None:
    out = run(
        [
            installed.venv / "bin" / "python",
            "-c",
            "import controller.display.server as s; print(s.__file__); print(s.STATIC_DIR)",
        ],
        cwd=installed.home,
    )
    module, static = (Path(line) for line in out.splitlines())
    assert installed.venv in module.parents
    assert sorted(p.name for p in static.iterdir()) == sorted(
        p.name for p in (REPO / "controller/display/static").iterdir()
    )


@dataclass
class Demo:
    """`paigow-table demo` from the installed venv: its stdout lines as they come."""

    process: asyncio.subprocess.Process
    stderr: Path
    lines: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(raw.decode())
            self.changed.set()
        self.changed.set()

    async def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        async def matched() -> re.Match[str]:
            while True:
                self.changed.clear()
                for line in self.lines:
                    if m := pattern.search(line):
                        return m
                if self.process.stdout is not None and self.process.stdout.at_eof():
                    raise AssertionError(f"the demo ended: {''.join(self.lines)}")
                await self.changed.wait()

        return await asyncio.wait_for(matched(), timeout)


@contextlib.asynccontextmanager
async def demo(installed: Installed) -> AsyncIterator[Demo]:
    """The installed demo (the default one, with its private Mosquitto if there is one), on any
    free port, run from a directory outside the checkout; stopped with SIGTERM, exit 0."""
    stderr = installed.home / "demo.stderr"
    with stderr.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            str(installed.command),
            "demo",
            "--http-port",
            "0",
            "--interval",
            "0.5",
            "--seed",
            "7",
            cwd=installed.home,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=err,
        )
    d = Demo(process, stderr)
    reader = asyncio.create_task(d.read())
    try:
        yield d
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        await reader
    log = stderr.read_text(encoding="utf-8", errors="replace")
    assert code == 0, f"the demo exited {code}:\n{log}"
    assert re.search(r"\d+ rounds closed", "".join(d.lines)), "".join(d.lines)
    assert "Traceback" not in log and "error" not in log.lower(), log


@pytest.mark.asyncio(loop_scope="module")
async def test_installed_demo_serves_the_dealer_page_with_every_asset(
    installed: Installed, browser: Browser
) -> None:
    async with demo(installed) as d:
        base = (await d.wait_for(PAGE_URL, START_TIMEOUT_S)).group(1)
        context = await browser.new_context()
        page = await context.new_page()
        responses: list[Response] = []
        failed: list[str] = []
        errors: list[str] = []
        page.on("response", lambda response: responses.append(response))
        page.on("requestfailed", lambda request: failed.append(request.url))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            await page.goto(base + "/dealer")
            # A round the demo dealt, drawn by the page's scripts from the live feed.
            await page.wait_for_selector("#dealer-setting[data-round-seq]", timeout=30_000)
            await page.wait_for_selector("#link.up")
            referenced: list[str] = await page.evaluate(
                """() => [...document.querySelectorAll('link[href], script[src]')]
                        .map((e) => e.href || e.src)"""
            )
            sheets: int = await page.evaluate(
                "() => [...document.styleSheets].filter((s) => s.cssRules.length > 0).length"
            )
            fetched = {}
            for url in referenced:
                response = await page.request.get(url)
                fetched[url] = (response.status, len(await response.body()) > 0)
        finally:
            await context.close()
    statics = {r.url: r.status for r in responses if "/static/" in r.url}
    assert {url.rsplit("/", 1)[1] for url in referenced} >= {
        "favicon.svg",
        "common.css",
        "dealer.css",
        "dealer.js",
    }
    assert base + "/static/common.js" in statics, statics  # imported by dealer.js
    assert all(status == 200 for status in statics.values()), statics
    assert fetched == {url: (200, True) for url in referenced}
    assert sheets == 2
    assert failed == [] and errors == []
