"""The archive file retention and ``audit export`` write (docs/journal.md): gzip JSON lines, a
header, the rounds with their events (and loose events), a trailer with the SHA-256 of every line
before it (and its HMAC for a signed export), a ``.sha256`` sidecar. Read here by both the
maintenance commands and the audit (which holds the journal's ``archived`` events to them)."""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

ARCHIVE_FORMAT = "paigow-journal-archive"
ARCHIVE_VERSION = 1


def trailer_mac(key: bytes, sha256_hex: str) -> str:
    return hmac.new(key, sha256_hex.encode("ascii"), hashlib.sha256).hexdigest()


def _archive_lines(p: Path) -> tuple[str | None, list[str]]:
    """(a problem, or None, and the lines) of an archive file: its sidecar's SHA-256 matched,
    unzipped and decoded, a header and a trailer at least."""
    try:
        data = p.read_bytes()
        sidecar = p.with_name(p.name + ".sha256")
        if sidecar.exists():
            want = sidecar.read_text(encoding="utf-8").split()[0]
            if hashlib.sha256(data).hexdigest() != want:
                return f"{p.name}: the file does not match its .sha256", []
        text = gzip.decompress(data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, IndexError) as exc:
        return f"{p.name}: unreadable: {exc}", []
    lines = text.splitlines(keepends=True)
    if len(lines) < 2:
        return f"{p.name}: no header and trailer", []
    return None, lines


def _signed_with(key: bytes, trailer: dict[str, Any]) -> bool:
    """Whether the trailer's HMAC is ``key``'s (compared as bytes: a planted non-ASCII value is
    a mismatch, not an error)."""
    given = str(trailer.get("hmac_sha256", "")).encode("utf-8", "surrogatepass")
    want = trailer_mac(key, str(trailer["sha256"])).encode("utf-8")
    return hmac.compare_digest(given, want)


def read_archive(
    path: str | os.PathLike[str], key: bytes | None = None
) -> tuple[bool, str, list[dict[str, Any]]]:
    """Check an archive file: its sidecar's SHA-256, the trailer's SHA-256 of the lines, the
    header's counts and, with ``key``, the trailer's signature. Returns (ok, one line, its
    lines between header and trailer — empty unless ok)."""
    p = Path(path)
    problem, lines = _archive_lines(p)
    if problem is not None:
        return False, problem, []
    try:
        trailer = json.loads(lines[-1])
        header = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        return False, f"{p.name}: not JSON lines: {exc}", []
    body = "".join(lines[:-1]).encode("utf-8")
    if (
        trailer.get("type") != "trailer"
        or trailer.get("sha256") != hashlib.sha256(body).hexdigest()
    ):
        return False, f"{p.name}: the lines do not match the trailer's SHA-256", []
    if header.get("format") != ARCHIVE_FORMAT:
        return False, f"{p.name}: not a {ARCHIVE_FORMAT} file", []
    signed = "hmac_sha256" in trailer
    if key is not None and not (signed and _signed_with(key, trailer)):
        return False, f"{p.name}: not signed with this key", []
    items = [json.loads(line) for line in lines[1:-1]]
    rounds = [i for i in items if i.get("type") == "round"]
    events = sum(len(r["events"]) for r in rounds) + sum(i.get("type") == "event" for i in items)
    if len(rounds) != header.get("rounds") or events != header.get("events"):
        return False, f"{p.name}: the counts do not match the header", []
    signature = (
        ", signature ok"
        if key is not None
        else ", signed (give the key to check the signature)"
        if signed
        else ""
    )
    return (
        True,
        (
            f"{p.name}: ok, table {header['table_id']}, {len(rounds)} rounds and {events} events "
            f"from {header['from']} to {header['to']}{signature}"
        ),
        items,
    )
