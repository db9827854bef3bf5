"""Software authentication (docs/audit.md): everything that executes against a sealed manifest,
and a keyed digest of it for a regulator's tool on demand (GAT-style).

What executes is three trees, and the manifest covers all of them:

- ``venv/…``: the installation (``sys.prefix``): our code as Python loads it (``.py`` *and* the
  ``.pyc`` beside it: a ``.pyc`` compiled from an edited source and stamped with the original's
  mtime and size is loaded in place of the source), every dependency, every ``*.pth``, the
  scripts, ``pyvenv.cfg``;
- ``stdlib/…``: the interpreter's standard library (its own ``site-packages`` apart, which a
  virtualenv does not load);
- ``interpreter``: the interpreter's executable.

The manifest (``<prefix>/paigow-table.manifest``, one line per file or symbolic link with its
SHA-256 and size) is written once, by whoever installs: the .deb's build seals the venv it ships
(dpkg owns the manifest; the service user cannot write it), ``paigow-table software seal`` seals a
wheel installed with pip. ``check_software`` walks the three trees again: a file changed,
missing, or present but listed nowhere (a planted ``.pyc``, a ``.pth``) is a finding, and so is
a module loaded or a ``sys.path`` entry from outside them; ``run`` refuses to deal on any
(exit 70, naming the file). ``authenticate`` is HMAC-SHA256 keyed by the caller's nonce over what
is on disk now, every file and link of the three trees in path order, so any change, listed or
not, changes the answer. A development checkout installed in editable mode is reported as
unverifiable, not as a mismatch.

The environment cannot redirect it: :func:`seal` makes the installed commands start the
interpreter with ``-I`` (isolated: no ``PYTHON*`` variable — ``PYTHONPATH``, ``PYTHONHOME``,
``PYTHONPYCACHEPREFIX`` for bytecode kept elsewhere, ``PYTHONSTARTUP`` — no user site, no current
directory on the path, so no ``sitecustomize`` from there), and ``check_software`` and
``authenticate`` report a process that was started otherwise (a finding: ``run`` refuses).

What it cannot do: the check runs in the program it checks. Someone with root on the table
computer can change the checker and the manifest together; a regulator's tool that reads the
disk itself (or compares ``authenticate``'s answer with the one its own copy of the release
gives) is what catches that (docs/audit.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "paigow-table"
MANIFEST_NAME = "paigow-table.manifest"
MANIFEST_HEADER = "# paigow-table software manifest 2"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Entry:
    """One file (its SHA-256 and size) or symbolic link (its target) of the sealed trees."""

    path: str  # scoped: venv/…, stdlib/…, interpreter
    kind: str  # "file" | "link"
    digest: str  # a file's SHA-256 hex; a link's target
    size: int = 0

    def line(self) -> str:
        return f"{self.kind} {self.digest} {self.size} {self.path}"


@dataclass(frozen=True, slots=True)
class Trees:
    """Where the three sealed trees are on this computer."""

    prefix: Path
    stdlib: Path
    interpreter: Path

    @classmethod
    def current(cls, prefix: Path | None = None) -> Trees:
        return cls(
            prefix=Path(prefix or sys.prefix).absolute(),
            stdlib=Path(sysconfig.get_path("stdlib")).absolute(),
            interpreter=Path(os.path.realpath(sys.executable)),
        )

    @property
    def manifest(self) -> Path:
        return self.prefix / MANIFEST_NAME

    def holds(self, path: str | Path) -> bool:
        """Whether ``path`` lies in a sealed tree (the stdlib's own site-packages is not one), as
        written (a link in a tree: its target is hashed) or resolved (/usr/bin/paigow-table)."""
        return self._holds(Path(os.path.abspath(path))) or self._holds(Path(os.path.realpath(path)))

    def _holds(self, resolved: Path) -> bool:
        if resolved.is_relative_to(self.prefix) or resolved == self.interpreter:
            return True
        return resolved.is_relative_to(self.stdlib) and not _in_site_dir(
            resolved.relative_to(self.stdlib)
        )


def _in_site_dir(rel: Path) -> bool:
    return bool(rel.parts) and rel.parts[0] in {"site-packages", "dist-packages"}


def _sha256(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _walk(scope: str, root: Path, *, skip: frozenset[Path] = frozenset()) -> Iterator[Entry]:
    """Every file and symbolic link under ``root`` (links are not followed into)."""
    for top, dirs, files in os.walk(root, followlinks=False):
        here = Path(top)
        rel_top = here.relative_to(root)
        if scope == "stdlib" and _in_site_dir(rel_top):
            dirs.clear()
            continue
        names = list(files)
        for d in list(dirs):
            if (here / d).is_symlink():
                names.append(d)
                dirs.remove(d)
            elif scope == "stdlib" and rel_top == Path(".") and _in_site_dir(Path(d)):
                dirs.remove(d)
        for name in names:
            path = here / name
            if path in skip:
                continue
            yield _entry(f"{scope}/{(rel_top / name).as_posix()}", path)


def _entry(scoped: str, path: Path) -> Entry:
    """A file's SHA-256 and size; a link's SHA-256 over its target, a NUL and, when it leads to
    a file, that file's bytes (Debian's ``sitecustomize.py`` is a link into /etc)."""
    if not path.is_symlink():
        digest, size = _sha256(path)
        return Entry(scoped, "file", digest, size)
    content = path.read_bytes() if path.is_file() else b""
    digest = hashlib.sha256(os.readlink(path).encode() + b"\0" + content).hexdigest()
    return Entry(scoped, "link", digest, len(content))


def scan(trees: Trees) -> dict[str, Entry]:
    """What is on disk now, by scoped path (the manifest itself apart)."""
    entries: dict[str, Entry] = {}
    for entry in _walk("venv", trees.prefix, skip=frozenset({trees.manifest})):
        entries[entry.path] = entry
    for entry in _walk("stdlib", trees.stdlib):
        entries[entry.path] = entry
    entries["interpreter"] = _entry("interpreter", trees.interpreter)
    return entries


def render(entries: dict[str, Entry], trees: Trees, version: str) -> str:
    lines = [
        MANIFEST_HEADER,
        f"# version {version}",
        f"# stdlib {trees.stdlib}",
        f"# interpreter {trees.interpreter}",
        *(entries[p].line() for p in sorted(entries)),
    ]
    return "\n".join(lines) + "\n"


class ManifestError(ValueError):
    """The manifest is missing or unreadable."""


def parse(text: str) -> dict[str, Entry]:
    lines = text.splitlines()
    if not lines or lines[0] != MANIFEST_HEADER:
        raise ManifestError(f"not a software manifest (first line is not {MANIFEST_HEADER!r})")
    entries: dict[str, Entry] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line or line.startswith("#"):
            continue
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] not in {"file", "link"} or not parts[2].isdigit():
            raise ManifestError(f"line {number}: expected 'file|link DIGEST SIZE PATH'")
        kind, digest, size, path = parts
        entries[path] = Entry(path, kind, digest, int(size))
    return entries


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0.0.0+source"


def _editable() -> bool:
    """A development install: editable, or a source tree never installed."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return True
    if any(Path(str(f)).name.startswith("__editable__") for f in dist.files or []):
        return True
    # A source tree's own metadata (an egg-info found through the working directory).
    if not Path(str(dist.locate_file(""))).absolute().is_relative_to(Path(sys.prefix).absolute()):
        return True
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    return bool(isinstance(direct, dict) and direct.get("dir_info", {}).get("editable"))


