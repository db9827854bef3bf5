"""controller/config/: the example loads; every broken config gives one message naming its key."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from controller.config import (
    Config,
    ConfigError,
    SerialDevice,
    SoftwareDevice,
    TableConfig,
    UsbDevice,
    load_config,
)
from controller.config_check import check_config_main
from controller.game.setting import Rules

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "table.example.toml"


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


def write(tmp_path: Path, text: str, name: str = "table.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def edited(old: str, new: str, count: int = 1) -> str:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert old in text, f"the example no longer contains {old!r}"
    return text.replace(old, new, count)


def test_example_config_loads() -> None:
    config = load_config(EXAMPLE)
    assert config.table.id == "PG-07"
    assert config.table.seats == {2: "1", 3: "2", 4: "3", 5: "4", 6: "5", 7: "6"}
    assert config.table.seat_of(2) == "1" and config.table.seat_of(1) is None
    assert config.rules.to_rules() == Rules()
    assert config.paytables.chan_chu == "PT3" and config.paytables.envy
    name, cards = config.cards_device
    assert name == "shuffler" and isinstance(cards, SerialDevice)
    assert cards.settings() == {
        "port": "/dev/paigow-shuffler",
        "baudrate": 38400,
        "bytesize": 8,
        "parity": "N",
        "stopbits": 1,
        "frame_timeout": 0.25,
        "silence_timeout": 30.0,
    }
    assert config.pole_device is not None and config.pole_device[0] == "pole"
    assert config.devices_with_role("position") == ["rng"]
    assert config.mqtt.client_id == "paigow-PG-07"
    assert config.mqtt.topic_prefix == "casino/riverside/paigow/PG-07/"
    assert config.mqtt.tls is not None and config.mqtt.port == 8883
    assert config.mqtt.reconnect.cap == 5.0
    assert config.journal.synchronous == "FULL"


def test_example_passes_check_config() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(EXAMPLE, stdout=out, stderr=err) == 0
    # Only warnings: the example's serial ports do not exist on a machine without the devices.
    for line in err.getvalue().splitlines():
        assert ": warning: " in line and "does not exist" in line, line
    assert out.getvalue().startswith(f"{EXAMPLE}: OK\n")
    assert "PG-07" in out.getvalue()


BROKEN = {
    "toml syntax": (
        'name = "Pai Gow 7"',
        'name = "Pai Gow 7',
        "line 10, column ",
        "invalid TOML",
    ),
    "unknown key": (
        "baudrate = 38400",
        "baudrte = 38400",
        "devices.shuffler.baudrte",
        "unknown key (did you mean 'baudrate'?)",
    ),
    "wrong type": (
        "keepalive = 30",
        'keepalive = "30"',
        "mqtt.keepalive",
        "expected a valid integer",
    ),
    "duplicate seat label": (
        '5 = "4"',
        '5 = "3"',
        "table.seats.5",
        "seat label '3' is already used",
    ),
    "position out of range": ('7 = "6"', '8 = "6"', "table.seats.8", "expected 2–7"),
    "envy with PT1": (
        'chan_chu = "PT3"',
        'chan_chu = "PT1"',
        "paytables.envy",
        "only with Chan Chu paytables PT3–PT5",
    ),
    "bad parity": (
        'parity = "N"',
        'parity = "X"',
        "devices.shuffler.parity",
        "expected 'N', 'E', 'O', 'M' or 'S', got a string 'X'",
    ),
    "port out of range": ("port = 8883", "port = 70000", "mqtt.port", "1–65535, got 70000"),
    "missing password file": (
        'password_credential = "mqtt-password"',
        'password_file = "secrets/mqtt-password"',
        "mqtt.password_file",
        "file not found",
    ),
    "two cards devices": (
        'role = "position"',
        'role = "cards"',
        "devices",
        'exactly one device with role = "cards" (shuffler or shoe), found 2: shuffler, rng',
    ),
    "no cards device": (
        'role = "cards"',
        'role = "position"',
        "devices",
        'exactly one device with role = "cards" (shuffler or shoe), found none',
    ),
    "bad transport": (
        'transport = "serial"',
        'transport = "serail"',
        "devices.shuffler.transport",
        "expected 'serial', 'tcp', 'usb' or 'none', got 'serail'",
    ),
    "bool as string": ("envy = true", 'envy = "yes"', "paytables.envy", "expected true or false"),
    "bad stopbits": ("stopbits = 1 ", "stopbits = 3 ", "devices.shuffler.stopbits", "1, 1.5 or 2"),
    "seat label too long": ('2 = "1"', '2 = "123456789"', "table.seats.2", "1–8 printable"),
    "topic wildcard": (
        'topic_prefix = "casino/{site}/paigow/{table}/"',
        'topic_prefix = "casino/#/"',
        "mqtt.topic_prefix",
        "without wildcards",
    ),
    "cap below initial": ("cap = 5.0", "cap = 0.1", "mqtt.reconnect.cap", "cap ≥ initial"),
    "missing table id": ('id = "PG-07"', "", "table.id", "required key is missing"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_config_gives_one_precise_error(tmp_path: Path, case: str) -> None:
    old, new, key, fragment = BROKEN[case]
    path = write(tmp_path, edited(old, new))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    errors = caught.value.errors
    assert len(errors) == 1, errors
    file, got_key, message = errors[0]
    assert file == str(path)
    assert got_key.startswith(key) if case == "toml syntax" else got_key == key
    assert fragment in message


def test_check_config_prints_file_key_message(tmp_path: Path) -> None:
    path = write(
        tmp_path, edited('parity = "N"', 'parity = "X"').replace("keepalive = 30", "keepalive = 1")
    )
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(path, stdout=out, stderr=err) == 1
    assert out.getvalue() == ""
    lines = [x for x in err.getvalue().splitlines() if ": warning: " not in x]
    assert lines == [
        f"{path}: devices.shuffler.parity: expected 'N', 'E', 'O', 'M' or 'S', got a string 'X'",
        f"{path}: mqtt.keepalive: expected a number greater than or equal to 5, got an integer 1",
    ]


def test_unreadable_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(missing)
    assert caught.value.errors == [
        (str(missing), "(file)", "cannot read: No such file or directory")
    ]


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '[table]\nid = "PG-01"\nsite = riverside\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    [(_, key, message)] = caught.value.errors
    assert key == "line 3, column 8"
    assert message.startswith("invalid TOML: ")


MINIMAL = """
[table]
id = "PG-01"
site = "lab"

