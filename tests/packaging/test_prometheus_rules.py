"""The alert rules shipped for IT's Prometheus (packaging/prometheus/): valid for Debian's
``promtool check rules``, their unit tests pass (``promtool test rules``), the unit tests bite
(a rule whose threshold is changed fails them), and every metric a rule reads is one the
table or the pit exports (a rule on a misspelt name would never fire)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.package  # Debian's promtool (make prometheus), not in `make check`

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "packaging" / "prometheus" / "paigow.rules.yml"
TESTS = ROOT / "packaging" / "prometheus" / "paigow.rules.test.yml"
DASHBOARD = ROOT / "packaging" / "grafana" / "paigow-floor.json"
EXPORTERS = [ROOT / "controller" / "metrics.py", ROOT / "pit" / "metrics.py"]


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is Debian's prometheus package: make prometheus"
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    checked = _promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    tested = _promtool("test", "rules", TESTS.name, cwd=TESTS.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "paigow_table_latched_alarm_oldest_seconds > 600",
            "paigow_table_latched_alarm_oldest_seconds > 6000",
        ),
        ('paigow_pit_tables{state="silent"} > 0', 'paigow_pit_tables{state="offline"} > 0'),
        (
            "paigow_table_device_up == 0\n        for: 2m",
            "paigow_table_device_up == 0\n        for: 5m",
        ),
    ],
)
def test_the_unit_tests_catch_a_rule_changed(tmp_path: Path, before: str, after: str) -> None:
    text = RULES.read_text(encoding="utf-8")
    assert before in text
    (tmp_path / RULES.name).write_text(text.replace(before, after), encoding="utf-8")
    shutil.copy(TESTS, tmp_path / TESTS.name)
    tested = _promtool("test", "rules", TESTS.name, cwd=tmp_path)
    assert tested.returncode != 0, "a changed rule passed the unit tests"


@pytest.mark.parametrize("path", [RULES, DASHBOARD], ids=["rules", "dashboard"])
def test_every_metric_a_rule_or_a_panel_reads_is_exported(path: Path) -> None:
    exported = "\n".join(p.read_text(encoding="utf-8") for p in EXPORTERS)
    read = set(re.findall(r"\b(paigow_[a-z_]+)", path.read_text(encoding="utf-8")))
    read.discard("paigow_floor")  # the dashboard's uid
    assert read
    missing = []
    for name in sorted(read):
        base = re.sub(r"_(total|bucket|count|sum)$", "", name)
        if f'"{base}"' not in exported and f'"{name}"' not in exported:
            missing.append(name)
    assert missing == [], f"{path.name} reads metrics nobody exports"


def test_the_dashboard_is_one_grafana_can_import() -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] and board["schemaVersion"] >= 36
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource"]
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
