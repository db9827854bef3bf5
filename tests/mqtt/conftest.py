"""MQTT tests against a real Mosquitto the suite starts on a free port (never the system's).

``broker`` is a plain anonymous broker; ``make_broker`` builds others (TLS, password file, ACL).
Each is a :class:`simulators.mosquitto.Mosquitto`: its config is written to the test's tmp dir,
persistence is off, ``stop()`` then ``start()`` brings the SAME broker back on the same port.
``Subscriber`` collects what a casino system would receive; tests wait on messages with
timeouts, never on sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import aiomqtt
import jsonschema
import pytest
from paho.mqtt.properties import Properties

from controller.daemon import wait_for
from controller.journal import Journal
from controller.mqtt.publisher import MqttService
from controller.mqtt.wire import NODELAY
from simulators.mosquitto import Mosquitto

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
PREFIX = "casino/demo/paigow/PG-T1/"
WAIT = 10.0  # generous on a loaded two-core box; the fast path takes milliseconds


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    async with Mosquitto(tmp_path / "broker") as b:
        yield b


MakeBroker = Callable[..., Awaitable[Mosquitto]]


@pytest.fixture
async def make_broker(tmp_path: Path) -> AsyncIterator[MakeBroker]:
    started: list[Mosquitto] = []

    async def make(
        *, listener_options: Iterable[str] = (), options: Iterable[str] = (), name: str = "b"
    ) -> Mosquitto:
        b = Mosquitto(tmp_path / name, listener_options=listener_options, options=options)
        started.append(b)
        await b.start()
        return b

    yield make
    for b in started:
        await b.stop()


def mqtt_section(broker: Mosquitto, *lines: str, protocol: str = "3.1.1") -> str:
    """The ``[mqtt]`` section for a table publishing to ``broker`` (fast reconnects)."""
    body = "\n".join(lines)
    return (
        f'\n[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\nprotocol = "{protocol}"\n'
        f"keepalive = 5\n{body}\n[mqtt.reconnect]\ninitial = 0.05\ncap = 0.5\n"
    )


def password_line(user: str, password: str, iterations: int = 101) -> str:
    """A Mosquitto 2 password file line (PBKDF2-SHA512, ``$7$``), made without a command line
    that would show the password."""
    salt = os.urandom(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return (
        f"{user}:$7${iterations}${base64.b64encode(salt).decode()}$"
        f"{base64.b64encode(digest).decode()}\n"
    )


@dataclass
class Received:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    properties: Properties | None = None

    @property
    def json(self) -> Any:
        return json.loads(self.payload)


@dataclass
class Subscriber:
    """An MQTT client that records every message it receives on ``topics``."""

    port: int
    topics: list[str]
    protocol: aiomqtt.ProtocolVersion = aiomqtt.ProtocolVersion.V311
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    queue: asyncio.Queue[Received] = field(default_factory=asyncio.Queue)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # may be shared by several
    client: aiomqtt.Client | None = None
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Subscriber:
        self.client = aiomqtt.Client(
            "127.0.0.1",
            self.port,
            protocol=self.protocol,
            socket_options=NODELAY,
            **self.client_kwargs,
        )
        await self.client.__aenter__()
        for topic in self.topics:
            await self.client.subscribe(topic, qos=1)
        self._task = asyncio.create_task(self._collect(self.client))
        return self

    async def _collect(self, client: aiomqtt.Client) -> None:
        async for m in client.messages:
            payload = m.payload if isinstance(m.payload, bytes) else str(m.payload).encode()
            item = Received(m.topic.value, payload, m.qos, m.retain, m.properties)
            self.received.append(item)
            self.queue.put_nowait(item)
            self.arrived.set()

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.client is not None:
            with contextlib.suppress(aiomqtt.MqttError):  # the broker may be gone already
                await self.client.__aexit__(None, None, None)

    async def next(self, timeout: float = WAIT) -> Received:
        async with asyncio.timeout(timeout):
            return await self.queue.get()

    async def until(self, predicate: Callable[[Received], bool], timeout: float = WAIT) -> Received:
        """The next message (in arrival order) that satisfies ``predicate``."""
        async with asyncio.timeout(timeout):
            while True:
                item = await self.queue.get()
                if predicate(item):
                    return item

    async def seen(self, predicate: Callable[[Received], bool], timeout: float = WAIT) -> Received:
        """The first message received so far that satisfies ``predicate``, or the next one."""
        for item in self.received:
            if predicate(item):
                return item
        return await self.until(predicate, timeout)

    async def take(
        self, count: int, predicate: Callable[[Received], bool], timeout: float = WAIT
    ) -> list[Received]:
        """The next ``count`` messages satisfying ``predicate``, in arrival order."""
        found: list[Received] = []
        async with asyncio.timeout(timeout):
            while len(found) < count:
                item = await self.queue.get()
                if predicate(item):
                    found.append(item)
        return found


async def outbox_empty(journal: Journal, service: MqttService, timeout: float = WAIT) -> None:
    """Wait until the broker acknowledged everything in the outbox."""
    await asyncio.wait_for(
        wait_for(lambda: journal.history.stats().outbox_pending == 0, service.progress), timeout
    )


def on(topic: str) -> Callable[[Received], bool]:
    return lambda m: m.topic == topic


def status_is(state: str) -> Callable[[Received], bool]:
    return lambda m: m.topic == f"{PREFIX}status" and m.json["payload"]["state"] == state


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator: jsonschema.protocols.Validator = cls(schema)
    return validator


def validate_message(message: Received) -> None:
    """Check a received message against its JSON Schema in docs/schemas: by its ``schema``
    field, a command by its topic, a command reply against reply.json."""
    data = message.json
    kind = message.topic.rpartition("/cmd/")[2] if "/cmd/" in message.topic else None
    if kind is not None:
        _validator(f"command.{kind}.json").validate(data)
    elif "schema" in data:
        _validator(f"{data['schema']}.v{data['version']}.json").validate(data)
    else:
        _validator("reply.json").validate(data)


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(directory: Path) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate (P-256)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=paigow test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    for name, subject, ext in (
        ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
         "extendedKeyUsage=serverAuth\n"),
        ("client", "/CN=paigow-PG-T1", "extendedKeyUsage=clientAuth\n"),
    ):  # fmt: skip
        (directory / f"{name}.ext").write_text(
            ext + "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
        )
        openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
                cwd=directory)  # fmt: skip
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
            cwd=directory,
        )  # fmt: skip
    return directory


@dataclass
class Gate:
    """A broker's password file that admits the watcher ("cms") always and the table's user
    only while open: a restarted broker can be made to take the subscriber before the table
    reconnects, with no race (``close``, restart, subscribe, ``open``)."""

    broker: Mosquitto
    directory: Path
    table_user: str = "table-pg-t1"
    table_password: str = "table-pw-Zq81"
    cms_password: str = "cms-pw-k2"

    @property
    def passwords(self) -> Path:
        return self.directory / "passwords"

    @property
    def table_password_file(self) -> Path:
        return self.directory / "table.password"

    def write(self, *, table_allowed: bool) -> None:
        lines = password_line("cms", self.cms_password)
        if table_allowed:
            lines += password_line(self.table_user, self.table_password)
        self.passwords.write_text(lines)

    def open(self) -> None:
        self.write(table_allowed=True)
        self.broker.reload()

    def mqtt_lines(self) -> list[str]:
        return [
            f'username = "{self.table_user}"',
            f'password_file = "{self.table_password_file}"',
        ]

    def cms(self) -> dict[str, Any]:
        return {"username": "cms", "password": self.cms_password}


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[Gate]:
    directory = tmp_path / "gated"
    directory.mkdir()
    broker = Mosquitto(directory, options=["allow_anonymous false"])
    gate = Gate(broker, directory)
    broker.options.append(f"password_file {gate.passwords}")
    gate.table_password_file.write_text(gate.table_password + "\n")
    gate.table_password_file.chmod(0o600)  # `run` refuses a secret others may read
    gate.write(table_allowed=True)
    await broker.start()
    yield gate
    await broker.stop()
