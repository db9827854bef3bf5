"""The journal as a regulator reads it (docs/audit.md): ``verify`` checks its hash chain and
every round against its seal; ``recall`` gives rounds with everything journaled about them.

The chain (schema 3, controller/journal/store.py ``chain_link``): every event row carries the
SHA-256 of the link before it and its own row as stored, and every round's close is sealed by a
``round_sealed`` event holding its status, reason and the SHA-256 of its result. So an edited
event breaks its own link, a deleted or reordered one breaks the next link, and an edited round
row no longer matches its seal. Rows removed by retention are named by an ``archived`` event, so
the gap they leave is not reported. Everything is read-only.
"""

from __future__ import annotations

import bisect
import contextlib
import hmac
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from controller.clock import iso
from controller.journal.archive_file import read_archive
from controller.journal.checkpoints import sign_checkpoint
from controller.journal.store import (
    KEPT_STATE,
    MIN_RETENTION,
    chain_link,
    open_read_only,
    seal_of,
)
from controller.words import words

BATCH = 5_000


@dataclass(frozen=True, slots=True)
class Finding:
    """Something the audit found wrong: the round it concerns (if any) and the row."""

    detail: str
    round_id: str | None = None
    round_seq: int | None = None
    row: int | None = None

    def line(self) -> str:
        where = []
        if self.round_seq is not None:
            where.append(f"round #{self.round_seq}")
        if self.round_id is not None:
            where.append(self.round_id)
        if self.row is not None:
            where.append(f"event row {self.row}")
        return f"{' '.join(where) or 'journal'}: {self.detail}"


@dataclass
class AuditReport:
    path: str
    events: int = 0
    chained: int = 0
    unchained: int = 0  # written before the chain existed (schema < 3)
    anchors: int = 0  # links after rows an older retention removed: not checkable against them
    bridged: int = 0  # links after rows retention removed, checked against the link it kept
    rounds: int = 0
    archives: int = 0  # chained archived events checked (a prefix, old enough)
    sealed: int = 0
    recomputed: int = 0  # rounds dealt again from their device events, agreeing or not
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        verdict = "ok" if self.ok else f"{len(self.findings)} problem(s)"
        return (
            f"journal {self.path}: {verdict}; {self.chained} chained events checked"
            f" ({self.unchained} older unchained, {self.bridged} across archived rows, "
            f"{self.anchors} unchecked after rows an older version archived), "
            f"{self.sealed} of {self.rounds} rounds checked against their seals, "
            f"{self.recomputed} dealt again from their device events"
        )


_open = open_read_only


def _events(conn: sqlite3.Connection, after: int = 0) -> Iterator[tuple[Any, ...]]:
    last = after
    while True:
        rows = conn.execute(
            "SELECT id, round_id, at, kind, payload, chain FROM events WHERE id > ? "
            "ORDER BY id LIMIT ?",
            (last, BATCH),
        ).fetchall()
        if not rows:
            return
        yield from rows
        last = rows[-1][0]


@dataclass(frozen=True, slots=True)
class _Archived:
    """What the chained ``archived`` events say retention removed."""

    event_ids: list[tuple[int, int]] = field(default_factory=list)
    round_seqs: list[tuple[int, int]] = field(default_factory=list)
    links: dict[int, str] = field(default_factory=dict)  # last removed id of a run → its link
    legacy: bool = False  # an archived event from before round seqs and links were named
    #: Each chained ``archived`` event: its row, its time and what it says, in row order.
    records: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)


def _archived(conn: sqlite3.Connection) -> _Archived:
    """Only a chained ``archived`` event counts: one inserted without a link explains nothing
    (its own row is then a finding of the chain walk)."""
    found = _Archived()
    legacy = False
    for row, at, payload in conn.execute(
        "SELECT id, at, payload FROM events WHERE kind = 'archived' AND chain IS NOT NULL "
        "ORDER BY id"
    ):
        try:
            data = json.loads(payload)
            found.event_ids.extend((int(a), int(b)) for a, b in data.get("event_ids", []))
            found.round_seqs.extend((int(a), int(b)) for a, b in data.get("round_seqs", []))
            found.links.update({int(k): str(v) for k, v in data.get("links", {}).items()})
            legacy = legacy or "links" not in data
            found.records.append((int(row), str(at), data))
        except (ValueError, TypeError, AttributeError):
            continue  # an unreadable one explains no gap
    found.event_ids.sort()
    found.round_seqs.sort()
    return _Archived(found.event_ids, found.round_seqs, found.links, legacy, found.records)


