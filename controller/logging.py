"""Logging: structlog over the standard library, one line per event.

JSON lines when the output is not a terminal or is the systemd journal (``$JOURNAL_STREAM``),
readable colour output on a terminal; timestamps are UTC ISO 8601. Records from libraries that
use the standard ``logging`` module (aiohttp, paho) go through the same processors, so they are
JSON too. Keys that name secrets (password, token, pin, secret) are dropped from every event.

Every line of a round carries ``table_id`` and ``round_id``: :func:`bind_round` binds them in the
current context (contextvars), which asyncio tasks started afterwards inherit.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal, Self, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

LogFormat = Literal["auto", "json", "console"]

#: Words that make a key secret, wherever they stand in it (``mqtt_password``, ``supervisorToken``).
SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "token", "pin", "secret"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

_HANDLER_MARK = "_paigow_handler"


def is_secret_key(key: str) -> bool:
    """True for keys with a secret word as one of their words (``void_pin``, ``apiToken``), not
    for words that merely contain one (``spinner``, ``pinned``)."""
    return any(word.lower() in SECRET_WORDS for word in _WORD.findall(key))


def _scrub(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            k: _scrub(v) for k, v in value.items() if not (isinstance(k, str) and is_secret_key(k))
        }
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v) for v in value)
    return value


def drop_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Processor: remove secret keys from the event, also inside nested mappings and lists."""
    return {
        key: _scrub(value) if key != "event" else value
        for key, value in event_dict.items()
        if not is_secret_key(key) or key.startswith("_")
    }


def _writes_to_journal(stream: TextIO, env: Mapping[str, str]) -> bool:
    """``$JOURNAL_STREAM`` is ``device:inode`` of the journal socket systemd connected us to."""
    expected = env.get("JOURNAL_STREAM")
    if not expected:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return expected == f"{st.st_dev}:{st.st_ino}"


def choose_format(
    fmt: LogFormat, stream: TextIO, env: Mapping[str, str] | None = None
) -> Literal["json", "console"]:
    """``"auto"`` is JSON under systemd's journal or when not writing to a terminal."""
    if fmt != "auto":
        return fmt
    env = os.environ if env is None else env
    if _writes_to_journal(stream, env):
        return "json"
    isatty = getattr(stream, "isatty", None)
    return "console" if callable(isatty) and isatty() else "json"


class RateLimit(logging.Filter):
    """At most ``burst`` lines of one event (logger and event name) per ``window`` seconds; the
    rest are dropped and counted, and the event's next line after the window says how many
    (``suppressed``, ``suppressed_in_s``). So a flood (line noise, a connection storm, a broker
    refusing every message) costs the journal a few lines a minute, not megabytes."""

    MAX_KEYS = 2048

    def __init__(
        self, burst: int = 20, window: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self.clock = clock
        self._windows: dict[tuple[str, str], list[float]] = {}  # key → [start, count, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        event = str(msg.get("event", "")) if isinstance(msg, dict) else str(msg)
        key = (record.name, event[:200])
        now = self.clock()
        w = self._windows.get(key)
        if w is None or now - w[0] >= self.window:
            dropped = int(w[2]) if w is not None else 0
            if w is None and len(self._windows) >= self.MAX_KEYS:
                self._windows.clear()  # a runaway of distinct messages: start counting afresh
            w = self._windows[key] = [now, 0, 0]
            if dropped:
                if isinstance(msg, dict):
                    msg["suppressed"] = dropped
                    msg["suppressed_in_s"] = self.window
                else:
                    record.msg = f"{msg} (and {dropped} more like it in {self.window:g} s)"
        if w[1] >= self.burst:
            w[2] += 1
            return False
        w[1] += 1
        return True


#: syslog priorities by logging level: what journald reads from a ``<N>`` line prefix
#: (systemd's SyslogLevelPrefix=, on by default), so `journalctl -p warning` finds our lines.
SYSLOG_PRIORITY: dict[int, int] = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


class _JournalFormatter(structlog.stdlib.ProcessorFormatter):
    """Each line prefixed with its syslog priority, ``<2>`` for critical … ``<7>`` for debug."""

    def format(self, record: logging.LogRecord) -> str:
        priority = SYSLOG_PRIORITY.get(record.levelno, 6 if record.levelno < 30 else 3)
        return f"<{priority}>{super().format(record)}"


def shared_processors() -> list[Processor]:
    """What every record goes through, from structlog or from the standard library."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        drop_secrets,
        structlog.processors.StackInfoRenderer(),
    ]


def configure_logging(
    level: str = "INFO",
    fmt: LogFormat = "auto",
    *,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> Literal["json", "console"]:
    """Set up structlog and the root logger (replacing an earlier call's handler); returns the
    format chosen. ``stream`` defaults to stderr, which systemd sends to the journal."""
    out = sys.stderr if stream is None else stream
    chosen = choose_format(fmt, out, env)
    shared = shared_processors()
    renderer: list[Processor]
    if chosen == "json":
        renderer = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        isatty = getattr(out, "isatty", None)
        colors = bool(callable(isatty) and isatty())
        renderer = [structlog.dev.ConsoleRenderer(colors=colors)]
    formatter_class = (
        _JournalFormatter
        if _writes_to_journal(out, os.environ if env is None else env)
        else structlog.stdlib.ProcessorFormatter
    )
    formatter = formatter_class(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(RateLimit())
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: tests (structlog.testing.capture_logs) and a reconfiguration must take effect.
        cache_logger_on_first_use=False,
    )
    return chosen


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger


class Binding:
    """Context variables bound by :func:`bind_round` / :func:`bind_table`; use as a context
    manager (or call :meth:`reset`) to restore what was bound before."""

    def __init__(self, tokens: Mapping[str, Any]) -> None:
        self._tokens = dict(tokens)

    def reset(self) -> None:
        if self._tokens:
            structlog.contextvars.reset_contextvars(**self._tokens)
            self._tokens = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.reset()


def bind_table(table_id: str) -> Binding:
    """Every following line in this context (and tasks started from it) carries ``table_id``."""
    return Binding(structlog.contextvars.bind_contextvars(table_id=table_id))


def bind_round(table_id: str, round_id: str) -> Binding:
    """Every following line in this context carries ``table_id`` and ``round_id``."""
    return Binding(structlog.contextvars.bind_contextvars(table_id=table_id, round_id=round_id))


def unbind_round() -> None:
    """The round is over: lines no longer carry a ``round_id``."""
    structlog.contextvars.unbind_contextvars("round_id")