def isolation() -> tuple[str, ...]:
    """What of the environment could change what this process imports or which bytecode it runs
    (empty: none could). The installed commands start the interpreter with ``-I`` (their
    shebang, made so by :func:`seal`): no ``PYTHON*`` variable (``PYTHONPATH``, ``PYTHONHOME``,
    ``PYTHONPYCACHEPREFIX``, ``PYTHONSTARTUP``, …), no user site and no current directory."""
    found = []
    if not sys.flags.isolated:
        found.append(
            "interpreter not isolated (started without -I: PYTHON* variables, the user site "
            "and the current directory can change what it imports)"
        )
    if sys.pycache_prefix:
        found.append(f"bytecode read from outside the installation ({sys.pycache_prefix})")
    return tuple(found)


#: What the installed commands start Python with: isolated (-I), and writing no bytecode (-B: the
#: installation is sealed, and -I ignores PYTHONDONTWRITEBYTECODE). One word: a shebang passes
#: one argument.
FLAGS = " -IB"
#: The line pip writes instead of a shebang when the interpreter's path is too long for one.
_SH_EXEC = "'''exec' "


def _isolate_scripts(trees: Trees) -> list[Path]:
    """Make this distribution's console scripts start the interpreter with ``-I``: pip writes
    ``#!<python>`` (or, for a long path, a ``/bin/sh`` line that execs it), with no way to ask
    for flags. Returns the scripts changed."""
    try:
        names = [
            e.name
            for e in metadata.distribution(DISTRIBUTION).entry_points
            if e.group == "console_scripts"
        ]
    except metadata.PackageNotFoundError:
        return []
    changed = []
    for name in names:
        script = trees.prefix / "bin" / name
        if not script.is_file():
            continue
        lines = script.read_text(encoding="utf-8").split("\n")
        at = 1 if lines[0] == "#!/bin/sh" and len(lines) > 1 else 0
        line = lines[at]
        if " -I" in line or not (line.startswith("#!") or line.startswith(_SH_EXEC)):
            continue
        # "#!/venv/bin/python" → "… -IB";  '''exec' "/venv/bin/python" "$0" "$@" → "… -I "$0" …"
        lines[at] = line.rstrip() + FLAGS if at == 0 else line.replace(' "$0"', FLAGS + ' "$0"', 1)
        script.write_text("\n".join(lines), encoding="utf-8")
        changed.append(script)
    return changed