def _check_archived(conn: sqlite3.Connection, archived: _Archived, report: AuditReport) -> None:
    """Retention removes only the oldest rounds, only old ones (issue 32): each chained
    ``archived`` event's rounds follow the rounds archived before it with no gap, come before
    every round still in the journal, and were opened before its cutoff, itself at least
    :data:`MIN_RETENTION` before the event. (Journals archived before round numbers were named
    are not held to the prefix.)"""
    if archived.legacy:
        return
    lowest = conn.execute("SELECT min(seq) FROM rounds").fetchone()[0]
    done = 0  # the last round number archived so far
    for row, at, data in archived.records:
        report.archives += 1
        for detail in _archived_problems(data, at, done, lowest):
            report.findings.append(Finding(f"an archived event {detail}", row=row))
        older = _older_than_kept(conn, data)
        if older:
            report.findings.append(Finding(f"an archived event {older}", row=row))
        seqs = [int(b) for _a, b in data.get("round_seqs", [])]
        done = max([done, *seqs])


def _older_than_kept(conn: sqlite3.Connection, data: dict[str, Any]) -> str:
    """An ``archived`` event's cut-off held to the journal's own times: the rows it removed came
    after every row still kept before them, so they cannot be older than those. A cut-off that
    is ("" if it is not; issue 39: a forged event claiming 2020 for rows written today)."""
    before = data.get("before")
    try:
        first = min(int(a) for a, _b in data.get("event_ids", []))
    except (ValueError, TypeError):
        return ""
    if not isinstance(before, str):
        return ""
    kept = conn.execute(
        "SELECT id, at FROM events WHERE id < ? ORDER BY at DESC LIMIT 1", (first,)
    ).fetchone()
    if kept is None or str(kept[1]) <= before:
        return ""
    return (
        f"claims its rows were older than {before}, but row {kept[0]}, kept and written before "
        f"them, is from {kept[1]}: the cut-off is not the journal's own time (forged?)"
    )


def _archived_problems(
    data: dict[str, Any], at: str, done: int, lowest: int | None
) -> Iterator[str]:
    """What is wrong with one ``archived`` event (``done``: the rounds archived before it run to
    this number; ``lowest``: the lowest round number still in the journal)."""
    before, newest = data.get("before"), data.get("newest_opened_at")
    if not isinstance(before, str):
        yield "names no cutoff: the age of the rounds it removed cannot be told"
    else:
        latest = datetime.fromisoformat(at.replace("Z", "+00:00")) - MIN_RETENTION
        if before > iso(latest):
            yield (
                f"removed rows younger than {MIN_RETENTION.days} day(s): its cutoff {before} "
                f"is later than {iso(latest)}"
            )
        if isinstance(newest, str) and newest >= before:
            yield f"removed a round opened at {newest}, not before its cutoff {before}"
    runs = sorted((int(a), int(b)) for a, b in data.get("round_seqs", []))
    expected = done + 1
    for first, last in runs:
        if first != expected:
            yield (
                f"removed rounds #{first}–#{last}, but round #{expected} came before them: "
                "retention removes only the oldest rounds (deleted from the middle?)"
            )
            break
        expected = last + 1
    if runs and lowest is not None and runs[-1][1] >= lowest:
        yield (
            f"removed rounds up to #{runs[-1][1]}, but round #{lowest} before them is still in "
            "the journal: retention removes only the oldest rounds (deleted from the middle)"
        )


def _covered(ranges: list[tuple[int, int]], first: int, last: int) -> bool:
    """Whether every id from ``first`` to ``last`` lies in the sorted ranges."""
    at = first
    for a, b in ranges:
        if a <= at <= b:
            at = b + 1
            if at > last:
                return True
    return at > last


@dataclass
class _Walk:
    seals: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    kept: dict[str, tuple[int, str]] = field(default_factory=dict)  # name → (row, JSON value)
    head: tuple[int, str] = (0, "")  # the last chained row and its link