[devices.shoe]
driver = "reference_shoe"
role = "cards"
transport = "tcp"
host = "127.0.0.1"
port = 7001
"""


def test_minimal_config_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    assert config.table.name == "PG-01"
    assert config.table.seats[7] == "6"
    assert not config.mqtt.enabled
    assert config.mqtt.topic_prefix == "casino/lab/paigow/PG-01/"
    assert config.display.host == "127.0.0.1" and config.display.port == 8080
    assert config.display.loopback_only
    assert str(config.journal.path) == "/var/lib/paigow-table/journal.sqlite3"
    assert config.logging.level == "INFO" and config.logging.format == "auto"
    assert config.paytables.chan_chu == "PT1" and not config.paytables.envy
    # A restarted broker on a LAN is back in seconds: retry at least every 5 s.
    assert config.mqtt.reconnect.cap == 5.0


def test_secret_files_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "mqtt").write_text("s3cret\n")
    (tmp_path / "token").write_text("tok\n")
    text = MINIMAL + (
        '\n[mqtt]\nhost = "broker"\nusername = "PG-01"\npassword_file = "secrets/mqtt"\n'
        '\n[display]\nhost = "0.0.0.0"\nsupervisor_token_file = "token"\n'
        '\n[journal]\npath = "state/journal.sqlite3"\nsynchronous = "NORMAL"\n'
    )
    config = load_config(write(tmp_path, text))
    assert config.mqtt.password_file == tmp_path / "secrets" / "mqtt"
    assert config.mqtt.read_password() == "s3cret"
    assert config.mqtt.port == 1883
    assert config.display.read_supervisor_token() == "tok"
    assert not config.display.loopback_only
    assert config.journal.path == tmp_path / "state" / "journal.sqlite3"
    assert "s3cret" not in repr(config)


def test_password_from_systemd_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = MINIMAL + '\n[mqtt]\nusername = "PG-01"\npassword_credential = "mqtt-password"\n'
    path = write(tmp_path, text)
    creds = tmp_path / "creds"
    creds.mkdir()
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    [(_, key, message)] = caught.value.errors
    assert key == "mqtt.password_credential" and "file not found" in message
    (creds / "mqtt-password").write_text("pw\n")
    assert load_config(path).mqtt.read_password() == "pw"


def test_password_needs_username(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("x")
    path = write(tmp_path, MINIMAL + '\n[mqtt]\npassword_file = "pw"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert [(k, m) for _, k, m in caught.value.errors] == [
        ("mqtt.username", "a password needs a username: expected username")
    ]


def test_usb_ids_accept_hex_strings(tmp_path: Path) -> None:
    text = MINIMAL + (
        '\n[devices.dice]\ndriver = "hid_dice"\nrole = "position"\ntransport = "usb"\n'
        'vendor_id = "0x1209"\nproduct_id = 1\nendpoint_in = "0x82"\n'
        '\n[devices.soft]\ndriver = "software_rng"\nrole = "position"\ntransport = "none"\n'
    )
    config = load_config(write(tmp_path, text))
    dice = config.devices["dice"]
    assert isinstance(dice, UsbDevice)
    assert (dice.vendor_id, dice.product_id, dice.endpoint_in) == (0x1209, 0x0001, 0x82)
    assert dice.settings()["read_timeout_ms"] == 250
    assert isinstance(config.devices["soft"], SoftwareDevice)
    assert config.devices["soft"].settings() == {}
    shoe = config.devices["shoe"]
    assert shoe.settings() == {"host": "127.0.0.1", "port": 7001, "connect_timeout": 5.0}
    bad = text.replace('vendor_id = "0x1209"', 'vendor_id = "0x1FFFF"')
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, bad))
    assert [k for _, k, _ in caught.value.errors] == ["devices.dice.vendor_id"]


def test_known_drivers_are_checked(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    known = {"reference_shoe": {"cards"}, "software_rng": {"position"}}
    assert load_config(path, known_drivers=known).cards_device[0] == "shoe"
    with pytest.raises(ConfigError) as caught:
        load_config(
            write(tmp_path, MINIMAL.replace("reference_shoe", "referense_shoe")),
            known_drivers=known,
        )
    [(_, key, message)] = caught.value.errors
    assert key == "devices.shoe.driver"
    assert (
        message
        == "unknown driver 'referense_shoe': expected one of 'reference_shoe' or 'software_rng'"
    )
    wrong_role = MINIMAL.replace("reference_shoe", "software_rng")
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, wrong_role), known_drivers=known)
    assert [k for _, k, _ in caught.value.errors] == ["devices.shoe.role"]


def test_config_built_in_code() -> None:
    config = Config(
        table=TableConfig(id="DEMO-1", site="demo"),
        devices={"shoe": SoftwareDevice(driver="simulated_shoe", role="cards", transport="none")},
    )
    assert config.mqtt.client_id == "paigow-DEMO-1"
    assert config.mqtt.topic_prefix == "casino/demo/paigow/DEMO-1/"
    with pytest.raises(ValueError, match="port"):
        config.model_validate({**config.model_dump(), "display": {"port": 70000}})
    # Port 0 asks for any free port (tests, a second instance on one computer).
    assert config.model_validate({**config.model_dump(), "display": {"port": 0}}).display.port == 0


# --- check-config: one pass over every error, and warnings -----------------------------------

CHECKED = """
[table]
id = "PG-01"
site = "lab"

