"""What the table keeps across a restart (docs/audit.md, "Kept state"), in one room: its names in
the journal, :func:`load_kept` (read once at start and given to the ``Table`` and the services
as constructor arguments: the latched alarms — an unreadable one stays latched as what it is —
the occupied seats, the dealer signed in, game protection's watch), the alarms a start raises on
the record itself (a hash chain broken since the last verified row, kept state edited outside
the chain), and the savers the recorder calls inside the transaction of the event that changed
them. ``Transaction.remember`` chains every change as a ``state_kept`` event."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from pydantic import ValidationError

from controller.journal import Journal, JournalError, Transaction
from controller.messages import AlarmPayload
from controller.table import KeptTableState

log = structlog.get_logger(__name__)

SEATS_KEY = "occupied_seats"
LATCHED_KEY = "latched_alarms"
PROTECTION_KEY = "protection_state"
DEALER_KEY = "dealer_signed_in"
#: The House Way the table deals by (name and digest): a change is journaled at start.
HOUSE_WAY_KEY = "house_way"
#: The last chained row (id, link) a start verified: the next start checks from there (kept state,
#: chained: an edit of ``meta`` cannot move it forward).
CHAIN_VERIFIED_KEY = "chain_verified"


@dataclass(frozen=True)
class KeptState:
    """Everything kept across a restart, read once at start."""

    table: KeptTableState
    #: Game protection's saved watch (controller/services/protection.py reads it), or None.
    protection: Any = None


def load_kept(
    journal: Journal, clock: Callable[[], datetime], describe: Callable[[BaseException], str]
) -> KeptState:
    """The kept state, and the alarms the start raises on the record (latched with the rest)."""
    seats = journal.kept.remembered(SEATS_KEY)
    dealer = journal.kept.remembered(DEALER_KEY)
    return KeptState(
        table=KeptTableState(
            latched=tuple(latched_at_start(journal, clock, describe)),
            occupied=dict(seats) if isinstance(seats, dict) else {},
            dealer_id=dealer if isinstance(dealer, str) and dealer else None,
        ),
        protection=journal.kept.remembered(PROTECTION_KEY),
    )


def save_latched(tx: Transaction, latched: Mapping[str, AlarmPayload]) -> None:
    tx.remember(LATCHED_KEY, [a.model_dump(mode="json") for a in latched.values()])


def save_seats(tx: Transaction, occupied: Mapping[str, bool | None]) -> None:
    tx.remember(SEATS_KEY, dict(occupied))


def save_dealer(tx: Transaction, dealer_id: str | None) -> None:
    tx.remember(DEALER_KEY, dealer_id or "")


def save_protection(tx: Transaction, state: Mapping[str, Any]) -> None:
    tx.remember(PROTECTION_KEY, state)


def record_house_way(journal: Journal, name: str, digest: str) -> bool:
    """Journal a change of the House Way (``house_way_changed``, chained, with the way before
    and after) when the table starts with another way than it last dealt by. True if it
    changed."""
    now = {"name": name, "digest": digest}
    before = journal.kept.remembered(HOUSE_WAY_KEY)
    if before == now:
        return False
    with journal.transaction() as tx:
        tx.record_event("house_way_changed", {"before": before, "after": now})
        tx.remember(HOUSE_WAY_KEY, now)
    if before is None:  # a first start: the way is set, not changed
        log.info("house_way_set", way=now)
    else:
        log.warning("house_way_changed", before=before, after=now)
    return True


def latched_at_start(
    journal: Journal, clock: Callable[[], datetime], describe: Callable[[BaseException], str]
) -> list[AlarmPayload]:
    """The latched alarms the journal kept, and those the start itself raises on the record.
    The start's own alarms are journaled (an ``alarm`` event each) and latched in the chained
    record at once, like any other alarm: putting ``meta`` back and restarting does not erase
    them (issue 32, K1). One already latched with the same code and detail is not raised again."""

    def critical(code: str, detail: str) -> AlarmPayload:
        return AlarmPayload(
            code=code,
            severity="critical",
            detail=detail,
            alarm_id=f"alarm-{journal.new_round_id()}",
            raised_at=clock(),
            ack_required=True,
        )

    kept, unreadable = _kept_latched(journal)
    raised = [
        critical(
            "latched_alarm_unreadable",
            "a latched alarm kept in the journal could not be read: look at the journal "
            "(paigow-table audit recall) before acknowledging this",
        )
        for _ in range(unreadable)
    ]
    broken = _chain_since_last_start(journal, describe)
    if broken:
        raised.append(
            critical(
                "journal_chain_broken",
                f"the journal's hash chain is broken ({broken}): it was edited outside the "
                "table; run paigow-table audit verify",
            )
        )
    edited = journal.kept.edited()
    if edited:
        # meta is not chained: the table went by the chained record; someone edited meta.
        log.error("kept_state_edited", names=edited)
        raised.append(
            critical(
                "kept_state_edited",
                f"the journal's kept {', '.join(edited)} was edited outside the table; the "
                "table uses what its hash chain recorded (paigow-table audit verify names it)",
            )
        )
    seen = {(a.code, a.detail) for a in kept}
    new = [a for a in raised if (a.code, a.detail) not in seen]
    alarms = kept + new
    if new or unreadable:
        _journal_start_alarms(journal, new, alarms, describe)
    return alarms


def _kept_latched(journal: Journal) -> tuple[list[AlarmPayload], int]:
    """The latched alarms as the chained record holds them, and how many could not be read."""
    kept = journal.kept.remembered(LATCHED_KEY)
    alarms: list[AlarmPayload] = []
    unreadable = 0
    for record in kept if isinstance(kept, list) else ([] if kept is None else [kept]):
        try:
            alarms.append(AlarmPayload.model_validate(record))
        except ValidationError as exc:
            log.error("latched_alarm_unreadable", error=str(exc).splitlines()[0])
            unreadable += 1
    return alarms, unreadable


def _journal_start_alarms(
    journal: Journal,
    raised: list[AlarmPayload],
    latched: list[AlarmPayload],
    describe: Callable[[BaseException], str],
) -> None:
    """The start's alarms on the chained record: an ``alarm`` event each and the latched alarms
    (a ``state_kept`` event). A journal that refuses the write is the daemon's fault to find at
    its first event; the alarms are still latched in memory."""
    try:
        with journal.transaction() as tx:
            for alarm in raised:
                tx.record_event("alarm", alarm, alarm.round_id)
            save_latched(tx, {a.alarm_id: a for a in latched if a.alarm_id})
    except (sqlite3.Error, OSError, JournalError) as exc:
        log.error("start_alarms_not_journaled", error=describe(exc))


def _chain_since_last_start(journal: Journal, describe: Callable[[BaseException], str]) -> str:
    """The hash chain after the row the last start verified (so a big journal still starts in
    seconds): what is broken, or "". A break is found again at every start until mended."""
    if journal.path == ":memory:":
        return ""
    from controller.journal.audit import verify_chain_since
    from controller.journal.store import open_read_only

    # Chained kept state, never ``meta`` (issue 32, N11′): setting ``meta`` forward skips nothing.
    kept = journal.kept.chained(CHAIN_VERIFIED_KEY)
    start = (0, "")
    with contextlib.suppress(TypeError, ValueError):
        if isinstance(kept, list) and len(kept) == 2:
            start = (int(kept[0]), str(kept[1]))
    try:
        with contextlib.closing(open_read_only(journal.path)) as conn:
            head, findings = verify_chain_since(conn, start)
        if not findings:
            with journal.transaction() as tx:
                tx.remember(CHAIN_VERIFIED_KEY, list(head))
    except (sqlite3.Error, OSError) as exc:  # the journal's own checks report those
        log.error("chain_check_failed", error=describe(exc))
        return ""
    if not findings:
        return ""
    log.error("journal_chain_broken", findings=[f.line() for f in findings[:5]])
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    return f"{findings[0].line()}{more}"
