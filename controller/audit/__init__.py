"""The audit a regulator runs (docs/audit.md), above the journal and the table: the journal's
own checks (``controller/journal/audit.py``: the hash chain, the seals, kept state, round
numbers, the casino's copy of the feed, the recall) with every round decided by its cards dealt
again by the rules engine (``replay``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from controller.audit.replay import RulesReplay, recompute_round
from controller.game.way import Way
from controller.journal import audit as _journal_audit
from controller.journal.audit import AuditReport


def verify_journal(path: str | os.PathLike[str], ways: Sequence[Way] = ()) -> AuditReport:
    """``paigow-table audit verify``: the chain, the seals, and every round dealt again (by the
    House Way it was dealt by: a shipped one, or one of ``ways``)."""
    return _journal_audit.verify_journal(path, RulesReplay(ways))


__all__ = ["AuditReport", "RulesReplay", "recompute_round", "verify_journal"]
