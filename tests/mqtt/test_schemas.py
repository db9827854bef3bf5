"""The feed's JSON Schemas: the committed ones match the models, and `paigow-table schemas`
writes them and checks them."""

from __future__ import annotations

from pathlib import Path

from controller.cli import command_parser
from controller.schemas import generate, stale, write
from tests.mqtt.conftest import SCHEMAS


def test_committed_schemas_match_the_models() -> None:
    assert stale(SCHEMAS) == [], "run: paigow-table schemas --output docs/schemas"
    names = set(generate())
    assert {"paigow.round.v1.json", "paigow.status.v1.json", "reply.json"} <= names
    assert {f"command.{k}.json" for k in ("void_round", "enter_dice")} <= names


def test_schemas_command_writes_and_checks(tmp_path: Path) -> None:
    parser = command_parser()
    args = parser.parse_args(["schemas", "--output", str(tmp_path)])
    assert args.func(args) == 0
    assert stale(tmp_path) == []
    (tmp_path / "paigow.alarm.v1.json").write_text("{}")
    (tmp_path / "old.json").write_text("{}")
    check = parser.parse_args(["schemas", "--output", str(tmp_path), "--check"])
    assert check.func(check) == 1
    assert stale(tmp_path) == ["old.json", "paigow.alarm.v1.json"]
    write(tmp_path)
    assert stale(tmp_path) == [] and not (tmp_path / "old.json").exists()
