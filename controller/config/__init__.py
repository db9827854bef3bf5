"""The table's configuration: one TOML file read into frozen pydantic models.

Every model forbids unknown keys and validates strictly (TOML has real types, so ``port = "1883"``
is an error, not a silent conversion). ``load_config`` turns every problem into a
:class:`ConfigIssue` naming the file, the dotted key and what was expected; the daemon refuses to
start on any of them (docs/architecture.md "Conventions"). ``controller.config_check``, above the
config and the drivers, is the one check `check-config` and `run` share (with the drivers and
the warnings).

Paths in the file are relative to the file's directory. When a file is loaded with
``load_config`` the files it references (password, token, PIN, TLS files) must exist and be
readable by the current user; models built in code (the demo, tests) skip that check.
``check_config`` (for `check-config` and `run`) also reads each one with the code the table
reads it with and refuses a secret others may read (``files.py``).

    issues.py   ConfigIssue, ConfigError, KeyedValueError, EXIT_CONFIG_ERROR
    fields.py   field types and their validators
    models.py   the sections and Config
    load.py     parse_config, load_config: TOML in, models or every issue out
    summary.py  a config in a few lines for a person
    files.py    every file the config names: read by its run-time reader, its mode checked
    (controller/config_check.py: check_config, the errors (drivers, files included) and warnings,
    for check-config and run; the config layer itself imports no driver)
"""

from controller.config.issues import (
    EXIT_CONFIG_ERROR,
    ConfigError,
    ConfigIssue,
    KeyedValueError,
)
from controller.config.load import load_config, parse_config
from controller.config.models import (
    AnyDevice,
    Config,
    DeviceConfig,
    DisplayConfig,
    JournalConfig,
    LoggingConfig,
    MqttConfig,
    PaytablesConfig,
    ReconnectConfig,
    RulesConfig,
    SerialDevice,
    SoftwareDevice,
    TableConfig,
    TcpDevice,
    TlsConfig,
    UsbDevice,
)
from controller.config.summary import summary

__all__ = [
    "EXIT_CONFIG_ERROR",
    "AnyDevice",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "DeviceConfig",
    "DisplayConfig",
    "JournalConfig",
    "KeyedValueError",
    "LoggingConfig",
    "MqttConfig",
    "PaytablesConfig",
    "ReconnectConfig",
    "RulesConfig",
    "SerialDevice",
    "SoftwareDevice",
    "TableConfig",
    "TcpDevice",
    "TlsConfig",
    "UsbDevice",
    "load_config",
    "parse_config",
    "summary",
]