def _walk_chain(
    conn: sqlite3.Connection,
    report: AuditReport,
    archived: _Archived,
    seq_of: dict[str, int],
    start: tuple[int, str] = (0, ""),
) -> _Walk:
    """Check every link after row ``start[0]`` (whose link is ``start[1]``), in id order."""
    walk = _Walk(head=start)
    prev_id: int | None = start[0] or None
    prev_link = start[1]
    began = bool(start[0])
    for event_id, round_id, at, kind, payload, link in _events(conn, start[0]):
        report.events += 1
        if link is None:
            report.unchained += 1
            if began:
                # Rows before the chain existed come first; one after it lost its link.
                report.findings.append(
                    Finding(
                        "its link is missing after the chain began: the chain was cut here "
                        "(links erased, or a row inserted)",
                        round_id,
                        seq_of.get(round_id),
                        event_id,
                    )
                )
            prev_id, prev_link = event_id, ""
            continue
        began = True
        report.chained += 1
        first_missing = (prev_id or 0) + 1
        gap = event_id != first_missing
        covered = gap and _covered(archived.event_ids, first_missing, event_id - 1)
        before = archived.links.get(event_id - 1) if covered else prev_link
        if covered and before is None:
            report.anchors += 1  # its link is to a row an older retention archived
        elif covered and link == chain_link(before or "", event_id, round_id, at, kind, payload):
            report.bridged += 1
        elif link != chain_link(before or "", event_id, round_id, at, kind, payload):
            detail = (
                f"the chain is broken before it: rows {first_missing}–{event_id - 1} were deleted"
                if gap and not covered
                else "its hash does not match its content: this row or the one before it "
                "was changed, or rows were reordered"
            )
            report.findings.append(Finding(detail, round_id, seq_of.get(round_id), event_id))
        if kind == "round_sealed" and round_id is not None:
            with contextlib.suppress(ValueError):
                walk.seals[round_id] = (event_id, json.loads(payload))
        elif kind == "state_kept":
            with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
                data = json.loads(payload)
                walk.kept[str(data["name"])] = (event_id, _canonical(data.get("value")))
        prev_id, prev_link = event_id, link
        walk.head = (event_id, link)
    return walk


def verify_chain_since(
    conn: sqlite3.Connection, start: tuple[int, str]
) -> tuple[tuple[int, str], list[Finding]]:
    """The chain after a point already verified (the table's check at every start): the new
    head and what is wrong after ``start``. A ``start`` row that is gone or changed is a
    finding too."""
    report = AuditReport("")
    if start[0]:
        row = conn.execute("SELECT chain FROM events WHERE id = ?", (start[0],)).fetchone()
        if row is None or row[0] != start[1]:
            report.findings.append(
                Finding(
                    "the row the last start verified is gone or changed: the journal was rewritten",
                    row=start[0],
                )
            )
            start = (0, "")
    archived = _archived(conn)
    seq_of = dict(conn.execute("SELECT round_id, seq FROM rounds"))
    walk = _walk_chain(conn, report, archived, seq_of, start)
    if report.events and not report.chained and not start[0]:
        report.findings.append(Finding("none of its events is chained: the links were erased"))
    return walk.head, report.findings


