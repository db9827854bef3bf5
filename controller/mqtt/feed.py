"""MQTT on the command line: ``paigow-table monitor`` (the feed for a person) and ``paigow-table
schemas`` (the JSON Schemas), and the feed printer the demo uses.

    paigow-table monitor --broker 127.0.0.1:1883 --prefix casino/demo/paigow/PG-DEMO/
    paigow-table monitor --broker broker:8883 --prefix 'casino/+/paigow/+/' --ca-file ca.pem \\
        --cert-file me.pem --key-file me.key --username cms --password-file pw --share cms

aiomqtt is imported only by the commands that connect.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from controller.words import words

# --- the feed for a person -----------------------------------------------------------------------


def _cards(cards: Any) -> str:
    return " ".join(str(c) for c in cards) if isinstance(cards, list) else "?"


def _summary(schema: str, p: dict[str, Any]) -> str:
    if schema == "paigow.round":
        head = f"round {p.get('round_seq')} {p.get('status')}"
        if p.get("status") != "settled":
            return f"{head}: " + "; ".join(words(str(r.get("code"))) for r in p.get("reasons", []))
        dealer = p.get("dealer") or {}
        setting = dealer.get("setting")
        if dealer.get("two_jacks") or not setting:
            return f"{head}, dealer {dealer.get('best_hand')}: two Jacks, Pai Gow wagers lose"
        return (
            f"{head}, dealer {_cards(setting.get('front'))} | {_cards(setting.get('back'))} "
            f"({setting.get('rule')}), {len(p.get('seats', []))} seats"
        )
    if schema == "paigow.player":
        s = p.get("setting") or {}
        result = (p.get("pai_gow") or {}).get("outcome", "")
        foul = " FOUL" if p.get("foul") else ""
        return (
            f"seat {p.get('seat')} {_cards(s.get('front'))} | {_cards(s.get('back'))}{foul} "
            f"{result}".rstrip()
        )
    if schema == "paigow.alarm":
        return f"{p.get('severity')} {words(str(p.get('code')))}: {p.get('detail')}"
    if schema == "paigow.device":
        state = "online" if p.get("online") else "offline"
        return f"{p.get('device')} {state} {p.get('detail') or ''}".rstrip()
    if schema == "paigow.status":
        devices = " ".join(
            f"{name}{'+' if up else '-'}" for name, up in (p.get("devices") or {}).items()
        )
        table = "open" if p.get("table_open") else "closed"
        return (
            f"{p.get('state')}, table {table}, devices [{devices}], "
            f"v{p.get('software_version')} config {p.get('config_digest') or '-'}"
        )
    return json.dumps(p, separators=(",", ":"))[:120]


def format_feed_line(
    topic: str, payload: bytes, *, prefix: str = "", retained: bool = False
) -> str:
    """One compact line per message: topic (without ``prefix``), seq, schema, a summary."""
    shown = topic.removeprefix(prefix) if prefix and "+" not in prefix else topic
    flags = " (retained)" if retained else ""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return f"{shown:<16} {len(payload)} bytes, not JSON{flags}"
    if not isinstance(data, dict):
        return f"{shown:<16} {str(data)[:100]}{flags}"
    if "schema" not in data:  # a command reply
        if "ok" in data:
            rid = data.get("request_id")
            verdict = "ok" if data.get("ok") else f"error: {data.get('error')}"
            return f"{shown:<16} reply {verdict}" + (f" [{rid}]" if rid else "") + flags
        return f"{shown:<16} {json.dumps(data, separators=(',', ':'))[:100]}{flags}"
    if data.get("replayed"):
        flags += " (replayed)"
    payload_data = data.get("payload")
    summary = _summary(
        str(data.get("schema")), payload_data if isinstance(payload_data, dict) else {}
    )
    schema = f"{data.get('schema')} v{data.get('version')}"
    return f"{shown:<16} #{data.get('seq')!s:<5} {schema:<16} {summary}{flags}"


def parse_broker(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; the port defaults to 1883)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        return text.strip("[]"), 1883
    return host.strip("[]") or "127.0.0.1", int(port)


class FeedPrinter:
    """A subscriber that prints the table's feed as it arrives, one line per message (the
    demo's view of what the casino system receives). ``last_seq`` is the highest sequenced
    message seen."""

    name = "mqtt-feed"

    def __init__(self, host: str, port: int, prefix: str, out: TextIO, *, mark: str = "") -> None:
        self.host, self.port, self.prefix, self.out, self.mark = host, port, prefix, out, mark
        self.last_seq = 0
        self.received = 0
        self._seen = asyncio.Event()

    async def run(self, host: object = None) -> None:
        import aiomqtt

        from controller.mqtt.client import Client
        from controller.mqtt.wire import NODELAY

        while True:
            try:
                async with Client(
                    self.host, self.port, keepalive=10, socket_options=NODELAY
                ) as client:
                    await client.subscribe(f"{self.prefix}#", qos=1)
                    async for message in client.messages:
                        self.on_message(
                            message.topic.value, _payload_bytes(message.payload), message.retain
                        )
            except aiomqtt.MqttError:
                await asyncio.sleep(0.5)  # retry interval while the broker is away

    def on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        self.received += 1
        line = format_feed_line(topic, payload, prefix=self.prefix, retained=retained)
        print(f"{self.mark}{line}", file=self.out, flush=True)
        try:
            data = json.loads(payload)
        except ValueError:
            return
        sequenced = isinstance(data, dict) and data.get("schema") not in (None, "paigow.status")
        if sequenced and isinstance(data.get("seq"), int) and not retained:
            self.last_seq = max(self.last_seq, data["seq"])
            self._seen.set()

    async def caught_up(self, seq: int, timeout: float) -> bool:
        """Wait until the message with ``seq`` was printed; False after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.last_seq < seq:
            self._seen.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._seen.wait(), remaining)
        return True


