"""A way's proof on file (docs/house-way.md, "At the table"): when ``paigow-table house-way check
FILE`` passes, it writes beside the way a record (``FILE.proof.json``) with the way's digest, the
hands checked and when. A table refuses a way file without a passing record for its digest, so a
way whose full check was not passed — or was edited since — is never dealt. A shipped way is
proven by the test suite, over every hand.

What it does not protect against: the record is not a signature. Whoever can write the way file
can write a record beside it; it guards against dealing an unchecked or edited way by mistake,
and ``authenticate`` and every round carry the way's digest for the casino to compare with the
way it filed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

PROOF_SUFFIX = ".proof.json"


class _Way(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def digest(self) -> str: ...

    @property
    def shipped(self) -> bool: ...


def proof_path(way_file: str | Path) -> Path:
    path = Path(way_file)
    return path.with_name(path.name + PROOF_SUFFIX)


def write_proof(way_file: str | Path, way: _Way, hands: int, seconds: float) -> Path:
    """The record of a passed check, beside the way file."""
    target = proof_path(way_file)
    record = {
        "way": way.name,
        "digest": way.digest,
        "passed": True,
        "hands": hands,
        "seconds": round(seconds, 1),
        "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def proof_problem(way: _Way, way_file: str | Path | None) -> str | None:
    """Why the table must refuse ``way`` (a file way with no passing record for its digest), or
    None."""
    if way.shipped or way_file is None:
        return None
    path = proof_path(way_file)
    how = f"run `paigow-table house-way check {way_file}` (about a minute) before dealing it"
    try:
        record: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"the way {way.name!r} has not passed its full check: {how}"
    except (OSError, ValueError) as exc:
        return f"the way's check record {path} cannot be read ({exc}): {how}"
    if not isinstance(record, dict) or record.get("passed") is not True:
        return f"the way's check record {path} does not say it passed: {how}"
    if record.get("digest") != way.digest:
        return f"the way {way.name!r} was changed after its full check passed: {how}"
    return None