def seal(prefix: Path | None = None) -> tuple[Path, int]:
    """Write the manifest of the installation at ``prefix`` (default: this one) as it is now,
    after making its commands start isolated (``-I``). Returns its path and the number of
    entries."""
    trees = Trees.current(prefix)
    _isolate_scripts(trees)
    entries = scan(trees)
    text = render(entries, trees, _version())
    tmp = trees.manifest.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o644)
    os.replace(tmp, trees.manifest)
    return trees.manifest, len(entries)


@dataclass(frozen=True, slots=True)
class SoftwareCheck:
    version: str
    editable: bool
    files: int
    mismatched: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    unlisted: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()  # modules or sys.path entries from outside the sealed trees
    unsealed: str = ""  # why there is no manifest to check against
    digest: str = ""  # SHA-256 of the manifest: one id of the release as sealed
    #: What of the environment could change what runs (:func:`isolation`; empty with -I).
    environment: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        if self.editable:
            return True
        return not (
            self.mismatched
            or self.missing
            or self.unlisted
            or self.outside
            or self.unsealed
            or self.environment
        )

    @property
    def verified(self) -> bool | None:
        """True: everything matches; False: something does not; None: cannot tell (editable)."""
        return None if self.editable else self.ok

    def findings(self) -> list[str]:
        return [
            *self.mismatched,
            *(f"{m} (missing)" for m in self.missing),
            *(f"{u} (not in the package)" for u in self.unlisted),
            *(f"{o} (loaded from outside the installation)" for o in self.outside),
            *self.environment,
        ]

    def summary(self) -> str:
        if self.editable:
            return f"paigow-table {self.version}: an editable (development) install; not verified"
        if self.unsealed:
            return (
                f"paigow-table {self.version}: {self.unsealed}; the table will not start "
                "(seal the installation: paigow-table software seal, as the user who installed it)"
            )
        if self.ok:
            return (
                f"paigow-table {self.version}: {self.files} files verified ({self.digest[:16]}); "
                "the interpreter is isolated from the environment (-I)"
            )
        changed = self.findings()
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return (
            f"paigow-table {self.version}: {len(changed)} installed file(s) differ from the "
            f"package: {', '.join(changed[:3])}{more}; the table will not start (reinstall it)"
        )


def _outside(trees: Trees) -> list[str]:
    found = set()
    for entry in sys.path:
        if entry and os.path.exists(entry) and not trees.holds(entry):
            found.add(f"sys.path {entry}")
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.exists(file) and not trees.holds(file):
            found.add(f"module {name} {file}")
    return sorted(found)


def check_software(prefix: Path | None = None) -> SoftwareCheck:
    """Everything that executes against the sealed manifest."""
    version = _version()
    if _editable():
        return SoftwareCheck(version, editable=True, files=0)
    trees = Trees.current(prefix)
    try:
        raw = trees.manifest.read_bytes()
        expected = parse(raw.decode("utf-8"))
    except FileNotFoundError:
        return SoftwareCheck(version, False, 0, unsealed=f"no manifest at {trees.manifest}")
    except (OSError, UnicodeDecodeError, ManifestError) as exc:
        return SoftwareCheck(version, False, 0, unsealed=f"manifest {trees.manifest}: {exc}")
    found = scan(trees)
    mismatched = sorted(p for p in expected.keys() & found.keys() if expected[p] != found[p])
    return SoftwareCheck(
        version,
        False,
        len(expected),
        mismatched=tuple(mismatched),
        missing=tuple(sorted(expected.keys() - found.keys())),
        unlisted=tuple(sorted(found.keys() - expected.keys())),
        outside=tuple(_outside(trees)),
        digest=hashlib.sha256(raw).hexdigest(),
        environment=isolation(),
    )


def authenticate(nonce: str, prefix: Path | None = None) -> dict[str, object]:
    """HMAC-SHA256 keyed by ``nonce`` over everything on disk in the sealed trees now, in path
    order: each entry's manifest line and a newline, then (a file, or a link that leads to one)
    the file's bytes. Listed or not, any change changes it."""
    if not nonce:
        raise ValueError("the nonce must not be empty")
    trees = Trees.current(prefix)
    entries = scan(trees)
    mac = hmac.new(nonce.encode(), digestmod=hashlib.sha256)
    for path in sorted(entries):
        mac.update(entries[path].line().encode() + b"\n")
        location = _locate(trees, path)
        if location.is_file():
            with location.open("rb") as f:
                while chunk := f.read(_CHUNK):
                    mac.update(chunk)
    return {
        "version": _version(),
        "nonce": nonce,
        "files": len(entries),
        "hmac_sha256": mac.hexdigest(),
        # What is on disk says nothing of what this process ran unless nothing outside could
        # redirect it (isolation(): -I, no bytecode prefix).
        "isolated": not isolation(),
    }


def _locate(trees: Trees, scoped: str) -> Path:
    scope, _, rel = scoped.partition("/")
    if scope == "venv":
        return trees.prefix / rel
    if scope == "stdlib":
        return trees.stdlib / rel
    return trees.interpreter
