"""Software authentication (docs/audit.md): the installed program against its package's manifest,
and a keyed digest of it for a regulator's tool on demand (GAT-style).

The manifest is the wheel's ``RECORD`` (every installed file with its SHA-256), which pip writes
at install and the .deb ships. ``check_software`` re-hashes every listed file: a file changed or
missing since the install is a mismatch, and ``run`` refuses to deal. A development checkout
installed in editable mode has no hashes for its sources: it is reported as unverifiable, not as
a mismatch. ``authenticate`` returns HMAC-SHA256 keyed by the caller's nonce over every listed
file (its path, a NUL, its length in decimal, a NUL, its bytes) in sorted path order, so a tool
that knows the released files can check the table without trusting it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "paigow-table"


@dataclass(frozen=True, slots=True)
class SoftwareCheck:
    version: str
    editable: bool
    files: int
    mismatched: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    digest: str = ""  # SHA-256 over the sorted (path, file SHA-256) pairs: one id of the release

    @property
    def ok(self) -> bool:
        return not self.mismatched and not self.missing

    @property
    def verified(self) -> bool | None:
        """True: every file matches; False: something does not; None: cannot tell (editable)."""
        return None if self.editable else self.ok

    def summary(self) -> str:
        if self.editable:
            return f"paigow-table {self.version}: an editable (development) install; not verified"
        if self.ok:
            return f"paigow-table {self.version}: {self.files} files verified ({self.digest[:16]})"
        changed = [*self.mismatched, *(f"{m} (missing)" for m in self.missing)]
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return (
            f"paigow-table {self.version}: {len(changed)} installed file(s) differ from the "
            f"package: {', '.join(changed[:3])}{more}; the table will not start (reinstall it)"
        )


def _listed() -> tuple[metadata.Distribution, list[tuple[str, Path, str]]]:
    """(path as listed, file, expected SHA-256 hex) of every file RECORD gives a hash for."""
    dist = metadata.distribution(DISTRIBUTION)
    out = []
    for f in dist.files or []:
        if f.hash is None or f.hash.mode != "sha256":
            continue
        raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
        out.append((str(f), Path(str(f.locate())), raw.hex()))
    return dist, sorted(out)


def check_software() -> SoftwareCheck:
    """Re-hash every installed file the manifest lists."""
    try:
        dist, listed = _listed()
    except metadata.PackageNotFoundError:
        return SoftwareCheck("0.0.0+source", editable=True, files=0)
    # A development install: an editable one, or a source tree's metadata without hashes.
    editable = not listed or any(
        Path(str(f)).name.startswith("__editable__") for f in dist.files or []
    )
    mismatched, missing = [], []
    pairs = hashlib.sha256()
    for name, path, expected in listed:
        try:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            missing.append(name)
            continue
        if actual != expected:
            mismatched.append(name)
        pairs.update(f"{name}\0{actual}\n".encode())
    return SoftwareCheck(
        dist.version,
        editable,
        len(listed),
        tuple(mismatched),
        tuple(missing),
        pairs.hexdigest(),
    )


def authenticate(nonce: str) -> dict[str, object]:
    """HMAC-SHA256 keyed by ``nonce`` over every installed file (its listed path, a NUL, its
    length in decimal, a NUL, its bytes) in sorted path order, with the version and the number
    of files."""
    if not nonce:
        raise ValueError("the nonce must not be empty")
    dist, listed = _listed()
    mac = hmac.new(nonce.encode(), digestmod=hashlib.sha256)
    for name, path, _ in listed:
        data = path.read_bytes() if path.exists() else b""
        mac.update(f"{name}\0{len(data)}\0".encode() + data)
    return {
        "version": dist.version,
        "nonce": nonce,
        "files": len(listed),
        "hmac_sha256": mac.hexdigest(),
    }
