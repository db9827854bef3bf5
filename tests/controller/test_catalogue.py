"""docs/alarms.md is the catalogue of every alarm and round reason (controller/catalogue.py):
it fails here when the code raises an alarm or closes a round with a reason the catalogue does
not list, when the page is not what the catalogue renders, or when the schema's enum differs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from controller.catalogue import ALARM_CODES, REASONS, render
from controller.game.deal import DEAD_CODES, MISDEAL_CODES
from controller.messages import AlarmPayload

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "controller").rglob("*.py"))


def _found(pattern: str) -> set[str]:
    regex = re.compile(pattern, re.S)
    return {m for path in SOURCES for m in regex.findall(path.read_text(encoding="utf-8"))}


def test_every_alarm_the_code_raises_is_in_the_catalogue() -> None:
    raised = _found(r'_alarm\(\s*"([a-z_]+)"') | _found(r'AlarmPayload\(\s*code="([a-z_]+)"')
    raised |= _found(r'code = "([a-z_]+)" if ') | _found(
        r'code = "[a-z_]+" if [^\n]* else "([a-z_]+)"'
    )
    assert len(raised) >= 20
    assert raised - set(ALARM_CODES) == set(), "add them to controller/catalogue.py"
    assert len(set(ALARM_CODES)) == len(ALARM_CODES)


def test_every_round_reason_is_in_the_catalogue() -> None:
    given = _found(r'Problem\(\s*(?:code=)?"([a-z_]+)"') | _found(r'code="([a-z_]+)", detail=')
    given |= DEAD_CODES | MISDEAL_CODES | {"restart", "journal_fault", "deal_timeout"}
    assert given - set(REASONS) == set()
    for code in DEAD_CODES:
        assert REASONS[code][0] == "dead"
    for code in MISDEAL_CODES:
        assert REASONS[code][0] == "misdeal"


def test_docs_alarms_md_is_what_the_catalogue_renders() -> None:
    assert (REPO / "docs" / "alarms.md").read_text(encoding="utf-8") == render(), (
        "run: python -m controller.catalogue > docs/alarms.md"
    )


def test_the_alarm_schema_enumerates_the_codes_and_refuses_others() -> None:
    schema = json.loads((REPO / "docs/schemas/paigow.alarm.v1.json").read_text())
    code = schema["$defs"]["AlarmPayload"]["properties"]["code"]
    assert code["enum"] == list(ALARM_CODES)
    payload = AlarmPayload(code="deck_integrity", severity="critical", detail="x").model_dump(
        mode="json"
    )
    validator = jsonschema.Draft202012Validator(AlarmPayload.model_json_schema())
    validator.validate(payload)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**payload, "code": "something_new"})
