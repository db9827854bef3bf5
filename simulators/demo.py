"""`paigow-table demo`: the whole daemon with every device simulated, over ptys, through the real
drivers: a card-recognizing shuffler and an RNG box deal a round every few seconds, and each round
is printed as it settles. ``--rounds N`` stops after N rounds, once everything is journaled."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Self, TextIO

from controller.config import Config, parse_config
from controller.devices import build_devices
from controller.display import DisplayService
from controller.journal import Journal
from controller.logging import configure_logging
from controller.messages import RoundPayload
from controller.mqtt.feed import FeedPrinter, parse_broker
from controller.ports import EffectSource, Service
from controller.table import AlarmRaised, DeviceChanged, Effect, RoundClosed
from controller.wiring import build_daemon, default_services
from controller.words import words
from simulators.faults import FAULTS
from simulators.mosquitto import MOSQUITTO, Mosquitto
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator

DEMO_TABLE = "PG-DEMO"

DEMO_CONFIG = """
[table]
id = "{table}"
site = "demo"
name = "Demo table"
time_sync = false  # a lab or laptop may have no time service (docs/operations.md, Time)

[rules]
wheel_rank = "second_highest"

[paytables]
chan_chu = "PT3"
jacks_beat = "B"
envy = true

[devices.shuffler]
driver = "reference_shuffler"
role = "cards"
transport = "serial"
port = "{shuffler}"
identity = {{ make = "Simulated", model = "SIM-SHF", firmware = "1.0", serial = "SIM-{table}-S" }}

[devices.rng]
driver = "reference_rng"
role = "position"
transport = "serial"
port = "{rng}"
identity = {{ make = "Simulated", model = "SIM-RNG", firmware = "1.0", serial = "SIM-{table}-R" }}

[journal]
path = "{journal}"
synchronous = "FULL"

[logging]
level = "WARNING"
"""


def demo_config(
    workdir: Path, journal: Path, table: str = DEMO_TABLE, extra: str = "", journal_extra: str = ""
) -> Config:
    """The demo's config; ``extra`` appends sections, ``journal_extra`` adds ``[journal]`` keys."""
    text = DEMO_CONFIG.format(
        table=table, shuffler=workdir / "shuffler", rng=workdir / "rng", journal=journal
    ).replace('synchronous = "FULL"\n', 'synchronous = "FULL"\n' + journal_extra)
    return parse_config(text + extra, file="<demo>", check_files=False)


def display_config(http_port: int, void_pin_file: Path | None = None) -> str:
    """The demo's ``[display]`` section: the dealer and supervisor pages on loopback, and the
    supervisor PIN that voids rounds and acknowledges latched alarms."""
    pin = f'void_pin_file = "{void_pin_file}"\n' if void_pin_file is not None else ""
    return f'\n[display]\nhost = "127.0.0.1"\nport = {http_port}\n{pin}'


def demo_pin(workdir: Path) -> tuple[str, Path]:
    """A fresh six-digit supervisor PIN for this demo run, in a file only its owner reads."""
    pin = f"{secrets.randbelow(900_000) + 100_000}"
    path = workdir / "void-pin"
    path.write_text(pin + "\n", encoding="utf-8")
    path.chmod(0o600)
    return pin, path


#: The key id of the demo's command key (docs/mqtt.md, "Signed commands").
DEMO_KEY_ID = "demo"


