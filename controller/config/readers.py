"""The readers of every file a config names, in the config's own floor: the services that use a
file (MQTT, the display) and the config check (controller/config/files.py) read it with the same
function, so `check-config` refuses what `run` would, and the config layer imports nothing above
it (docs/architecture.md). Each raises ValueError (or ConfigError, ssl.SSLError, OSError) naming
the file and, where there is one, the line; none repeats a secret."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from controller.config.fields import read_secret
from controller.credentials import BADGE, TOKEN_CHARS

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from controller.feed_signature import FeedSigner

#: A kiosk token's characters at least (``[display] kiosk_token_file``).
MIN_TOKEN_CHARS = TOKEN_CHARS


# --- the MQTT command keys (``mqtt.command_keys_file``) ---------------------------------------

#: The key types a keys file line may name, and what each one's hex holds.
KEY_TYPES = {
    "hmac-sha256": "a shared HMAC-SHA256 secret, at least 32 bytes",
    "ed25519": "an Ed25519 public key, 32 bytes",
}
KEY_LINE = "'key_id hmac-sha256 <secret hex>' or 'key_id ed25519 <public key hex>'"
MIN_SECRET_BYTES = 32


def read_keys(path: str | Path) -> dict[str, bytes | Ed25519PublicKey]:
    """A keys file, one key a line (``#`` comments), each naming its type:
    ``key_id hmac-sha256 <secret hex>`` (at least 32 bytes) or ``key_id ed25519 <public key
    hex>`` (32 bytes). ValueError names the file and the line and says what was expected; it
    never repeats a line's hex, which may be a secret.

    The old untyped line ``key_id <hex>`` is refused: taken as an HMAC secret, an Ed25519 public
    key written so would let anyone who holds that public key sign commands.
    """
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: expected UTF-8 text: byte {exc.start} is not UTF-8") from None
    keys: dict[str, bytes | Ed25519PublicKey] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        key_id, key = _key_line(f"{path}:{number}", fields, lines)
        keys[key_id] = key
        lines[key_id] = number
    return keys


def _key_line(
    where: str, fields: list[str], lines: Mapping[str, int]
) -> tuple[str, bytes | Ed25519PublicKey]:
    """One keys file line's key id and key (``fields``: its words, at least one; ``lines``: the
    line each key id before it is on). ValueError as ``read_keys`` says."""
    if len(fields) == 2:
        key_id = fields[0]
        raise ValueError(
            f"{where}: the key {key_id!r} does not say its type (expected every line to "
            f"name it): write '{key_id} hmac-sha256 <the same hex>' if the hex is a shared "
            f"HMAC-SHA256 secret, or '{key_id} ed25519 <the same hex>' if it is an Ed25519 "
            "public key; read as a secret, a public key would let anyone who holds it sign "
            "commands"
        )
    if len(fields) != 3:
        raise ValueError(f"{where}: expected {KEY_LINE}, got {len(fields)} fields")
    key_id, kind, value = fields
    if kind not in KEY_TYPES:
        raise ValueError(
            f"{where}: unknown key type {kind[:32]!r}: expected 'hmac-sha256' or 'ed25519' "
            f"({KEY_LINE})"
        )
    if key_id in lines:
        raise ValueError(
            f"{where}: the key id {key_id!r} is already on line {lines[key_id]}: expected "
            "each key id once"
        )
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise ValueError(
            f"{where}: the {kind} key {key_id!r} is not hex digits: expected "
            f"{KEY_TYPES[kind]} as hex"
        ) from None
    return key_id, _key_from_bytes(where, kind, key_id, raw)


def _key_from_bytes(where: str, kind: str, key_id: str, raw: bytes) -> bytes | Ed25519PublicKey:
    """The key of type ``kind`` (a KEY_TYPES name) that ``raw`` holds; ValueError for the wrong
    length (never repeating the bytes)."""
    if kind == "ed25519":
        if len(raw) != 32:
            raise ValueError(
                f"{where}: the ed25519 key {key_id!r} has {len(raw)} bytes: expected 32 "
                "(64 hex digits, the raw public key)"
            )
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        return Ed25519PublicKey.from_public_bytes(raw)
    if len(raw) < MIN_SECRET_BYTES:
        raise ValueError(
            f"{where}: the hmac-sha256 key {key_id!r} has {len(raw)} bytes: expected at "
            f"least {MIN_SECRET_BYTES} (e.g. `openssl rand -hex 32`)"
        )
    return raw


# --- the MQTT broker's TLS files (``mqtt.tls``) -----------------------------------------------


def _no_passphrase() -> str:
    raise ValueError(
        "the key is encrypted: expected it unencrypted (the table has no passphrase to give)"
    )


class TlsFiles(Protocol):
    """The files a TLS client needs: the table's ``mqtt.tls`` and the pit's ``[broker]`` both
    have them."""

    @property
    def ca_file(self) -> Path | None: ...
    @property
    def cert_file(self) -> Path | None: ...
    @property
    def key_file(self) -> Path | None: ...


def tls_context(
    tls: TlsFiles, *, passphrase: Callable[[], str] | None = _no_passphrase
) -> ssl.SSLContext:
    """Verify the broker against ``ca_file`` (or the system store) and present the client
    certificate when one is configured. TLS 1.2 or newer. Files that are not PEM raise
    ssl.SSLError; an encrypted key is a ValueError (the table's: never a prompt on a terminal)
    unless ``passphrase`` is None, which lets OpenSSL ask for it (a person's ``monitor``)."""
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH, cafile=str(tls.ca_file) if tls.ca_file else None
    )
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.cert_file is not None and tls.key_file is not None:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file), password=passphrase)
    return context