def _payload_bytes(payload: Any) -> bytes:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return b"" if payload is None else str(payload).encode()


# --- paigow-table monitor ------------------------------------------------------------------------


class BrokerDown(Exception):
    """The broker could not be reached when ``monitor`` started (its command exits 69)."""


async def monitor(
    args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """Print the feed on ``out`` (one JSON object a line with ``--json``); comments on ``err``."""
    import aiomqtt

    from controller.config import TlsConfig
    from controller.mqtt.client import Client
    from controller.mqtt.wire import NODELAY, tls_context

    host, port = parse_broker(args.broker)
    prefix = args.prefix if args.prefix.endswith("/") else args.prefix + "/"
    topic = f"{prefix}#" if not args.share else f"$share/{args.share}/{prefix}#"
    context = None
    if args.ca_file or args.cert_file:  # the publisher's TLS rules: verify, TLS 1.2 or newer
        tls = TlsConfig(ca_file=args.ca_file, cert_file=args.cert_file, key_file=args.key_file)
        context = tls_context(tls, passphrase=None)  # a person at a terminal may type it
    password = None
    if args.password_file:
        password = Path(args.password_file).read_text(encoding="utf-8").rstrip("\r\n")
    seen = 0
    subscribed = False
    while True:
        try:
            async with Client(
                host,
                port,
                username=args.username,
                password=password,
                tls_context=context,
                protocol=aiomqtt.ProtocolVersion.V5
                if args.protocol == "5"
                else aiomqtt.ProtocolVersion.V311,
                keepalive=30,
                socket_options=NODELAY,
            ) as client:
                await client.subscribe(topic, qos=1)
                # Comments go to stderr: stdout is the feed alone (`monitor --json | jq`).
                print(f"# subscribed to {topic} on {host}:{port}", file=err, flush=True)
                subscribed = True
                async for message in client.messages:
                    payload = _payload_bytes(message.payload)
                    if args.json:
                        record = {"topic": message.topic.value, "retain": message.retain}
                        with contextlib.suppress(ValueError, UnicodeDecodeError):
                            record["payload"] = json.loads(payload)
                        print(json.dumps(record, ensure_ascii=False), file=out, flush=True)
                    else:
                        line = format_feed_line(
                            message.topic.value, payload, prefix=prefix, retained=message.retain
                        )
                        print(line, file=out, flush=True)
                    seen += 1
                    if args.count and seen >= args.count:
                        return 0
        except aiomqtt.MqttError as exc:
            if not subscribed:  # down (or a typo) at the start: said at once, exit 69
                raise BrokerDown(f"broker {host}:{port}: {exc}") from None
            print(f"# {host}:{port}: {exc}; retrying in 2 s", file=err, flush=True)
            await asyncio.sleep(2)  # retry interval while the broker is away