def demo_command_keys(workdir: Path) -> Path:
    """A fresh HMAC key the demo table takes signed commands under, in a file only its owner
    reads: a demo shows the table as it is deployed, not with unsigned commands."""
    path = workdir / "command-keys"
    path.write_text(f"{DEMO_KEY_ID} hmac-sha256 {secrets.token_hex(32)}\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def demo_feed_key(workdir: Path) -> Path:
    """The demo table's own feed key, made here as the package's postinst makes it at install
    (``feed-key init``), so the table reads it and does not warn that it had to make one."""
    from controller.mqtt.feed_key import create_feed_key

    path = workdir / "feed.key"
    create_feed_key(path)
    return path


_STATUS_WORDS = {"settled": "settled", "dead": "dead", "misdeal": "misdealt", "void": "void"}


def journal_summary(by_status: dict[str, int]) -> str:
    """``1 settled, 2 misdealt`` — for people, in the order a round can end."""
    parts = [f"{by_status[s]} {w}" for s, w in _STATUS_WORDS.items() if by_status.get(s)]
    parts += [f"{n} {s}" for s, n in sorted(by_status.items()) if s not in _STATUS_WORDS and n]
    return ", ".join(parts) or "none closed"


def format_round(p: RoundPayload) -> str:
    """A round as a person reads it on a terminal."""
    head = f"round {p.round_seq:>4}  {p.round_id}"
    if p.status != "settled":
        reasons = "; ".join(f"{words(r.code)} ({r.detail})" for r in p.reasons)
        banner = "VOID" if p.status == "void" else "ALL HANDS DEAD"
        return f"{head}\n  {banner} ({p.status}) — {reasons}"
    lines = [head]
    if p.first_position:
        fp = p.first_position
        drawn = f"RNG {fp.number}" if fp.number else f"dice {fp.dice}"
        lines.append(f"  first packet to position {fp.position} ({drawn}, {words(fp.method)})")
    d = p.dealer
    if d is not None:
        lines.append(f"  dealer  {' '.join(d.cards):<22} {d.best_hand}")
        if d.two_jacks or d.setting is None:
            lines.append("          DEALER HAS TWO JACKS: Pai Gow wagers lose; Jacks Beat pays")
        else:
            s = d.setting
            lines.append(
                f"          House Way {s.rule}: {' '.join(s.front)} | {' '.join(s.back)}"
                f"   ({s.front_hand} / {s.back_hand})"
            )
    for seat in p.seats:
        sides = [_side("Chan Chu", seat.chan_chu.line, seat.chan_chu.pays)]
        if seat.jacks_beat.pays > 0:
            sides.append(_side("Jacks Beat", seat.jacks_beat.line, seat.jacks_beat.pays))
        if seat.push_ace_high.pays > 0:
            sides.append(_side("Ace High", seat.push_ace_high.line, seat.push_ace_high.pays))
        if seat.envy and seat.envy.total:
            sides.append(f"Envy ${seat.envy.total}")
        lines.append(f"  seat {seat.seat:<3} {' '.join(seat.cards):<22} " + " · ".join(sides))
    return "\n".join(lines)


def _side(wager: str, line: str, pays: int) -> str:
    """ "Chan Chu flush 4 to 1", "Chan Chu loses": the line is named only when it pays."""
    return f"{wager} {words(line)} {_pays(pays)}" if pays > 0 else f"{wager} {_pays(pays)}"


def _pays(pays: int) -> str:
    return {0: "push", -1: "loses"}.get(pays, f"{pays} to 1")


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

    def config_extra(self, command_keys: Path, feed_key: Path) -> str:
        return (
            f'\n[mqtt]\nhost = "{self.host}"\nport = {self.port}\nkeepalive = 10\n'
            f'command_keys_file = "{command_keys}"\nfeed_key_file = "{feed_key}"\n'
        )

    def services(self, prefix: str) -> list[Service]:
        self.feed = FeedPrinter(self.host, self.port, prefix, self.out, mark="  mqtt ▸ ")
        return [self.feed]

    def ready(self, journal: Journal) -> Callable[[], Awaitable[bool]]:
        """Waits until the feed printed everything journaled so far (at most 10 s): the broker
        is connected and the backlog of the start (devices online) drained."""

        async def wait() -> bool:
            return self.feed is not None and await self.feed.caught_up(
                journal.outbox.message_seq(), timeout=10
            )

        return wait

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
                while journal.outbox.count() and loop.time() < deadline:
                    await asyncio.sleep(0.1)
                if not journal.outbox.count():
                    seq = journal.outbox.message_seq()
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


class DemoDealer:
    """Presses the RNG box and deals a round every ``interval`` seconds, ``rounds`` times."""

    name = "demo-dealer"

    def __init__(
        self,
        shuffler: ShufflerSimulator,
        rng: RngSimulator,
        *,
        rounds: int | None,
        interval: float,
        fault_rate: float,
        seed: int | None,
        out: TextIO,
        on_done: Callable[[], None],
    ) -> None:
        self.shuffler, self.rng = shuffler, rng
        self.rounds, self.interval, self.fault_rate = rounds, interval, fault_rate
        self.random = random.Random(seed)
        self.out = out
        self.on_done = on_done
        self.closed = 0
        self._closed = asyncio.Event()
        self._online: set[str] = set()
        self.display: DisplayService | None = None
        self.feed_ready: Callable[[], Awaitable[object]] | None = None
        self._devices_up = asyncio.Event()

    def on_effect(self, effect: Effect) -> None:
        if isinstance(effect, RoundClosed):
            self.closed += 1
            print(format_round(effect.payload) + "\n", file=self.out, flush=True)
            self._closed.set()
        elif isinstance(effect, AlarmRaised) and effect.payload.severity == "critical":
            print(
                f"  ALARM {words(effect.payload.code)}: {effect.payload.detail}",
                file=self.out,
                flush=True,
            )
        elif isinstance(effect, DeviceChanged):
            if effect.payload.online:
                self._online.add(effect.payload.device)
            else:
                self._online.discard(effect.payload.device)
            if {"shuffler", "rng"} <= self._online:
                self._devices_up.set()

    async def run(self, host: EffectSource) -> None:
        host.subscribe(self.on_effect)
        if self.display is not None:
            await self.display.wait_started()  # the port it got, also when asked for any (0)
            web = self.display.url
            pages = f"dealer page {web}/dealer   supervisor {web}/supervisor\n"
            print(pages, file=self.out, flush=True)
        await asyncio.wait_for(self._devices_up.wait(), timeout=30)
        if self.feed_ready is not None:
            # The first round goes out live, not from a backlog the broker had not yet taken.
            await self.feed_ready()
        dealt = 0
        while self.rounds is None or dealt < self.rounds:
            faults: list[str] = []
            if self.fault_rate and self.random.random() < self.fault_rate:
                faults = [self.random.choice([f for f in FAULTS if f != "unplug_replug"])]
                print(
                    f"  (injecting fault: {faults[0].replace('_', ' ')})", file=self.out, flush=True
                )
            self._closed.clear()
            before = self.closed
            await self.rng.press()
            await self.shuffler.deal(faults or None)
            dealt += 1
            # A round closes on its own, or (silence mid-deal) at the next deal or its timeout.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wait_closed(before), timeout=max(5.0, self.interval))
            await asyncio.sleep(self.interval)
        self.on_done()

    async def _wait_closed(self, before: int) -> None:
        while self.closed <= before:
            self._closed.clear()
            await self._closed.wait()


async def run_demo(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """``paigow-table demo``. Run in a process that goes on (the tests), SIGTERM and SIGINT are
    the process's own again when it returns (``controller.systemd.stop_signals_restored``)."""
    from controller.systemd import stop_signals_restored

    with stop_signals_restored():
        return await _run_demo(args, out)


async def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging("WARNING", "console")
    # Ctrl-C from the first moment stops the demo in order (asyncio.run's own SIGINT handler
    # would cancel the setup half-way); the daemon keeps these handlers while it runs.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with tempfile.TemporaryDirectory(prefix="paigow-demo-") as tmp:
        workdir = Path(tmp)
        journal_path = Path(args.journal) if args.journal else workdir / "journal.sqlite3"
        mqtt = DemoMqtt.from_args(args, workdir, out)  # None: MQTT off
        pin, pin_file = demo_pin(workdir)
        keys = demo_command_keys(workdir)
        feed_key = demo_feed_key(workdir)
        config = demo_config(
            workdir,
            journal_path,
            extra=display_config(args.http_port, pin_file)
            + (mqtt.config_extra(keys, feed_key) if mqtt else ""),
        )
        bias = getattr(args, "bias", None)
        shuffler = ShufflerSimulator(
            PtyPort(workdir / "shuffler"),
            seed=args.seed,
            interval=0.0,
            bias=bias if bias != "rng_favours_3" else None,
        )
        rng = RngSimulator(PtyPort(workdir / "rng"), seed=args.seed, bias=bias)
        async with shuffler, rng, mqtt or contextlib.nullcontext():
            devices, sinks = build_devices(config)
            with Journal.open(journal_path, config.table.id) as journal:
                dealer = DemoDealer(
                    shuffler,
                    rng,
                    rounds=args.rounds,
                    interval=args.interval,
                    fault_rate=args.fault_rate,
                    seed=args.seed,
                    out=out,
                    on_done=(
                        mqtt.stop_when_delivered(journal, stop, args.drain_timeout)
                        if mqtt
                        else stop.set
                    ),
                )
                services: list[Service] = [*default_services(config, sinks), dealer]
                if mqtt:
                    services += mqtt.services(config.mqtt.topic_prefix)
                    dealer.feed_ready = mqtt.ready(journal)
                daemon = build_daemon(config, journal, devices, services)
                print(
                    f"demo table {config.table.id}: shuffler on {shuffler.port.describe()}, "
                    f"RNG box on {rng.port.describe()}, journal {journal_path}",
                    file=out,
                    flush=True,
                )
                print(
                    f"supervisor PIN (voids, acknowledging alarms; this demo only): {pin}",
                    file=out,
                    flush=True,
                )
                if mqtt:
                    print(
                        f"MQTT commands: signed, key {DEMO_KEY_ID} in {keys} (this demo only): "
                        f"paigow-table sign-command KIND '{{…}}' --table-id {config.table.id} "
                        f"--keys-file {keys} --key-id {DEMO_KEY_ID}",
                        file=out,
                        flush=True,
                    )
                dealer.display = next((s for s in services if isinstance(s, DisplayService)), None)
                await daemon.run(stop, handle_signals=True)
                stats = journal.history.stats()
                undelivered = journal.outbox.count() if mqtt else 0
        print(
            f"{dealer.closed} rounds closed; journal: {stats.rounds} rounds "
            f"({journal_summary(stats.by_status)})",
            file=out,
            flush=True,
        )
        if undelivered:
            kept = (
                f"they stay in the journal {journal_path}"
                if args.journal
                else "they are lost with the temporary journal (use --journal FILE to keep it)"
            )
            print(
                f"{undelivered} messages were not delivered to the broker; {kept}",
                file=out,
                flush=True,
            )
    return 0