# --- the display's badges (``display.dealers_file``, ``display.supervisors_file``) -------------


def read_badges(path: str | Path, *, maker: str = "dealer-pin") -> dict[str, str]:
    """``badge pbkdf2_sha256$…`` a line (``#`` comments). ValueError names the line. ``maker``:
    the ``paigow-table`` command that makes a line, named in the error."""
    badges: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 2 or not BADGE.match(parts[0]):
            raise ValueError(f"{path}:{number}: expected 'badge pbkdf2_sha256$…'")
        fields = parts[1].split("$")
        try:
            ok = (
                len(fields) == 4
                and fields[0] == "pbkdf2_sha256"
                and int(fields[1]) >= 10_000
                and len(bytes.fromhex(fields[2])) >= 8
                and len(bytes.fromhex(fields[3])) == 32
            )
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{path}:{number}: {parts[0]}'s PIN is not a pbkdf2_sha256 hash "
                f"(make one with 'paigow-table {maker} BADGE')"
            )
        if parts[0] in badges:
            raise ValueError(f"{path}:{number}: badge {parts[0]} is named twice")
        badges[parts[0]] = parts[1]
    return badges


def read_dealers(path: str | Path) -> dict[str, str]:
    """``[display] dealers_file``: the dealers who may sign in at the kiosk."""
    return read_badges(path, maker="dealer-pin")


def read_supervisors(path: str | Path) -> dict[str, str]:
    """``[display] supervisors_file``: the supervisors who may void a round, acknowledge an
    alarm or correct a player's setting at the display."""
    return read_badges(path, maker="supervisor-pin")


# --- the kiosk's token (``display.kiosk_token_file``) -----------------------------------------


def read_kiosk_token(path: Path) -> str:
    """The kiosk token in ``path`` (``read_secret``: UTF-8, not empty), at least
    ``MIN_TOKEN_CHARS`` characters; ConfigError or ValueError otherwise."""
    token = read_secret(path)
    if any(c.isspace() for c in token):
        problem = "the kiosk token has a space or a line break in it"
    elif len(token) < MIN_TOKEN_CHARS:
        problem = f"the kiosk token has {len(token)} characters"
    else:
        return token
    raise ValueError(
        f"{path}: {problem}: expected at least {MIN_TOKEN_CHARS} characters and no space "
        "(e.g. `openssl rand -hex 32`)"
    )


# --- the table's feed key (``mqtt.feed_key_file``) --------------------------------------------


#: DER of an Ed25519 private key in PKCS#8 v1 up to its 32 bytes (RFC 8410 §7): SEQUENCE,
#: version 0, the algorithm 1.3.101.112, OCTET STRING of the OCTET STRING of the key.
_ED25519_PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")


def _ed25519_pkcs8_seed(data: bytes) -> bytes | None:
    """The 32 bytes of an unencrypted PKCS#8 v1 PEM Ed25519 key, or None for anything else."""
    import base64
    import binascii

    text = data.decode("ascii", "replace").strip().splitlines()
    if len(text) < 3 or text[0] != "-----BEGIN PRIVATE KEY-----":
        return None
    if text[-1] != "-----END PRIVATE KEY-----":
        return None
    try:
        der = base64.b64decode("".join(text[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(der) != 48 or not der.startswith(_ED25519_PKCS8_PREFIX):
        return None
    return der[16:]


def read_feed_key(path: str | Path) -> FeedSigner:
    """The signer of a key file: an unencrypted PKCS#8 PEM Ed25519 private key. ValueError says
    what is wrong, never repeating the file's content. The usual file (what ``feed-key init``
    writes: PKCS#8 v1, the key's 32 bytes and nothing else) is read here, so a table signing
    through libsodium never loads ``cryptography``; any other is left to ``cryptography``."""
    from controller.feed_signature import FeedSigner

    data = Path(path).read_bytes()
    seed = _ed25519_pkcs8_seed(data)
    if seed is not None:
        return FeedSigner(seed=seed)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ValueError(
            f"{path}: expected an unencrypted Ed25519 private key in PEM (paigow-table "
            "feed-key init makes one)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path}: expected an Ed25519 private key, not {type(key).__name__}")
    return FeedSigner(key)