class Replay(Protocol):
    """Deals a round again from its journaled device events (``controller/audit``: the rules
    engine, which the journal does not import)."""

    def applies(self, recorded: dict[str, Any]) -> bool:
        """Whether the round was decided by its cards and draw alone (so it can be re-dealt)."""
        ...

    def differs(self, recorded: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> str:
        """ "" when the round dealt again agrees with ``recorded``, else the first field that
        differs. ``events``: the round's rows (kind, payload), after the chained record of the
        dealer signed in before its first row (``state_kept``), if any."""
        ...


def verify_journal(path: str | os.PathLike[str], replay: Replay | None = None) -> AuditReport:
    """Check the hash chain of every event and every closed round against its seal; with
    ``replay`` (``controller.audit.verify_journal`` gives the rules engine's), deal every round
    decided by its cards alone again and compare."""
    report = AuditReport(os.fspath(path))
    with contextlib.closing(_open(path)) as conn:
        columns = {c[1] for c in conn.execute("PRAGMA table_info(events)")}
        if "chain" not in columns:
            report.findings.append(Finding("the journal has no hash chain (schema before 3)"))
            return report
        archived = _archived(conn)
        seq_of = dict(conn.execute("SELECT round_id, seq FROM rounds"))
        walk = _walk_chain(conn, report, archived, seq_of)
        if report.events and not report.chained:
            report.findings.append(
                Finding(
                    f"none of its {report.events} events is chained, yet its schema chains "
                    "every event: the links were erased"
                )
            )
        _check_kept_state(conn, walk.kept, report)
        _check_round_seqs(conn, archived, report)
        _check_archived(conn, archived, report)
        dealers = _Dealers(conn)
        for round_id, seq, status, reason, result in conn.execute(
            "SELECT round_id, seq, status, reason, result FROM rounds ORDER BY seq"
        ):
            report.rounds += 1
            if status != "open":
                sealed = (round_id, seq, status, reason, result)
                _check_closed_round(conn, report, walk.seals, sealed, replay, dealers)
    return report


class _Dealers:
    """The chained records of the dealer signed in (``state_kept`` rows), by row: what the
    floor gave a round of a journal from before each round journaled its own
    (``round_opened``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        rows = conn.execute(
            "SELECT id, payload FROM events WHERE kind = 'state_kept' AND chain IS NOT NULL "
            "AND json_extract(payload, '$.name') = 'dealer_signed_in' ORDER BY id"
        ).fetchall()
        self.ids = [int(r[0]) for r in rows]
        self.payloads = [str(r[1]) for r in rows]

    def before(self, row: int) -> list[tuple[str, dict[str, Any]]]:
        """The last record before ``row``, as an event the replay reads ([] if none)."""
        at = bisect.bisect_left(self.ids, row)
        return [("state_kept", json.loads(self.payloads[at - 1]))] if at else []


def _check_closed_round(
    conn: sqlite3.Connection,
    report: AuditReport,
    seals: dict[str, tuple[int, dict[str, Any]]],
    closed: tuple[str, int, str, str | None, str | None],
    replay: Replay | None,
    dealers: _Dealers,
) -> None:
    """A closed round's row against its seal (``seals``: the ``round_sealed`` event of each
    round, with its row), then, for one decided by its cards alone, against its device events."""
    round_id, seq, status, reason, result = closed
    sealed = seals.get(round_id)
    if sealed is None:
        chained = conn.execute(
            "SELECT 1 FROM events WHERE round_id = ? AND chain IS NOT NULL LIMIT 1",
            (round_id,),
        ).fetchone()
        if chained:
            report.findings.append(Finding("closed, but its seal is missing", round_id, seq))
        return
    report.sealed += 1
    row, seal = sealed
    if seal != seal_of(round_id, status, reason, result):
        what = [
            name for name, now in (("status", status), ("reason", reason)) if seal.get(name) != now
        ]
        if seal != seal_of(round_id, seal.get("status", ""), seal.get("reason"), result):
            what.append("result")
        report.findings.append(
            Finding(
                f"its {', '.join(what) or 'row'} differs from what was sealed when it "
                "closed: the journal was edited",
                round_id,
                seq,
                row,
            )
        )
    if result is None or status not in ("settled", "dead", "misdeal") or replay is None:
        return
    _check_recomputed(conn, report, (round_id, seq, result), replay, dealers)


def _check_recomputed(
    conn: sqlite3.Connection,
    report: AuditReport,
    closed: tuple[str, int, str],
    replay: Replay,
    dealers: _Dealers,
) -> None:
    """A round decided by its cards and draw alone, dealt again from its device events
    (``replay``), must come out as it was recorded."""
    round_id, seq, result = closed
    try:
        recorded = json.loads(result)
        decided_by_cards = replay.applies(recorded)
    except (ValueError, AttributeError, TypeError):
        report.findings.append(Finding("its result is not a round", round_id, seq))
        return
    if not decided_by_cards:
        return  # decided by something besides its cards (a timeout, a new deal, …)
    rows = conn.execute(
        "SELECT id, kind, payload FROM events WHERE round_id = ? ORDER BY id", (round_id,)
    ).fetchall()
    events = dealers.before(int(rows[0][0])) if rows else []
    events += [(kind, json.loads(payload)) for _id, kind, payload in rows]
    report.recomputed += 1
    try:
        differs = replay.differs(recorded, events)
    except (ValueError, KeyError, TypeError) as exc:  # a field edited out of shape
        differs = f"result, which cannot be read back ({type(exc).__name__}: {exc})"
    if differs:
        report.findings.append(
            Finding(
                f"dealt again from its device events by the rules engine, its "
                f"{differs!r} differs from what was recorded and sent",
                round_id,
                seq,
            )
        )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _check_kept_state(
    conn: sqlite3.Connection, kept: dict[str, tuple[int, str]], report: AuditReport
) -> None:
    """The table's kept state (latched alarms, seats, the dealer, game protection) as ``meta``
    holds it must be what its last chained ``state_kept`` event recorded: ``meta`` is not
    chained, so an edit there is found here."""
    for key, value in conn.execute("SELECT key, value FROM meta"):
        name, _, _table = str(key).rpartition("/")
        if name not in KEPT_STATE:
            continue
        recorded = kept.get(name)
        try:
            now = _canonical(json.loads(value))
        except ValueError:
            now = f"unreadable {value[:40]!r}"
        if recorded is None:
            if kept:  # a journal that records its kept state recorded every name it keeps
                report.findings.append(
                    Finding(f"its kept state {name!r} has no chained record: written outside it")
                )
        elif recorded[1] != now:
            report.findings.append(
                Finding(
                    f"its kept state {name!r} differs from what was last recorded in the chain "
                    "(meta was edited)",
                    row=recorded[0],
                )
            )


def _check_round_seqs(conn: sqlite3.Connection, archived: _Archived, report: AuditReport) -> None:
    """Round numbers run on without a gap, except across rounds retention archived."""
    seqs = [int(s) for (s,) in conn.execute("SELECT seq FROM rounds ORDER BY seq")]
    if not seqs:
        return
    # Before round seqs were named, retention removed the oldest rounds: a gap before the first.
    expected = seqs[0] if archived.legacy else 1
    for seq in seqs:
        if seq > expected and not _covered(archived.round_seqs, expected, seq - 1):
            report.findings.append(
                Finding(
                    f"rounds #{expected}–#{seq - 1} are missing and no archive names them: deleted",
                    round_seq=seq,
                )
            )
        expected = seq + 1


# --- an archive against the journal's record of it ---------------------------------------------


def _file_sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _naming_event(archived: _Archived, path: Path) -> tuple[int, dict[str, Any]] | None:
    """The chained ``archived`` event that names this file (its name and SHA-256), if any."""
    digest = ""
    for row, _at, data in archived.records:
        if data.get("archive") == path.name:
            digest = digest or _file_sha256(path)
            if data.get("sha256") == digest:
                return row, data
    return None


def _archive_differs(data: dict[str, Any], items: list[dict[str, Any]]) -> str:
    """How an archive file's contents differ from the ``archived`` event that names it ("")."""
    rounds = [i for i in items if i.get("type") == "round"]
    ids = [int(e["id"]) for r in rounds for e in r.get("events", [])]
    ids += [int(i["id"]) for i in items if i.get("type") == "event"]
    seqs = sorted(int(r["seq"]) for r in rounds)
    named_seqs = [n for a, b in data.get("round_seqs", []) for n in range(int(a), int(b) + 1)]
    named_ids = [n for a, b in data.get("event_ids", []) for n in range(int(a), int(b) + 1)]
    if seqs != named_seqs:
        return "its rounds are not the rounds the journal's archived event removed"
    if sorted(ids) != named_ids:
        return "its events are not the rows the journal's archived event removed"
    before = str(data.get("before", ""))
    young = [str(r["opened_at"]) for r in rounds if str(r["opened_at"]) >= before]
    young += [str(i["at"]) for i in items if i.get("type") == "event" and str(i["at"]) >= before]
    if young:
        return f"it holds rows from {min(young)}, not before the cutoff {before}"
    return ""


