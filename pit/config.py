"""The pit's config (``/etc/paigow-pit/pit.toml``; ``config/pit.example.toml``)."""

from __future__ import annotations

import logging
import os
import sys
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SiteConfig(_Model):
    id: str = Field(min_length=1, description="the site, as in the tables' topic prefix")
    topic_root: str = Field(
        "", description="the topic under which the tables publish; default casino/<site>/paigow/"
    )

    @property
    def root(self) -> str:
        root = self.topic_root or f"casino/{self.id}/paigow/"
        return root if root.endswith("/") else root + "/"


class BrokerConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(1883, ge=1, le=65535)
    protocol: Literal["3.1.1", "5"] = "5"
    client_id: str = Field(
        "paigow-pit-1",
        min_length=1,
        max_length=64,
        description="the persistent session's id: one per pit instance, stable across restarts",
    )
    share_group: str = Field(
        "", description="join the MQTT 5 shared subscription $share/<group>/… (several pits)"
    )
    keepalive: int = Field(30, ge=5, le=600)
    session_expiry: int = Field(
        7 * 86_400, ge=60, description="MQTT 5: seconds the broker keeps the session while away"
    )
    username: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    batch: int = Field(200, ge=1, le=5000, description="messages committed per transaction")
    batch_wait: float = Field(
        0.2,
        ge=0,
        le=2,
        description="seconds a batch waits for more messages after its first (fewer, fuller "
        "transactions: the pit's CPU a message; 0: take what has arrived)",
    )
    max_message_bytes: int = Field(
        256 * 1024, ge=4096, le=16 * 1024 * 1024, description="a larger message is a reject"
    )


class DatabaseConfig(_Model):
    url: str = Field(
        "",
        description="postgresql://user@host/db (psycopg 3) or sqlite:////path/pit.sqlite3; "
        "empty: an SQLite file in [database] path",
    )
    path: Path = Path("/var/lib/paigow-pit/pit.sqlite3")


class RecordConfig(_Model):
    checkpoint_key_file: Path | None = Field(
        None, description="the tables' checkpoint key (hex): checkpoints are checked with it"
    )
    checkpoint_keys: dict[str, Path] = Field(
        default_factory=dict, description="a key file per table id, when tables have their own"
    )
    feed_keys_file: Path | None = Field(
        None,
        description="each table's public feed key, one a line: TABLE_ID ed25519 <64 hex> (the "
        "public_key line of paigow-table feed-key show); a table not listed has every message "
        "refused (docs/pit.md)",
    )
    max_seq_jump: int = Field(
        100_000,
        ge=100,
        description="a seq or round number further than this past the table's highest is "
        "refused with a record alarm",
    )
    clock_tolerance: float = Field(
        300.0,
        ge=1.0,
        description="seconds a message's claimed time may lie ahead of its arrival",
    )
    reject_burst: int = Field(
        20, ge=1, description="rejects on one table's topic within reject_window: a record alarm"
    )
    reject_window: float = Field(60.0, gt=0)
    retention_days: float = Field(
        30.0,
        ge=1,
        le=3650,
        description="days rejects, their counts and acknowledged record alarms are kept",
    )


class LivenessConfig(_Model):
    probe_after: float = Field(
        20.0,
        ge=0.0,
        description="a table heard nothing from for this many seconds is sent a status_request "
        "(0: never; silence is then not judged)",
    )
    silent_after: float = Field(
        28.0,
        gt=0.0,
        description="a table (not offline) heard nothing from for this many seconds is marked "
        "silent, with a record alarm",
    )
    resend_after: float = Field(
        5.0,
        ge=0.0,
        description="a seq still missing this many seconds after it was reported is asked of its "
        "table again (a resend command; again every 2 × this while it stays missing; 0: never)",
    )


class AdmissionConfig(_Model):
    """Each table's budget before a message is judged (issue 40; ``pit.admission``): many times
    what a table sends, so a table replaying a long backlog passes in a burst."""

    burst_messages: int = Field(5000, ge=10, description="messages a table may send at once")
    messages_per_s: float = Field(200.0, gt=0, description="messages a second, sustained")
    burst_bytes: int = Field(
        20_000_000, ge=100_000, description="bytes a table may send at once (20 MB)"
    )
    bytes_per_s: float = Field(2_000_000.0, gt=0, description="bytes a second, sustained (2 MB/s)")
    unregistered_share: float = Field(
        0.05,
        gt=0,
        le=1,
        description="the share of one table's budget that all names the keys file does not "
        "register get together",
    )


