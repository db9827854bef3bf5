"""MQTT on the command line: ``paigow-table monitor`` (the feed for a person), ``paigow-table
schemas`` (the JSON Schemas), a private Mosquitto for the demo and the tests, and the demo's
feed printer.

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
import os
import pwd
import shutil
import signal
import socket
import sys
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TextIO

from controller.words import words

if TYPE_CHECKING:
    from controller.journal import Journal
    from controller.ports import Service

MOSQUITTO = "/usr/sbin/mosquitto"


# --- a private broker ----------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _with_parent(command: list[str]) -> list[str]:
    """``command`` made to get SIGTERM when we die (util-linux ``setpriv --pdeathsig``), so a
    killed demo or test run leaves no broker behind (it exits within a second). Unchanged where
    setpriv is missing. (``preexec_fn`` could do it too, but is unsafe once threads exist.)"""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command


class Mosquitto:
    """A Mosquitto broker of our own: its config in ``workdir``, one listener on 127.0.0.1,
    persistence off. ``start`` returns once the broker says it is running; ``stop`` and
    ``start`` again reuse the same port (an outage); ``reload`` sends SIGHUP (password file, ACL
    and ``allow_anonymous`` are re-read). ``listener_options`` go under the listener (TLS);
    ``options`` at the top level (auth, ACL)."""

    def __init__(
        self,
        workdir: Path,
        port: int = 0,
        *,
        listener_options: Iterable[str] = (),
        options: Iterable[str] = (),
        binary: str = MOSQUITTO,
        persistence: bool = False,
        autosave: int = 30,
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.listener_options = list(listener_options)
        self.options = list(options)
        self.binary = binary
        self.persistence = persistence
        self.autosave = autosave
        self.starts = 0
        self.conf = workdir / "mosquitto.conf"
        self.log: deque[str] = deque(maxlen=2000)
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _persistence(self) -> list[str]:
        """With persistence the broker keeps sessions and queued QoS 1 messages in
        ``mosquitto.db``, written on a clean stop and every ``autosave`` seconds, read at start:
        a ``stop`` then ``start`` is a restart that loses no session; ``kill`` is a crash."""
        if not self.persistence:
            return ["persistence false"]
        return [
            "persistence true",
            f"persistence_location {self.workdir}/",
            "persistence_file mosquitto.db",
            f"autosave_interval {self.autosave}",
        ]

    def write_config(self) -> None:
        lines = [
            f"listener {self.port} 127.0.0.1",
            *self.listener_options,
            *self._persistence(),
            # Run as root, mosquitto would switch to the "mosquitto" user, who cannot read our
            # private directory; as anyone else this line changes nothing.
            f"user {pwd.getpwuid(os.getuid()).pw_name}",
            "log_dest stderr",  # unbuffered, unlike stdout into a pipe
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            # Without it Nagle holds back PUBACKs: ~40 ms stalls per publish window.
            "set_tcp_nodelay true",
            *self.options,
        ]
        if not any(line.startswith("allow_anonymous") for line in self.options):
            lines.append("allow_anonymous true")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.conf.write_text("\n".join(lines) + "\n", encoding="utf-8")

    async def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        self.write_config()
        self._proc = await asyncio.create_subprocess_exec(
            *_with_parent([self.binary, "-c", str(self.conf)]),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            # Its own session: a terminal's Ctrl-C reaches the demo, which stops the broker
            # after the table has stopped (a broker dying first makes paho fail on closed fds).
            start_new_session=True,
        )
        self.starts += 1
        up: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(self._proc, up), name="mosquitto.log")
        try:
            await asyncio.wait_for(up, timeout)
        except BaseException:
            await self.kill()
            raise

    async def _read(self, proc: asyncio.subprocess.Process, up: asyncio.Future[None]) -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            self.log.append(line)
            if not up.done() and " running" in line:
                up.set_result(None)
        if not up.done():
            tail = "\n".join(list(self.log)[-10:])
            up.set_exception(RuntimeError(f"mosquitto exited on port {self.port}:\n{tail}"))

    async def stop(self, timeout: float = 10.0) -> None:
        """A clean stop (SIGTERM): with persistence, the broker saves its sessions first."""
        await self._end(signal.SIGTERM, timeout)

    async def kill(self) -> None:
        """A crash (SIGKILL): what the broker had not saved is gone."""
        await self._end(signal.SIGKILL, 5.0)

    async def _end(self, sig: signal.Signals, timeout: float) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.send_signal(sig)
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._reader, 5)
            self._reader = None

    def reload(self) -> None:
        """Re-read the config (SIGHUP)."""
        self.write_config()
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGHUP)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


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

        from controller.mqtt import NODELAY

        while True:
            try:
                async with aiomqtt.Client(
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


# --- the demo ------------------------------------------------------------------------------------


class DemoMqtt:
    """What ``paigow-table demo`` needs for MQTT: a private broker (or ``--broker``), the
    ``[mqtt]`` config section, the feed printer, and a stop that waits for the feed."""

    def __init__(self, host: str, port: int, out: TextIO, broker: Mosquitto | None) -> None:
        self.host, self.port, self.out, self.broker = host, port, out, broker
        self.feed: FeedPrinter | None = None
        self._stopping: set[asyncio.Task[None]] = set()

    @classmethod
    def from_args(cls, args: argparse.Namespace, workdir: Path, out: TextIO) -> DemoMqtt | None:
        """None when MQTT is off (``--no-mqtt``, or no Mosquitto and no ``--broker``)."""
        if getattr(args, "no_mqtt", False):
            return None
        broker_arg = getattr(args, "broker", None)
        if broker_arg:
            host, port = parse_broker(broker_arg)
            return cls(host, port, out, None)
        binary = MOSQUITTO if os.access(MOSQUITTO, os.X_OK) else shutil.which("mosquitto")
        if binary is None:
            print("(MQTT off: no mosquitto found; use --broker HOST:PORT)", file=out, flush=True)
            return None
        broker = Mosquitto(
            workdir / "mosquitto", getattr(args, "mqtt_port", None) or 0, binary=binary
        )
        return cls("127.0.0.1", broker.port, out, broker)

    @property
    def config_extra(self) -> str:
        return f'\n[mqtt]\nhost = "{self.host}"\nport = {self.port}\nkeepalive = 10\n'

    def services(self, prefix: str) -> list[Service]:
        self.feed = FeedPrinter(self.host, self.port, prefix, self.out, mark="  mqtt ▸ ")
        return [self.feed]

    def stop_when_delivered(
        self, journal: Journal, stop: asyncio.Event, drain_timeout: float
    ) -> Callable[[], None]:
        """A callback that sets ``stop`` once the broker acknowledged every journaled message
        (the outbox is empty) or ``drain_timeout`` seconds passed, and the feed printed them."""

        def done() -> None:
            async def wait_then_stop() -> None:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + drain_timeout
                # The publisher deletes a row on its PUBACK; it signals nothing else to wait on.
                while journal.outbox_pending() and loop.time() < deadline:
                    await asyncio.sleep(0.1)
                if not journal.outbox_pending():
                    seq = journal.message_seq()
                    if self.feed is not None and not await self.feed.caught_up(seq, timeout=5):
                        print("  (the feed printer missed messages)", file=self.out, flush=True)
                stop.set()

            task = asyncio.get_running_loop().create_task(wait_then_stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

        return done

    async def __aenter__(self) -> Self:
        if self.broker is not None:
            await self.broker.start()
        where = "a private Mosquitto" if self.broker else "the broker"
        print(f"MQTT: {where} on {self.host}:{self.port}", file=self.out, flush=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.broker is not None:
            await self.broker.stop()


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--mqtt-port",
        type=int,
        default=None,
        help="port of the demo's private Mosquitto on 127.0.0.1 (default: a free one)",
    )
    group.add_argument("--broker", metavar="HOST:PORT", help="publish to this broker instead")
    group.add_argument("--no-mqtt", action="store_true", help="do not publish over MQTT")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="with --rounds: wait up to S seconds for the broker to acknowledge every message "
        "before stopping (default 60)",
    )


# --- paigow-table monitor ------------------------------------------------------------------------


async def monitor(
    args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """Print the feed on ``out`` (one JSON object a line with ``--json``); comments on ``err``."""
    import ssl

    import aiomqtt

    from controller.mqtt import NODELAY

    host, port = parse_broker(args.broker)
    prefix = args.prefix if args.prefix.endswith("/") else args.prefix + "/"
    topic = f"{prefix}#" if not args.share else f"$share/{args.share}/{prefix}#"
    context = None
    if args.ca_file or args.cert_file:
        context = ssl.create_default_context(cafile=args.ca_file)
        if args.cert_file:
            context.load_cert_chain(args.cert_file, args.key_file)
    password = None
    if args.password_file:
        password = Path(args.password_file).read_text(encoding="utf-8").rstrip("\r\n")
    seen = 0
    while True:
        try:
            async with aiomqtt.Client(
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
            print(f"# {host}:{port}: {exc}; retrying in 2 s", file=err, flush=True)
            await asyncio.sleep(2)  # retry interval while the broker is away


def cmd_monitor(args: argparse.Namespace) -> int:
    return asyncio.run(monitor(args))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``monitor`` and ``schemas`` to the ``paigow-table`` command line."""
    from controller import schemas

    p = sub.add_parser(
        "monitor",
        help="print a table's MQTT feed as it arrives",
        description="Subscribe to <prefix># and print one line per message (topic, seq, "
        "schema, summary).",
    )
    p.add_argument("--broker", default="127.0.0.1:1883", metavar="HOST:PORT")
    p.add_argument(
        "--prefix",
        default="casino/+/paigow/+/",
        help="topic prefix, e.g. casino/demo/paigow/PG-DEMO/ (wildcards allowed)",
    )
    p.add_argument("--protocol", choices=["3.1.1", "5"], default="3.1.1")
    p.add_argument("--share", metavar="GROUP", help="subscribe as $share/GROUP/… (scale out)")
    p.add_argument("--username")
    p.add_argument("--password-file", help="file holding the password (never on the command line)")
    p.add_argument("--ca-file", help="CA of the broker's certificate (enables TLS)")
    p.add_argument("--cert-file", help="client certificate (TLS)")
    p.add_argument("--key-file", help="client key (TLS)")
    p.add_argument("--json", action="store_true", help="print each message as a JSON line")
    p.add_argument("--count", type=int, default=0, help="exit after N messages")
    p.set_defaults(func=cmd_monitor)
    p = sub.add_parser(
        "schemas",
        help="write the MQTT feed's JSON Schemas",
        description="Write the JSON Schemas of every message and command (docs/schemas).",
    )
    schemas.add_arguments(p)
    p.set_defaults(func=schemas.cmd_schemas)