def check_archive(
    journal: str | os.PathLike[str], path: str | os.PathLike[str], key: bytes | None = None
) -> tuple[bool, str]:
    """An archive file against the journal it was archived from (``journal verify-archive
    --journal``): the file verifies, a chained ``archived`` event names it by name and SHA-256,
    and it holds exactly the rounds and rows that event removed, all older than its cutoff."""
    ok, line, items = read_archive(path, key)
    if not ok:
        return False, line
    name = Path(path).name
    try:
        with contextlib.closing(_open(journal)) as conn:
            named = _naming_event(_archived(conn), Path(path))
    except (sqlite3.Error, OSError) as exc:
        return False, f"{name}: the journal {journal} cannot be read: {exc}"
    if named is None:
        return False, f"{name}: no archived event of the journal names this file (and its SHA-256)"
    differs = _archive_differs(named[1], items)
    if differs:
        return False, f"{name}: {differs} (event row {named[0]})"
    return True, f"{line}; the journal's archived event row {named[0]} names it and its rows"


def _held_in_archives(
    conn: sqlite3.Connection, archived: _Archived, archives: list[Path]
) -> dict[str, dict[str, Any]]:
    """The rounds held by the given archive files (directories: their ``*.jsonl.gz``) that
    verify and that a chained ``archived`` event names with their contents, by round id."""
    files = [f for a in archives for f in (sorted(a.glob("*.jsonl.gz")) if a.is_dir() else [a])]
    held: dict[str, dict[str, Any]] = {}
    for file in files:
        ok, _line, items = read_archive(file)
        named = _naming_event(archived, file) if ok else None
        if named is None or _archive_differs(named[1], items):
            continue
        held.update({str(i["round_id"]): i for i in items if i.get("type") == "round"})
    return held


