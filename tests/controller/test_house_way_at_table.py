"""A table dealing by a House Way file (issue 23; docs/house-way.md, "At the table"): the way is
named in the status, in authenticate's answer and in every round, a change of way is journaled,
audit verify deals each round again by the way that round used, and a way file that has not
passed its full check is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from controller.audit import verify_journal
from controller.config_check import check_config
from controller.game.way import load_way, shipped_ways
from controller.game.way.proof import proof_path, write_proof
from controller.messages import Authenticate
from simulators import demo
from tests.harness import running_table


def _dealt_by(monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    rules = 'wheel_rank = "second_highest"\n'
    monkeypatch.setattr(
        demo, "DEMO_CONFIG", demo.DEMO_CONFIG.replace(rules, rules + f'house_way = "{way}"\n')
    )


async def test_a_classic_table_deals_journals_and_audits_by_its_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "journal.sqlite3"
    classic = load_way("classic")
    _dealt_by(monkeypatch, "classic")
    async with running_table(tmp_path / "a", journal_path=journal, seed=5) as t:
        status = t.daemon.table.status()
        assert (status.house_way, status.house_way_digest) == ("classic", classic.digest)
        reply = await t.daemon.submit(Authenticate(nonce="nonce-0001"))
        assert reply.ok and reply.data is not None
        assert reply.data["house_way"] == "classic"
        assert reply.data["house_way_digest"] == classic.digest
        rounds = [await t.deal(rng_number=n) for n in (1, 4, 6)]
    for r in rounds:
        assert r.rules["house_way"] == "classic"
        assert r.rules["house_way_digest"] == classic.digest
        if r.dealer is not None and r.dealer.setting is not None:
            assert (r.dealer.setting.rule or "").startswith("CL-")  # classic's rule ids
    # The same journal, dealt on by the filed way: the change is on the record.
    monkeypatch.undo()
    _dealt_by(monkeypatch, "dealer-open")
    async with running_table(tmp_path / "b", journal_path=journal, seed=6) as t:
        later = await t.deal(rng_number=2)
    assert later.rules["house_way"] == "dealer-open"
    with sqlite3.connect(journal) as conn:
        changes = [
            json.loads(p)
            for (p,) in conn.execute("SELECT payload FROM events WHERE kind = 'house_way_changed'")
        ]
    assert [c["after"]["name"] for c in changes] == ["classic", "dealer-open"]
    assert changes[1]["before"] == {"name": "classic", "digest": classic.digest}
    # Each round dealt again by the way it was dealt by: the classic rounds by classic.
    report = verify_journal(journal)
    assert report.ok, [f.line() for f in report.findings]
    assert report.recomputed == 4


async def test_the_way_a_round_was_dealt_by_cannot_be_rewritten_unseen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The way is part of the round's sealed result: a journal edited to say its rounds were
    dealt by another way is caught by the seals."""
    journal = tmp_path / "journal.sqlite3"
    _dealt_by(monkeypatch, "classic")
    async with running_table(tmp_path / "a", journal_path=journal, seed=5) as t:
        for n in range(1, 8):
            await t.deal(rng_number=n)
    assert verify_journal(journal).ok
    with sqlite3.connect(journal) as conn:
        rows = conn.execute(
            "SELECT round_id, result FROM rounds WHERE status = 'settled'"
        ).fetchall()
    dealt = {rid: json.loads(res) for rid, res in rows}
    # Swap the digest journaled with every round for the filed way's, as if dealt by it.
    filed = load_way("dealer-open")
    with sqlite3.connect(journal) as conn:
        for rid, res in dealt.items():
            res["rules"]["house_way"] = "dealer-open"
            res["rules"]["house_way_digest"] = filed.digest
            conn.execute(
                "UPDATE rounds SET result = ? WHERE round_id = ?",
                (json.dumps(res, separators=(",", ":")), rid),
            )
    findings = [f.line() for f in verify_journal(journal).findings]
    assert any("differs from what was sealed" in f for f in findings)  # the seal catches it


def _config_with_way(tmp_path: Path, way: str) -> Path:
    """The demo's config (its devices on ptys that need not exist to be checked) by ``way``."""
    rules = 'wheel_rank = "second_highest"\n'
    text = demo.DEMO_CONFIG.format(
        table="PG-T1",
        shuffler=tmp_path / "shuffler",
        rng=tmp_path / "rng",
        journal=tmp_path / "journal.sqlite3",
    ).replace(rules, rules + f'house_way = "{way}"\n')
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def _way_issues(path: Path) -> list[str]:
    return [
        f"{i.key}: {i.message}" for i in check_config(path).errors if i.key == "rules.house_way"
    ]


def test_a_way_file_is_dealt_only_after_its_full_check_passed(tmp_path: Path) -> None:
    way_file = tmp_path / "our-way.toml"
    text = shipped_ways()["classic"].read_text(encoding="utf-8")
    way_file.write_text(text.replace('name = "classic"', 'name = "our-way"'), encoding="utf-8")
    config = _config_with_way(tmp_path, "our-way.toml")  # relative to the config's directory
    [refused] = _way_issues(config)
    assert "has not passed its full check" in refused and "house-way check" in refused
    way = load_way(way_file)
    write_proof(way_file, way, hands=154_143_080, seconds=60.0)
    assert _way_issues(config) == []
    # Edited after its check: refused again, whatever the record says.
    way_file.write_text(way_file.read_text().replace("CL-", "CX-"))
    [edited] = _way_issues(config)
    assert "changed after its full check" in edited
    # A record that does not say it passed is no proof.
    proof_path(way_file).write_text('{"passed": false}')
    assert "does not say it passed" in _way_issues(config)[0]


def test_a_way_that_does_not_parse_or_exist_is_a_config_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "broken"\n[[rule]]\nid = 7\n')
    [issue] = _way_issues(_config_with_way(tmp_path, "broken.toml"))
    assert "broken.toml:" in issue  # the file and its line
    [missing] = _way_issues(_config_with_way(tmp_path, "nowhere.toml"))
    assert "dealer-open" in missing and "classic" in missing  # says what exists
    [bad_name] = [
        f"{i.key}: {i.message}"
        for i in check_config(_config_with_way(tmp_path, "Not A Way")).errors
        if "house_way" in i.key
    ]
    assert "shipped way's name" in bad_name


def test_a_way_file_of_bytes_that_are_not_text_is_a_config_error_not_a_crash(
    tmp_path: Path,
) -> None:
    planted = tmp_path / "planted.toml"
    planted.write_bytes(b'name = "ours"\n[[rule]]\nid = "\xff\xfe"\n')
    (tmp_path / "dir.toml").mkdir()
    [issue] = _way_issues(_config_with_way(tmp_path, "planted.toml"))
    assert "planted.toml:3" in issue and "UTF-8" in issue
    [directory] = _way_issues(_config_with_way(tmp_path, "dir.toml"))
    assert "cannot read" in directory
