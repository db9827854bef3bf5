"""The command line and the daemon import what they use (issue 16): `run` loads aiohttp, paho,
the display, the analysis, pyusb and the Ed25519 library only when its config asks for them
(issue 32: the journal's checkpoint checks at start do not need the library that signs the
feed), and `house-way` none of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from simulators.demo import DEMO_CONFIG

HEAVY = (
    "cryptography",  # the Ed25519 library (~7-8 MB resident): signing is the MQTT feed's
    "aiohttp",
    "aiomqtt",
    "paho",
    "controller.analysis",
    "controller.display",
    "controller.mqtt",
    "usb",  # pyusb (0.7 MB resident at import): only for a USB dice reader
)

PROBE = """
import json, sys
HEAVY = %s
from controller.cli.main import command_parser
args = command_parser().parse_args(sys.argv[1:])
if args.command == "run":
    from controller.config_check import load_checked
    from controller.wiring import default_services
    import controller.journal.audit  # what every start runs: the chain and its checkpoints
    config, _ = load_checked(args.config)
    default_services(config, [])
heavy = sorted({m.split(".")[0] if not m.startswith("controller.") else ".".join(m.split(".")[:2])
                for m in sys.modules if m.startswith(HEAVY)})
print(json.dumps(heavy))
"""


def _loaded(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("%s", repr(HEAVY)), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def _config(tmp_path: Path, extra: str) -> str:
    text = DEMO_CONFIG.format(
        table="PG-I", shuffler=tmp_path / "s", rng=tmp_path / "r", journal=tmp_path / "j.sqlite3"
    )
    path = tmp_path / "table.toml"
    path.write_text(text + extra)
    return str(path)


def test_run_without_display_or_mqtt_imports_neither(tmp_path: Path) -> None:
    config = _config(tmp_path, "\n[display]\nenabled = false\n")
    assert _loaded("run", "--config", config) == []


def test_run_imports_what_its_config_enables(tmp_path: Path) -> None:
    config = _config(tmp_path, '\n[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = 1\n')
    loaded = _loaded("run", "--config", config)
    assert {"aiohttp", "paho", "controller.display", "controller.mqtt"} <= set(loaded)
    assert "aiomqtt" not in loaded  # the table's link is paho's alone (controller/mqtt/session.py)
    # Every message leaves signed, through libsodium (controller/sodium.py): not cryptography.
    assert "cryptography" not in loaded
    assert "controller.analysis" not in loaded


def test_house_way_imports_no_service_and_no_analysis() -> None:
    assert _loaded("house-way", "As", "Kd", "7h", "5s", "3c", "2d", "JK") == []
