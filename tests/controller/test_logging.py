"""controller/logging.py: JSON lines carry table_id/round_id, secrets are dropped."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller.logging import (
    RateLimit,
    bind_round,
    bind_table,
    choose_format,
    configure_logging,
    get_logger,
    is_secret_key,
    unbind_round,
)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.configure(**config)
    structlog.contextvars.clear_contextvars()
    logging.captureWarnings(False)


@pytest.fixture
def stream() -> io.StringIO:
    out = io.StringIO()
    assert configure_logging("INFO", "json", stream=out) == "json"
    return out


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_table_and_round(stream: io.StringIO) -> None:
    log = get_logger("controller.table")
    with bind_table("PG-07"):
        log.info("table_open")
        with bind_round("PG-07", "PG-07-01JABC"):
            log.info("round_settled", seats=6)
        log.info("between_rounds")
    log.info("unbound")
    first, in_round, between, unbound = lines(stream)
    assert first["table_id"] == "PG-07" and "round_id" not in first
    assert in_round == {
        "event": "round_settled",
        "seats": 6,
        "table_id": "PG-07",
        "round_id": "PG-07-01JABC",
        "level": "info",
        "logger": "controller.table",
        "timestamp": in_round["timestamp"],
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", in_round["timestamp"])
    assert between["table_id"] == "PG-07" and "round_id" not in between
    assert "table_id" not in unbound


def test_unbind_round(stream: io.StringIO) -> None:
    bind_round("PG-07", "PG-07-R1")
    get_logger().info("in")
    unbind_round()
    get_logger().info("out")
    inside, outside = lines(stream)
    assert inside["round_id"] == "PG-07-R1"
    assert "round_id" not in outside and outside["table_id"] == "PG-07"


async def test_round_binding_follows_tasks(stream: io.StringIO) -> None:
    log = get_logger()

    async def child() -> None:
        log.info("child")

    async def round_task() -> None:
        bind_round("PG-07", "PG-07-R2")
        await asyncio.create_task(child())

    async def other() -> None:
        log.info("other")

    await asyncio.gather(round_task(), other())
    by_event = {line["event"]: line for line in lines(stream)}
    assert by_event["child"]["round_id"] == "PG-07-R2"
    assert "round_id" not in by_event["other"]


def test_secrets_are_dropped(stream: io.StringIO) -> None:
    get_logger().info(
        "connect",
        host="broker",
        password="hunter2",
        mqtt_password="hunter2",
        supervisorToken="tok",
        void_pin="1234",
        secret="s",
        pinned=True,
        spinner=1,
        settings={"username": "PG-07", "password": "hunter2", "nested": [{"token": "t"}]},
    )
    [line] = lines(stream)
    assert "hunter2" not in stream.getvalue() and "1234" not in stream.getvalue()
    assert line["host"] == "broker" and line["pinned"] is True and line["spinner"] == 1
    assert line["settings"] == {"username": "PG-07", "nested": [{}]}
    for key in ("password", "mqtt_password", "supervisorToken", "void_pin", "secret"):
        assert key not in line


def test_secret_key_words() -> None:
    assert all(map(is_secret_key, ["password", "PIN", "api_token", "apiToken", "client-secret"]))
    assert not any(map(is_secret_key, ["pinned", "spinner", "tokens_seen", "position"]))


def test_stdlib_records_are_json_and_level_filters() -> None:
    out = io.StringIO()
    configure_logging("warning", "json", stream=out)
    logging.getLogger("aiohttp.access").info("dropped by level")
    get_logger("x").info("also dropped")
    logging.getLogger("paho").warning("broker %s gone", "b1")
    get_logger("x").error("kept")
    [foreign, ours] = lines(out)
    assert foreign["event"] == "broker b1 gone" and foreign["level"] == "warning"
    assert foreign["logger"] == "paho"
    assert ours["event"] == "kept"


def test_exceptions_are_one_json_line(stream: io.StringIO) -> None:
    try:
        raise ValueError("bad frame")
    except ValueError:
        get_logger().exception("decode_failed")
    [line] = lines(stream)
    assert "ValueError: bad frame" in line["exception"]


class TtyStream(io.StringIO):
    def __init__(self, fd: int | None = None) -> None:
        super().__init__()
        self._fd = fd

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("fileno")
        return self._fd


def test_format_choice(tmp_path: Path) -> None:
    assert choose_format("auto", io.StringIO(), {}) == "json"
    assert choose_format("auto", TtyStream(), {}) == "console"
    assert choose_format("json", TtyStream(), {}) == "json"
    assert choose_format("console", io.StringIO(), {}) == "console"
    with open(tmp_path / "journal-socket-stand-in", "w") as f:
        st = os.fstat(f.fileno())
        journal = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert choose_format("auto", TtyStream(f.fileno()), journal) == "json"
        assert choose_format("auto", TtyStream(f.fileno()), {"JOURNAL_STREAM": "1:2"}) == "console"


def test_console_output_is_readable() -> None:
    out = TtyStream()
    assert configure_logging("DEBUG", "auto", stream=out) == "console"
    with bind_round("PG-07", "PG-07-R3"):
        get_logger("t").debug("packet_dealt", index=2, token="x")
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert "packet_dealt" in text and "index=2" in text and "round_id=PG-07-R3" in text
    assert "token" not in text


def test_a_flood_of_one_event_is_rate_limited_and_counted(stream: io.StringIO) -> None:
    # The flood lasts less than one window whatever the machine's load: the limiter's clock
    # stands still (on a loaded machine 51,200 lines took longer than the 10 s window).
    limits = [
        f for h in logging.getLogger().handlers for f in h.filters if isinstance(f, RateLimit)
    ]
    assert limits
    for limit in limits:
        limit.clock = lambda: 0.0
    log = get_logger("flood")
    for i in range(51_200):
        log.warning("frame_error", n=i)
    logging.getLogger("aiohttp.server").error("Error handling request")
    got = lines(stream)
    assert len(got) == 21  # twenty of the flood, and the other event untouched
    assert [g["n"] for g in got[:20]] == list(range(20))


def test_the_next_line_after_the_window_says_how_many_were_dropped() -> None:
    now = [0.0]
    limit = RateLimit(burst=2, window=10.0, clock=lambda: now[0])
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "noise", None, None)
    passed = [limit.filter(record) for _ in range(5)]
    assert passed == [True, True, False, False, False]
    now[0] = 10.5
    structured = logging.LogRecord(
        "x", logging.WARNING, __file__, 1, {"event": "noise"}, None, None
    )
    assert limit.filter(record)
    assert "3 more like it" in str(record.msg)
    assert limit.filter(structured)  # another key (same name, the event from the dict)


def test_under_journald_each_line_carries_its_syslog_priority(tmp_path: Path) -> None:
    """The exact bytes journald reads (SyslogLevelPrefix=): a critical alarm at <2>, so
    `journalctl -p crit` and `-p warning` find it; a console or a plain file gets no prefix."""
    path = tmp_path / "journal-stream"
    with path.open("w", encoding="utf-8") as out:
        st = os.fstat(out.fileno())
        env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert configure_logging("DEBUG", "auto", stream=out, env=env) == "json"
        log = get_logger("t")
        log.critical("alarm", code="deck_integrity", severity="critical")
        log.error("journal_write_failed")
        log.warning("alarm", code="frame_error", severity="warning")
        log.info("round_closed")
        log.debug("detail")
        out.flush()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [line[:4] for line in lines] == ["<2>{", "<3>{", "<4>{", "<6>{", "<7>{"]
    assert json.loads(lines[0][3:])["level"] == "critical"
    plain = io.StringIO()
    configure_logging("INFO", "json", stream=plain, env={})
    get_logger("t").critical("alarm")
    assert plain.getvalue().startswith("{")


async def test_a_critical_alarm_is_logged_as_critical(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    from tests.harness import running_table

    with capture_logs() as logs:
        async with running_table(tmp_path) as t:
            result = await t.deal(rng_number=3, faults="duplicate_card")
            assert result.status == "misdeal"
    alarms = [e for e in logs if e.get("event") == "alarm"]
    deck = [e for e in alarms if e.get("code") == "deck_integrity"]
    assert deck and deck[0]["log_level"] == "critical"
    assert all(e["log_level"] == "warning" for e in alarms if e.get("severity") != "critical")