[paytables]
chan_chu = "PT3"
jacks_beat = "B"

[devices.shuffler]
driver = "reference_shuffler"
role = "cards"
transport = "tcp"
host = "127.0.0.1"
port = 7001
"""


def _check(tmp_path: Path, text: str) -> tuple[int, list[str], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = check_config_main(write(tmp_path, text), stdout=out, stderr=err)
    lines = err.getvalue().splitlines()
    return (
        code,
        [x for x in lines if ": warning: " not in x],
        [x for x in lines if ": warning: " in x],
    )


def test_check_config_knows_the_drivers_run_knows(tmp_path: Path) -> None:
    code, errors, _ = _check(tmp_path, CHECKED.replace("reference_shuffler", "refrence_shuffler"))
    assert code == 1
    [error] = errors
    assert ": devices.shuffler.driver: unknown driver 'refrence_shuffler'" in error
    assert "'reference_shuffler'" in error and "'esc_pos_pole'" in error


def test_a_misspelt_driver_is_told_beside_a_misspelt_key_with_what_was_meant(
    tmp_path: Path,
) -> None:
    """The model checks a driver only once the rest of its section is valid: a misspelt key
    hid the misspelt driver until the key was fixed (one run, every error)."""
    text = CHECKED.replace("reference_shuffler", "reference_shufler").replace("host =", "hots =")
    code, errors, _ = _check(tmp_path, text)
    assert code == 1
    said = "\n".join(errors)
    assert "devices.shuffler.hots: unknown key (did you mean 'host'?)" in said
    assert (
        "devices.shuffler.driver: unknown driver 'reference_shufler' "
        "(did you mean 'reference_shuffler'?)" in said
    )
    assert sum("unknown driver" in e for e in errors) == 1  # once, not also without the hint


def test_check_config_checks_a_pole_display_s_driver(tmp_path: Path) -> None:
    pole = (
        '\n[devices.pole]\ndriver = "{}"\nrole = "pole"\ntransport = "serial"\nport = "/dev/null"\n'
    )
    code, errors, _ = _check(tmp_path, CHECKED + pole.format("esc_pos_pol"))
    assert code == 1 and len(errors) == 1 and "devices.pole.driver" in errors[0]
    code, errors, _ = _check(tmp_path, CHECKED + pole.format("reference_rng"))
    assert code == 1 and len(errors) == 1 and "devices.pole.role" in errors[0]
    assert _check(tmp_path, CHECKED + pole.format("esc_pos_pole"))[0] == 0


def test_check_config_reports_every_layer_in_one_run(tmp_path: Path) -> None:
    """A bad value, an unknown driver and a driver option the driver refuses: all three."""
    text = (
        CHECKED.replace('jacks_beat = "B"', 'jacks_beat = "Z"')
        + '\n[devices.rng]\ndriver = "referense_rng"\nrole = "position"\ntransport = "tcp"\n'
        'host = "127.0.0.1"\nport = 7002\n'
    ).replace("port = 7001", "port = 7001\noptions = { colour = 1 }")
    code, errors, _ = _check(tmp_path, text)
    assert code == 1
    keys = [line.split(": ")[1] for line in errors]
    assert keys == ["paytables.jacks_beat", "devices.rng.driver", "devices.shuffler"], errors
    assert "colour" in errors[2]


def test_check_config_warns_of_what_an_operator_should_know(tmp_path: Path) -> None:
    pin, token, key = tmp_path / "pin", tmp_path / "token", tmp_path / "password"
    pin.write_text("1234\n")
    token.write_text("short-token\n")
    key.write_text("secret\n")
    for f in (pin, token, key):
        f.chmod(0o600)
    text = (
        CHECKED.replace('[paytables]\nchan_chu = "PT3"\njacks_beat = "B"\n', "")
        + '\n[devices.rng]\ndriver = "reference_rng"\nrole = "position"\ntransport = "serial"\n'
        f'port = "{tmp_path / "no-such-tty"}"\n'
        f'\n[display]\nvoid_pin_file = "{pin}"\nsupervisor_token_file = "{token}"\n'
        f'\n[mqtt]\nusername = "PG-01"\npassword_file = "{key}"\n'
    )
    code, errors, warnings = _check(tmp_path, text)
    assert code == 0 and errors == []
    said = "\n".join(warnings)
    assert (
        "paytables: warning: section missing: using the defaults, Chan Chu PT1, Jacks Beat A"
        in said
    )
    assert "devices.rng.port: warning:" in said and "does not exist" in said
    assert "shorter than 6 digits" in said
    assert "the supervisor token has 11 characters: expected at least 32" in said
    # A secret others may read is an error, no longer a warning (tests/config/test_files.py).
    for f in (pin, token, key):
        f.chmod(0o644)
    code, errors, _ = _check(tmp_path, text)
    assert code == 1
    for secret in ("mqtt.password_file", "display.void_pin_file", "display.supervisor_token_file"):
        expected = "(mode 0644): expected mode 0640 or stricter"
        assert any(f": {secret}: " in e and expected in e for e in errors)
    for f in (pin, token, key):
        f.chmod(0o600)
    pin.write_text("730519\n")
    token.write_text("x" * 40 + "\n")
    _, _, warnings = _check(tmp_path, text)
    # The shared void PIN without a supervisors file: attribution is by a typed name.
    [attribution] = [w for w in warnings if "paytables" not in w and "no-such-tty" not in w]
    assert ": display.supervisors_file: warning: not set: " in attribution
    assert "attributed to a name typed beside it, which nobody checks" in attribution
