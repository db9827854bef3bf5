"""The docs match what exists (issue 26): every config key is in the commented example and every
key the docs or the example name exists; every MQTT topic, command and schema is in
docs/mqtt.md and every one docs/mqtt.md names exists. A renamed key, a new command or a stale
example fails here instead of misleading an operator."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
from pydantic import BaseModel

from controller.config.models import (
    Config,
    DisplayConfig,
    JournalConfig,
    LimitsConfig,
    LoggingConfig,
    MqttConfig,
    PaytablesConfig,
    ProtectionSettings,
    RulesConfig,
    TableConfig,
)
from controller.messages import COMMAND_KINDS, Payload

REPO = Path(__file__).resolve().parents[1]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
EXAMPLE = REPO / "config" / "table.example.toml"
SECTIONS: dict[str, type[BaseModel]] = {
    "table": TableConfig,
    "rules": RulesConfig,
    "paytables": PaytablesConfig,
    "mqtt": MqttConfig,
    "display": DisplayConfig,
    "journal": JournalConfig,
    "limits": LimitsConfig,
    "protection": ProtectionSettings,
    "logging": LoggingConfig,
}


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _example_keys() -> dict[str, set[str]]:
    """Keys the example sets, or shows commented out (``# key = …``), per section."""
    keys: dict[str, set[str]] = {}
    section = ""
    for line in _text(EXAMPLE).splitlines():
        head = re.match(r"^#?\s*\[([a-z_.]+)\]", line)
        if head:
            section = head.group(1)
            parent, _, child = section.rpartition(".")
            if parent:  # [table.seats] is the table's seats, [mqtt.tls] the mqtt's tls
                keys.setdefault(parent, set()).add(child)
            continue
        key = re.match(r"^#?\s*([a-z_]+)\s*=", line)
        if key and section:
            keys.setdefault(section, set()).add(key.group(1))
    return keys


def test_every_config_key_is_in_the_example_and_every_example_key_exists() -> None:
    example = _example_keys()
    for section, model in SECTIONS.items():
        fields = set(model.model_fields)
        shown = example.get(section, set())
        assert fields - shown == set(), f"[{section}] keys missing from {EXAMPLE.name}"
        assert shown - fields == set(), f"[{section}] keys in {EXAMPLE.name} that do not exist"
    assert set(Config.model_fields) <= set(SECTIONS) | {"devices"}
    # And the example, with its commented keys as it is, is a valid config.
    tomllib.loads(_text(EXAMPLE))


def test_every_config_key_the_docs_name_exists() -> None:
    named = {
        (m.group(1), m.group(2))
        for path in DOCS
        for m in re.finditer(r"`\[([a-z_.]+)\] ([a-z_]+)`", _text(path))
    }
    assert len(named) > 10
    for section, key in sorted(named):
        top = section.split(".")[0]
        assert top in SECTIONS, f"[{section}] {key}: no such section"
        if "." not in section:
            assert key in SECTIONS[top].model_fields, f"the docs name [{section}] {key}"


def _payloads() -> list[type[Payload]]:
    found: list[type[Payload]] = []
    todo: list[type[Payload]] = list(Payload.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in found if c.SCHEMA]


def test_every_topic_schema_and_command_is_in_docs_mqtt_and_every_one_it_names_exists() -> None:
    mqtt = _text(REPO / "docs" / "mqtt.md")
    payloads = _payloads()
    topics = {p.TOPIC for p in payloads} | {"dead", "cmd/", "reply/"}
    for topic in topics:
        assert f"<prefix>{topic}" in mqtt, f"topic <prefix>{topic} is not in docs/mqtt.md"
    named_topics = set(re.findall(r"`<prefix>([a-z_]+/?)", mqtt))
    assert named_topics - topics - {"cmd/", "reply/", "device/"} == set(), (
        "docs/mqtt.md names topics that do not exist"
    )
    schemas = {p.SCHEMA for p in payloads}
    for schema in schemas:
        assert f"`{schema}`" in mqtt or f"{schema}.v" in mqtt, f"{schema} not in docs/mqtt.md"
    named_schemas = set(re.findall(r"`(paigow\.[a-z_]+)`", mqtt))
    assert named_schemas - schemas == set(), "docs/mqtt.md names schemas that do not exist"
    files = {p.name for p in (REPO / "docs" / "schemas").glob("*.json")}
    for name in files:
        if name.startswith("command."):  # one line names them all: `command.<kind>.json`
            assert "command.<kind>.json" in mqtt and name[8:-5] in COMMAND_KINDS, name
        else:
            assert name in mqtt or name.split(".v")[0] in mqtt, f"{name} not in docs/mqtt.md"
    for kind in COMMAND_KINDS:
        assert f"`{kind}`" in mqtt, f"command {kind} is not in docs/mqtt.md"
    named_commands = set(re.findall(r"`<prefix>cmd/([a-z_]+)`", mqtt))
    assert named_commands - set(COMMAND_KINDS) == set()


def test_the_example_messages_in_docs_mqtt_validate_against_their_schemas() -> None:
    """A payload changed in the code and not in the docs fails here."""
    mqtt = _text(REPO / "docs" / "mqtt.md")
    checked = 0
    for block in re.findall(r"```json\n(.*?)```", mqtt, re.S):
        if "…" in block:
            continue  # an abbreviated shape, not a message
        example = json.loads(block)
        if not isinstance(example, dict):
            continue
        if "schema" in example:
            name = f"{example['schema']}.v{example.get('version', 1)}.json"
        elif {"ok", "error", "request_id", "data"} <= set(example):
            name = "reply.json"
        else:
            continue
        schema = json.loads(_text(REPO / "docs" / "schemas" / name))
        jsonschema.Draft202012Validator(schema).validate(example)
        checked += 1
    assert checked >= 10