class CommandsConfig(_Model):
    key_file: Path | None = Field(
        None, description="HMAC-SHA256 key (hex) the pit signs its commands with (acknowledge)"
    )
    key_id: str = "pit"
    supervisors_file: Path | None = Field(
        None,
        description="the supervisors' badges and PIN hashes, the format of the table's [display] "
        "supervisors_file: acknowledging from the pit page takes a badge and its PIN",
    )
    supervisors: list[str] | None = Field(
        None, description="no longer read: typed names are not credentials"
    )

    @field_validator("supervisors")
    @classmethod
    def _no_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            raise ValueError(
                "typed names are no longer accepted: list the supervisors' badges and PIN "
                "hashes in supervisors_file (paigow-table supervisor-pin BADGE)"
            )
        return value


class WebConfig(_Model):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8090, ge=0, le=65535)
    token_file: Path | None = Field(
        None, description="the access token (required when host is not a loopback address)"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="the names the page is reached by (Host header); loopback names always; "
        "required when host is not a loopback address",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="origins (scheme://host[:port]) a change may come from besides the page's own",
    )
    max_streams: int = Field(32, ge=1, le=10_000, description="live event streams at once")
    cert_file: Path | None = Field(None, description="serve over TLS with this certificate")
    key_file: Path | None = Field(None, description="the certificate's private key")


class ShiftConfig(_Model):
    starts: list[str] = Field(
        default_factory=lambda: ["06:00", "14:00", "22:00"],
        description="shift boundaries, HH:MM in the site's time zone",
    )
    timezone: str = "UTC"
    report_key_file: Path | None = Field(
        None, description="HMAC key (hex) of the signed end-of-shift report"
    )

    @field_validator("starts")
    @classmethod
    def _hhmm(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one shift start")
        for item in value:
            h, _, m = item.partition(":")
            if not (h.isdigit() and m.isdigit() and int(h) < 24 and int(m) < 60):
                raise ValueError(f"{item!r} is not HH:MM")
        return sorted(value)


class ProtectionConfig(_Model):
    shufflers: dict[str, str] = Field(
        default_factory=dict,
        description="each table's shuffler as 'MODEL SERIAL' (e.g. 'MDX-2 0451'): the tables' "
        "verdicts and deck faults counted by shuffler and by model (the older, counting view)",
    )
    pooled: bool = Field(
        True,
        description="run the game-protection tests over the floor's pooled rounds, by device "
        "model and firmware and by moved serial (pit/floorwatch.py, docs/protection.md)",
    )
    false_alarms_per_year: float = Field(
        0.1,
        gt=0,
        description="the whole floor's false alarms a year, the tables' own watches and the "
        "pools together (0.1: one in ten years)",
    )
    pooled_share: float = Field(
        0.5, gt=0, lt=1, description="the part of that budget the pools spend"
    )
    tables: int = Field(
        0,
        ge=0,
        le=100_000,
        description="the floor's tables the budget is spread over (0: the tables with a "
        "registered feed key, read at start)",
    )
    rounds_per_table_year: int = Field(300_000, ge=1, le=10_000_000)
    every: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="seconds between two takes of the stored rounds; each saves the pooled "
        "state (7.6 MB and 0.3 s of CPU at 2,000 tables), so a finding waits at most this long",
    )


class PitConfig(_Model):
    site: SiteConfig
    broker: BrokerConfig = BrokerConfig()
    database: DatabaseConfig = DatabaseConfig()
    record: RecordConfig = RecordConfig()
    commands: CommandsConfig = CommandsConfig()
    web: WebConfig = WebConfig()
    shift: ShiftConfig = ShiftConfig()
    protection: ProtectionConfig = ProtectionConfig()
    liveness: LivenessConfig = LivenessConfig()
    admission: AdmissionConfig = AdmissionConfig()
    log_level: str = "INFO"

    @property
    def database_url(self) -> str:
        return self.database.url or f"sqlite:///{self.database.path}"


class PitConfigError(Exception):
    """A pit config the pit cannot run with: the message names the file and the key."""


def parse_pit_config(text: str, file: str = "<pit>") -> PitConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PitConfigError(f"{file}: {exc}") from None
    try:
        return PitConfig.model_validate(data)
    except ValidationError as exc:
        lines = [f"{file}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise PitConfigError("\n".join(lines)) from None


def load_pit_config(path: str | os.PathLike[str]) -> PitConfig:
    return parse_pit_config(Path(path).read_text(encoding="utf-8"), str(path))


def read_secret(path: Path) -> str:
    """A token or password from a file: refused when others may read it."""
    mode = path.stat().st_mode
    if mode & 0o007:
        raise PitConfigError(f"{path}: readable by everyone; chmod 0600 (or 0640 root:paigow)")
    return path.read_text(encoding="utf-8").strip()


def read_hex_key(path: Path) -> bytes:
    text = read_secret(path)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise PitConfigError(f"{path}: expected the key as hex digits") from None
    if len(key) < 32:
        raise PitConfigError(f"{path}: the key is shorter than 32 bytes")
    return key


def configure_logging(level: str) -> None:
    """The pit's log lines (stderr: journald under systemd), in the pit and in its floor's
    process."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