# --- the casino's copy of the feed ------------------------------------------------------------


@dataclass
class FeedReport:
    rounds: int = 0  # rounds the feed holds, checked against the journal
    archived: int = 0  # of them, rounds the journal calls archived that no archive given holds
    checkpoints: int = 0
    unsigned: int = 0  # checkpoints compared without checking their HMAC (no key given)
    findings: list[Finding] = field(default_factory=list)

    def summary(self, path: str) -> str:
        verdict = "ok" if not self.findings else f"{len(self.findings)} problem(s)"
        return (
            f"feed {path}: {verdict}; {self.rounds} rounds and {self.checkpoints} checkpoints "
            f"(of them {self.unsigned} without their signature checked) against the journal"
        )


def read_feed(lines: Iterator[str] | list[str]) -> Iterator[dict[str, Any]]:
    """Messages as the casino kept them: ``monitor --json`` lines (``{"topic", "payload"}``) or
    the envelopes themselves, one JSON object a line (each with its line number as ``_line``);
    anything else is skipped."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("payload"), dict):
            inner = record["payload"]
            yield {**(inner if "schema" in inner else record), "_line": number}


def verify_feed(
    path: str | os.PathLike[str],
    messages: Iterator[dict[str, Any]],
    key: bytes | None = None,
    archives: list[Path] | None = None,
) -> FeedReport:
    """The journal against the casino's copy of the table's feed: every round the table sent
    must be in the journal as it was last sent (a deleted round, a rewritten one and a cut tail
    are found: the copy is outside the table's reach) or, if retention archived it, in one of
    the ``archives`` (files or directories) that the journal's chained ``archived`` event names,
    as it was sent; every checkpoint in it must match the chain (and its HMAC, with ``key``)."""
    report = FeedReport()
    last_sent: dict[str, tuple[int, dict[str, Any]]] = {}
    checkpoints: list[dict[str, Any]] = []
    for message in messages:
        schema, body = message.get("schema"), message.get("payload")
        if not isinstance(body, dict):
            continue
        if schema == "paigow.round" and isinstance(body.get("round_id"), str):
            msg_seq = message.get("seq") or 0
            if not isinstance(msg_seq, int) or isinstance(msg_seq, bool):
                where = f"line {message.get('_line', '?')}"
                report.findings.append(Finding(f"{where} of the feed is not a message: no seq"))
                continue
            if body["round_id"] not in last_sent or msg_seq >= last_sent[body["round_id"]][0]:
                last_sent[body["round_id"]] = (msg_seq, body)
        elif schema == "paigow.checkpoint":
            checkpoints.append(body)
    with contextlib.closing(_open(path)) as conn:
        archived = _archived(conn)
        held = _held_in_archives(conn, archived, archives or [])
        for _, sent in sorted(last_sent.values(), key=lambda r: r[1].get("round_seq", 0)):
            report.rounds += 1
            _check_sent_round(conn, archived, sent, report, held)
        for body in checkpoints:
            report.checkpoints += 1
            _check_sent_checkpoint(conn, archived, body, key, report)
    return report


def _check_sent_round(
    conn: sqlite3.Connection,
    archived: _Archived,
    sent: dict[str, Any],
    report: FeedReport,
    held: dict[str, dict[str, Any]],
) -> None:
    """A round as the table last sent it against the journal's row (or, for a round the
    journal says it archived, against the archive that holds it)."""
    round_id, round_seq = str(sent["round_id"]), sent.get("round_seq")
    row = conn.execute(
        "SELECT status, result FROM rounds WHERE round_id = ?", (round_id,)
    ).fetchone()
    if row is None and round_id in held:
        row = (held[round_id].get("status"), json.dumps(held[round_id].get("result")))
    elif row is None:
        if isinstance(round_seq, int) and _covered(archived.round_seqs, round_seq, round_seq):
            report.archived += 1
            report.findings.append(
                Finding(
                    "the journal says retention archived it, but no archive given holds it "
                    "as the table sent it (give the archive files: --archives)",
                    round_id,
                    round_seq,
                )
            )
            return
        report.findings.append(
            Finding(
                f"the table sent it as {sent.get('status')}, but the journal does not hold it: "
                "deleted, or the journal's tail was cut",
                round_id,
                round_seq,
            )
        )
        return
    try:
        stored = json.loads(row[1]) if row[1] is not None else None
    except ValueError:
        stored = None
    if row[0] != sent.get("status") or stored != sent:
        report.findings.append(
            Finding(
                f"the journal holds it as {row[0]}, not as the table sent it "
                f"({sent.get('status')}): the journal was rewritten",
                round_id,
                round_seq,
            )
        )


def _check_sent_checkpoint(
    conn: sqlite3.Connection,
    archived: _Archived,
    body: dict[str, Any],
    key: bytes | None,
    report: FeedReport,
) -> None:
    """A checkpoint the table sent against the chain at its row (and its HMAC, with a key)."""
    try:
        event_id = int(body["event_id"])
        if key is None:
            report.unsigned += 1
        elif not hmac.compare_digest(
            str(body.get("hmac", "")).encode(), sign_checkpoint(key, body).encode()
        ):
            report.findings.append(
                Finding("a checkpoint's HMAC is wrong: not the table's", row=event_id)
            )
            return
        found = conn.execute("SELECT chain FROM events WHERE id = ?", (event_id,)).fetchone()
    except (KeyError, ValueError, TypeError):
        report.findings.append(Finding("a checkpoint in the feed cannot be read"))
        return
    if found is None and _covered(archived.event_ids, event_id, event_id):
        return
    if found is None or found[0] != body.get("chain"):
        report.findings.append(
            Finding(
                f"the chain at this row differs from the checkpoint the table sent at "
                f"{body.get('made_at')}: the journal was rewritten or cut after it",
                row=event_id,
            )
        )


# --- recall ------------------------------------------------------------------------------------


def recall_rounds(
    path: str | os.PathLike[str],
    *,
    last: int | None = 10,
    round_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> list[dict[str, Any]]:
    """Rounds as a regulator reads them: the round row, its result, every event of it (ticks
    left out), oldest first. By id, by opening time (``since``/``until``, ISO), or the last N."""
    with contextlib.closing(_open(path)) as conn:
        query = "SELECT round_id, table_id, seq, opened_at, closed_at, status, reason, result "
        if round_id is not None:
            rows = conn.execute(query + "FROM rounds WHERE round_id = ?", (round_id,)).fetchall()
        elif since is not None or until is not None:
            rows = conn.execute(
                query + "FROM rounds WHERE opened_at >= ? AND opened_at < ? ORDER BY seq",
                (since or "", until or "9999"),
            ).fetchall()
        else:
            rows = conn.execute(
                query + "FROM rounds ORDER BY seq DESC LIMIT ?", (last or 10,)
            ).fetchall()[::-1]
        out = []
        for rid, table_id, seq, opened, closed, status, reason, result in rows:
            events = [
                {"id": e[0], "at": e[1], "kind": e[2], "payload": json.loads(e[3])}
                for e in conn.execute(
                    "SELECT id, at, kind, payload FROM events WHERE round_id = ? "
                    "AND kind != 'tick' ORDER BY id",
                    (rid,),
                )
            ]
            out.append(
                {
                    "round_id": rid,
                    "table_id": table_id,
                    "round_seq": seq,
                    "opened_at": opened,
                    "closed_at": closed,
                    "status": status,
                    "reason": reason,
                    "result": None if result is None else json.loads(result),
                    "events": events,
                }
            )
    return out


def _side(out: dict[str, Any] | None) -> str:
    """A side wager as a person reads it: "three of a kind: pays 5 to 1", "loses", "push" (a
    losing or pushing line is not named: "lose: loses" said nothing)."""
    if not out:
        return "-"
    pays = out.get("pays")
    win = f" ({out['win']:+})" if out.get("win") is not None else ""
    if not isinstance(pays, int) or pays <= 0:
        return ("push" if pays == 0 else "loses") + win
    return f"{words(str(out.get('line', '')))}: pays {pays} to 1{win}"


def _packet_of(p: dict[str, Any]) -> str:
    """Whose a dealt packet was: "seat 2 · packet 3", "dealer · packet 1", "packet 4" (a dead
    deal with no first position: no seat had it)."""
    seat = str(p.get("seat", ""))
    who = "" if seat.startswith("packet") else "dealer" if seat == "dealer" else f"seat {seat}"
    packet = f"packet {p['packet']}" if p.get("packet") else ""
    return " · ".join(x for x in (who, packet) if x) or seat


def recall_text(rounds: list[dict[str, Any]]) -> Iterator[str]:
    """The recalled rounds for a person, one block each."""
    for r in rounds:
        res = r["result"] or {}
        yield (
            f"Round #{r['round_seq']}  {r['round_id']}  {r['status'].upper()}"
            + (f" ({r['reason']})" if r["reason"] else "")
            + f"  opened {r['opened_at']}  closed {r['closed_at'] or '-'}"
        )
        yield from _deal_lines(res)
        yield from _outcome_lines(res)
        for e in r["events"]:
            if e["kind"] in ("packet_dealt", "round_sealed", "deal_seen"):
                continue
            yield _event_line(e)
        yield ""


def _deal_lines(res: dict[str, Any]) -> Iterator[str]:
    """How a recalled round was dealt: the first position, the shuffle, the dealer, the cards
    of each position."""
    draw = res.get("first_position")
    if draw:
        how = draw.get("dice") or draw.get("number")
        yield f"  first position: {words(draw['method'])} {how} → position {draw['position']}"
    if res.get("shuffle_id"):
        yield f"  shuffle {res['shuffle_id']} from {res.get('card_source', '')}"
    if res.get("dealer_id"):
        yield f"  dealt by {res['dealer_id']}"
    for p in res.get("positions", []):
        yield f"  position {p['position']} ({_packet_of(p)}): " + " ".join(p["cards"])


def _outcome_lines(res: dict[str, Any]) -> Iterator[str]:
    """How a recalled round came out: the dealer's setting, each seat's hand and side wagers,
    the reasons."""
    dealer = res.get("dealer")
    if dealer:
        setting = dealer.get("setting")
        if dealer.get("two_jacks"):
            yield "  dealer: two Jacks — every Pai Gow wager loses"
        elif setting:
            yield (
                f"  dealer sets {' '.join(setting['front'])} | {' '.join(setting['back'])}"
                f"  (House Way {setting['rule']}: {setting['front_hand']} / "
                f"{setting['back_hand']})"
            )
    for seat in res.get("seats", []):
        yield (
            f"  seat {seat['seat']}: {' '.join(seat['cards'])} ({seat['best_hand']}); "
            f"Chan Chu {_side(seat.get('chan_chu'))}; Jacks Beat "
            f"{_side(seat.get('jacks_beat'))}; Ace High {_side(seat.get('push_ace_high'))}"
        )
    for reason in res.get("reasons", []):
        yield f"  reason: {words(str(reason.get('code')))}: {reason.get('detail')}"


def _event_line(e: dict[str, Any]) -> str:
    """One recalled event: its time, its kind, and what it says (who asked, and the outcome)."""
    p = e["payload"]
    text = p.get("detail") or p.get("code") or p.get("reason") or ""
    if e["kind"] == "player_settled":
        text = f"seat {p.get('seat')} {p.get('setting_id', '')}" + (
            f" corrects {p['corrects']}" if p.get("corrects") else ""
        )
    origin = p.get("origin") if isinstance(p.get("origin"), dict) else None
    if origin:
        outcome = p.get("outcome") or {}
        verdict = "ok" if outcome.get("ok") else f"refused: {outcome.get('error')}"
        text = f"{text} by {origin['channel']} {origin['identity']} ({verdict})".strip()
    return f"  {e['at']}  {e['kind']}  {text}".rstrip()
