"""An honest day never looks like tampering (issue 39): a stateful property test drives the real
daemon loop, the real ``Table`` and the real SQLite journal through random interleavings of what
a dealer, a supervisor, the casino's system and the devices do — every command kind from every
channel, signed and refused, whole deals and faulty ones, position draws and typed-in dice,
device faults, timeouts, restarts mid-round and journal writes refused (the table rolled back and
tilted, then recovered) — and after every step the journal passes ``audit verify`` (the rules
engine deals every round again), ``journal backup`` keeps a good copy, and ``audit recall`` shows
each round as the table closed it.

No broker, page or device process: the daemon's own queue is fed the events a driver, the pages
and the MQTT layer would put there (the channel and identity with each command), so a budget of
examples runs in seconds (``make check``: the ``quick`` profile; ``make test``: more). The same
story through a real daemon, its devices and its dealer page is ``test_honest_day_daemon.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import sqlite3
import tempfile
from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from controller.audit import RulesReplay, verify_journal
from controller.clock import utc_now
from controller.daemon import Daemon
from controller.game.cards import DECK, card_texts
from controller.journal import Journal
from controller.journal.audit import recall_rounds
from controller.journal.maintenance import backup_journal
from controller.messages import (
    AcknowledgeAlarm,
    Authenticate,
    CloseTable,
    Command,
    EnterDice,
    OpenTable,
    PlayerSetting,
    Resend,
    SetSeats,
    SetWagers,
    SignIn,
    SignOut,
    StatusRequest,
    VoidRound,
    Wagers,
)
from controller.ports import Origin
from controller.table import Effect, Refusal, RoundClosed, Tick
from controller.wiring import build_daemon
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    DeviceFault,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    PacketDealt,
    PositionDrawn,
    StubVerified,
)
from simulators.demo import demo_config

T = TypeVar("T")
TABLE = "PG-HD"
SEATS = ["1", "2", "3", "4", "5", "6"]
DEALERS = ["D-17", "D-23", "D-40"]
#: Who sends a command: the dealer page on the table computer, a supervisor's page elsewhere,
#: the casino's system with a signed command.
ORIGINS = [
    Origin("kiosk", "127.0.0.1"),
    Origin("display", "10.1.2.3 badge S-1"),
    Origin("mqtt", "casino/PG-HD/cmd key:casino"),
]
DEAL_KINDS = ["whole", "whole", "whole", "shoe", "short", "duplicate", "second_joker", "partial"]


def _deck(seed: int) -> list[str]:
    deck = [str(c) for c in DECK]
    random.Random(seed).shuffle(deck)
    return deck


def _deal(deck: list[str], kind: str, shuffle_id: str, cut: int) -> list[Any]:
    """A shuffler's (or, ``shoe``, a dealing shoe's) events for ``deck``, as ``kind`` spoils it."""
    if kind == "shoe":
        return [
            DealStarted(device="shoe", shuffle_id=shuffle_id),
            *(CardDealt(device="shoe", card=c) for c in deck[:49]),
            DealEnded(device="shoe"),
        ]
    deck = list(deck)
    if kind == "duplicate":
        deck[cut % 49] = deck[(cut + 1) % 49]
    elif kind == "second_joker":
        deck[cut % 49 if deck[cut % 49] != "JK" else (cut + 1) % 49] = "JK"
    packets = [tuple(deck[7 * i : 7 * i + 7]) for i in range(7)]
    if kind == "short":
        packets[cut % 7] = packets[cut % 7][:6]
    if kind == "partial":  # the deal stops: a timeout, a new deal, a restart or a void ends it
        packets = packets[: cut % 6 + 1]
    events: list[Any] = [DealStarted(device="shuffler", shuffle_id=shuffle_id)]
    events += [PacketDealt(device="shuffler", index=i, cards=p) for i, p in enumerate(packets)]
    if kind != "partial":
        events += [
            StubVerified(device="shuffler", cards=tuple(deck[49:])),
            DealEnded(device="shuffler"),
        ]
    return events


class HonestDay(RuleBasedStateMachine):
    """One table's day; every step is followed by the audit a regulator would run."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="honest-day-"))
        self.path = self.dir / "journal.sqlite3"
        self.config = demo_config(self.dir, self.path, table=TABLE)
        self.loop = asyncio.new_event_loop()
        self.closed: dict[str, str] = {}  # round id -> the status the table last closed it as
        self.decks = 0
        self.last_deal: list[Any] = []
        self.journal: Journal | None = None
        self.daemon: Daemon | None = None
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()

    # --- the daemon, started and stopped as systemd would --------------------------------------

    def _run(self, awaitable: Awaitable[T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(awaitable, 20))

    def _start(self) -> None:
        # Durable as a real table's is tested elsewhere; here only what is written matters.
        self.journal = Journal.open(self.path, TABLE, synchronous="NORMAL")
        daemon = build_daemon(self.config, self.journal, [])
        daemon.tick_interval = 3600.0  # the test sends its own ticks
        daemon.subscribe(self._heard)
        self.stop = asyncio.Event()

        async def started() -> asyncio.Task[None]:
            task = asyncio.get_running_loop().create_task(daemon.run(self.stop))
            await daemon.ready.wait()
            return task

        self.task = self._run(started())
        self.daemon = daemon
        self._settle()

    def _stop(self) -> None:
        if self.task is not None:
            self.stop.set()
            self._run(self.task)
        if self.journal is not None:
            self.journal.close()
        self.daemon, self.task, self.journal = None, None, None

    def teardown(self) -> None:
        with contextlib.suppress(Exception):
            self._stop()
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _heard(self, effect: Effect) -> None:
        if isinstance(effect, RoundClosed):
            self.closed[effect.payload.round_id] = effect.payload.status

    def _settle(self) -> None:
        """Until the daemon has handled all it was given (its consumer handles an item in one
        step once it takes it off the queue) and its services had their turn."""

        async def drained() -> None:
            assert self.daemon is not None
            for _ in range(10_000):
                if self.daemon.queue.empty():
                    break
                await asyncio.sleep(0)
            for _ in range(20):
                await asyncio.sleep(0)

        self._run(drained())

    def _put(self, events: list[Any]) -> None:
        assert self.daemon is not None
        for event in events:
            self.daemon.put_nowait(event)
        self._settle()

    def _submit(self, command: Command, origin: Origin) -> None:
        assert self.daemon is not None
        self._run(self.daemon.submit(command, origin=origin))
        self._settle()

    @initialize()
    def start(self) -> None:
        self._start()
        self._put([DeviceOnline(device="shuffler"), DeviceOnline(device="rng")])

    # --- the devices ---------------------------------------------------------------------------

    @rule(seed=st.integers(0, 10**6), kind=st.sampled_from(DEAL_KINDS), cut=st.integers(0, 48))
    def deal(self, seed: int, kind: str, cut: int) -> None:
        self.decks += 1
        self.last_deal = _deal(_deck(seed), kind, f"S-{seed}-{self.decks}", cut)
        self._put(self.last_deal)

    @rule()
    def replayed_deal(self) -> None:
        """The same cards again (a recorded deal played back into the line)."""
        self._put(self.last_deal)

    @rule(number=st.integers(1, 7), dice=st.tuples(*[st.integers(1, 6)] * 3), rng=st.booleans())
    def draw(self, number: int, dice: tuple[int, int, int], rng: bool) -> None:
        if rng:
            self._put([PositionDrawn(device="rng", method="rng", number=number)])
        else:
            self._put([PositionDrawn(device="dice", method="dice", dice=dice)])

    @rule(
        device=st.sampled_from(["shuffler", "rng"]),
        what=st.sampled_from(["offline", "online", "fault", "frame"]),
    )
    def device_event(self, device: str, what: str) -> None:
        event: Any = {
            "offline": DeviceOffline(device=device, reason="cable"),
            "online": DeviceOnline(device=device),
            "fault": DeviceFault(device=device, code="jam", detail="card jam"),
            "frame": FrameError(device=device, error="checksum", detail="bad checksum"),
        }[what]
        self._put([event])

    @rule(seconds=st.sampled_from([1, 5, 40, 120]))
    def tick(self, seconds: int) -> None:
        """Time passes (40 s or more: a deal stopped mid-way times out)."""
        self._put([Tick(utc_now() + timedelta(seconds=seconds))])

    # --- people and the casino's system ----------------------------------------------------------

    @rule(dealer=st.sampled_from(DEALERS), origin=st.sampled_from(ORIGINS))
    def sign_in(self, dealer: str, origin: Origin) -> None:
        self._submit(SignIn(dealer_id=dealer), origin)

    @rule(origin=st.sampled_from(ORIGINS))
    def sign_out(self, origin: Origin) -> None:
        self._submit(SignOut(), origin)

    @rule(occupied=st.lists(st.booleans(), min_size=6, max_size=6), origin=st.sampled_from(ORIGINS))
    def seats(self, occupied: list[bool], origin: Origin) -> None:
        self._submit(SetSeats(occupied=dict(zip(SEATS, occupied, strict=True))), origin)

    @rule(
        seat=st.sampled_from(SEATS),
        amounts=st.tuples(*[st.none() | st.integers(1, 500)] * 4),
        origin=st.sampled_from(ORIGINS),
    )
    def wagers(self, seat: str, amounts: tuple[int | None, ...], origin: Origin) -> None:
        pai_gow, chan_chu, jacks_beat, ace_high = amounts
        wagers = Wagers(
            pai_gow=pai_gow, chan_chu=chan_chu, jacks_beat=jacks_beat, push_ace_high=ace_high
        )
        self._submit(SetWagers(seat=seat, wagers=wagers), origin)

    @rule(dice=st.tuples(*[st.integers(1, 6)] * 3), name_round=st.booleans())
    def enter_dice(self, dice: tuple[int, int, int], name_round: bool) -> None:
        assert self.daemon is not None
        r = self.daemon.table.round
        round_id = r.round_id if name_round and r is not None else None
        self._submit(EnterDice(dice=dice, round_id=round_id), ORIGINS[0])

    @rule(by=st.sampled_from([None, "S-1"]), origin=st.sampled_from(ORIGINS))
    def void(self, by: str | None, origin: Origin) -> None:
        self._submit(VoidRound(reason="the floor says so", by=by), origin)

    @rule(
        seat=st.sampled_from(SEATS),
        front=st.none() | st.integers(0, 6),
        correction=st.booleans(),
    )
    def player_setting(self, seat: str, front: int | None, correction: bool) -> None:
        assert self.daemon is not None
        r = self.daemon.table.round
        cards = _seat_cards(r, seat) if r is not None else None
        pair = None
        if cards is not None and front is not None:
            pair = (cards[front], cards[(front + 1) % 7])
        command = PlayerSetting(
            seat=seat,
            front=pair,
            house_way=pair is None,
            by="S-1" if correction else None,
            reason="the player meant the other pair" if correction else "",
        )
        self._submit(command, ORIGINS[1])

    @rule(pick=st.integers(0, 10), origin=st.sampled_from(ORIGINS))
    def acknowledge(self, pick: int, origin: Origin) -> None:
        assert self.daemon is not None
        latched = list(self.daemon.table.latched) or ["alarm-none"]
        alarm_id = latched[pick % len(latched)]
        self._submit(AcknowledgeAlarm(alarm_id=alarm_id, by="S-1", note="seen"), origin)

    @rule(
        kind=st.sampled_from(["open", "close", "status", "authenticate", "resend"]),
        origin=st.sampled_from(ORIGINS),
    )
    def other_command(self, kind: str, origin: Origin) -> None:
        command: Any = {
            "open": OpenTable(),
            "close": CloseTable(),
            "status": StatusRequest(),
            "authenticate": Authenticate(nonce="regulator-0001"),
            "resend": Resend(from_seq=1, to_seq=5),
        }[kind]
        self._submit(command, origin)

    @rule(
        reason=st.sampled_from(["signature", "unsigned", "replay", "wrong_pin", "rate_limited"]),
        command=st.sampled_from(["void_round", "sign_in", "status_request"]),
        who=st.integers(0, 2),
    )
    def refused(self, reason: str, command: str, who: int) -> None:
        """A command refused before the table (an unsigned or forged one, a wrong PIN)."""
        origin = ORIGINS[who]
        self._put([Refusal(origin.channel, origin.identity, command, reason, "refused")])

    # --- what fails ------------------------------------------------------------------------------

    @rule()
    def restart(self) -> None:
        """systemd restarts the daemon (mid-round too: the open round is voided on restart)."""
        self._stop()
        self._start()

    @rule(what=st.sampled_from(["seats", "deal", "sign_in"]))
    def journal_refuses(self, what: str) -> None:
        """The journal refuses one event's writes (a full disk, an I/O error): the table is rolled
        back and tilts until a tick finds the journal writable again."""
        with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON events "
                "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
            )
        try:
            if what == "seats":
                self._submit(SetSeats(occupied={"1": True}), ORIGINS[0])
            elif what == "sign_in":
                self._submit(SignIn(dealer_id="D-99"), ORIGINS[0])
            else:
                self.decks += 1
                self._put(_deal(_deck(self.decks), "whole", f"S-fault-{self.decks}", 0)[:3])
        finally:
            with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
                conn.execute("DROP TRIGGER refuse")

    # --- what a regulator checks after every step ------------------------------------------

    @invariant()
    def the_audit_passes(self) -> None:
        if self.daemon is None:
            return
        report = verify_journal(self.path)
        assert report.ok, [f.line() for f in report.findings]

    @invariant()
    def the_backup_is_good(self) -> None:
        if self.daemon is None:
            return
        backup = backup_journal(self.path, self.dir / "backups", keep=1, replay=RulesReplay())
        assert backup.ok, backup.detail

    @invariant()
    def recall_shows_each_round_as_closed(self) -> None:
        if self.daemon is None or not self.closed:
            return
        recalled = {r["round_id"]: r["status"] for r in recall_rounds(self.path, last=10_000)}
        for round_id, status in self.closed.items():
            assert recalled.get(round_id) == status, (round_id, status, recalled.get(round_id))


def _seat_cards(r: Any, seat: str) -> list[str] | None:
    """The seven cards the settled round dealt ``seat`` (None if it has none)."""
    cards = r.seat_cards.get(seat)
    return list(card_texts(cards)) if cards else None


_BUDGET = {"quick": (8, 25), "full": (60, 40)}
_examples, _steps = _BUDGET.get(os.environ.get("HYPOTHESIS_PROFILE", "full"), _BUDGET["full"])
HonestDay.TestCase.settings = settings(
    max_examples=_examples,
    stateful_step_count=_steps,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestHonestDay = HonestDay.TestCase
