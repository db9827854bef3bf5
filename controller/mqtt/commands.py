"""Commands in: what the broker delivers on ``<prefix>cmd/+``, checked and answered.

One :class:`CommandIntake` per :class:`~controller.mqtt.publisher.MqttService`, which hands it
each session (:class:`~controller.mqtt.session.Session`) to serve. A command is verified (its
signature, when the table has command keys: docs/mqtt.md), charged to its budget
(:class:`~controller.mqtt.rate.CommandBudgets`: a flood of them is refused, counted, and
journaled once a minute), handed to the table (or, for a ``resend``, to the outbox) and answered
on its MQTT 5 response topic or ``<prefix>reply/<command>``, signed. A refusal is journaled as
such; an answer the broker refuses (its PUBACK's reason code) is logged.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.clock import iso
from controller.feed_signature import FeedSigner
from controller.messages import COMMAND_KINDS, Authenticate, Command, Resend
from controller.mqtt.rate import CommandBudgets, CommandRate
from controller.mqtt.session import Incoming, Session, describe
from controller.mqtt.signing import CommandVerifier, read_keys
from controller.mqtt.wire import (
    CommandRefused,
    ReplyPayload,
    check_person,
    parse_signed_command,
    reply_bytes,
)
from controller.ports import Origin, PublisherHost
from controller.table import Refusal

log = structlog.get_logger(__name__)

#: Commands refused over the rate are journaled as one record a minute with their count.
RATE_REPORT = timedelta(minutes=1)
#: Command handlers running at once; more commands wait in the session's receive queue.
COMMAND_SLOTS = 16
#: Seqs a table sends again a minute, all ``resend`` commands together: a flood of them (each
#: may name 1,000) cannot make the table a broker's amplifier, nor hold its live messages back.
RESEND_PER_MINUTE = 5_000


class CommandIntake:
    """Serves the commands a session delivers: verified, within budget, run, answered.

    ``commands`` counts the commands handed to the table, ``refused`` those refused before it
    (for tests and the supervisor page). :meth:`start` reads what the config names (command
    keys, supervisors, budgets) once the service runs."""

    def __init__(self, *, ack_timeout: float = 10.0) -> None:
        self.ack_timeout = ack_timeout
        self.commands = 0
        self.refused = 0
        #: the table's feed key: replies leave signed (set by :meth:`start`)
        self.signer: FeedSigner | None = None
        self.verifier: CommandVerifier | None = None
        #: The badges of the table's supervisors_file; None: no such file (names as typed).
        self.supervisors: frozenset[str] | None = None
        #: the signed commands' budget and the unsigned and refused ones' (issue 40)
        self.budgets = CommandBudgets(CommandRate(120), CommandRate(30))
        self.resends = CommandRate(RESEND_PER_MINUTE)  # seqs asked for again

    def start(self, host: PublisherHost, signer: FeedSigner) -> None:
        """The command keys, the supervisors and the budgets the table's config names."""
        self.signer = signer
        self.verifier = _verifier(host)
        self.supervisors = _supervisors(host)
        limits = host.config.limits
        self.budgets = CommandBudgets(
            CommandRate(limits.mqtt_commands_per_minute),
            CommandRate(limits.mqtt_unsigned_per_minute),
            keyed=self.verifier is not None,
        )

    # --- refusals over the rate ----------------------------------------------------------------

    def _report_refusal(
        self, host: PublisherHost, topic: str, name: str, exc: CommandRefused
    ) -> None:
        """Journal the refusal (the table alarms when one sender keeps failing). Over the rate,
        one record a minute says how many were refused: a flood must not become a journal
        flood."""
        command = name[:64] if name in COMMAND_KINDS else "unknown"
        if exc.reason in ("rate_limited", "flood"):
            if self.budgets.due(host.clock(), exc.reason, RATE_REPORT):
                self.flush_over(host, command, exc.reason)
            return
        host.refused(Refusal("mqtt", topic[:200], command, exc.reason, exc.error[:300]))

    def flush_over(self, host: PublisherHost, command: str = "any", only: str = "") -> None:
        """A record for each budget run over (``only``: that one), with how many it refused."""
        for reason, detail, over in self.budgets.take(host.clock(), only):
            host.refused(Refusal("mqtt", host.topic("cmd/+"), command, reason, detail, over))

    async def report_over(self, host: PublisherHost) -> None:
        """The refusals over the rate since the last record, once a minute while they last."""
        while True:
            await asyncio.sleep(RATE_REPORT.total_seconds())
            self.flush_over(host)

    @property
    def _signer(self) -> FeedSigner:
        if self.signer is None:  # start() sets it before any session
            raise RuntimeError("the feed key is not loaded")
        return self.signer

    # --- serving a session ---------------------------------------------------------------------

    async def serve(self, session: Session, host: PublisherHost, tg: asyncio.TaskGroup) -> None:
        """Each command ``session`` delivers answered in a task of ``tg`` (the session's), at
        most COMMAND_SLOTS at once; raises when the link is lost."""
        slots = asyncio.Semaphore(COMMAND_SLOTS)
        async for message in session.messages():
            await slots.acquire()
            task = tg.create_task(self._command(session, host, message))
            task.add_done_callback(lambda _task: slots.release())

    async def _command(self, session: Session, host: PublisherHost, message: Incoming) -> None:
        """Answer one command. It runs in the session's TaskGroup, where an exception would end
        the session (and every command in flight): nothing but a cancellation leaves here. A
        command that cannot be parsed for a reason nobody foresaw is refused as ``malformed``
        (journaled, replied to); a failure after that is logged."""
        topic = message.topic
        try:
            await self._answer(session, host, message)
        except Exception as exc:
            log.error("command_failed", topic=topic[:200], error=describe(exc), exc_info=exc)

    def _parse(self, host: PublisherHost, topic: str, payload: bytes) -> tuple[Command, str | None]:
        """The command and the key that signed it, or CommandRefused: over its budget
        (``CommandBudgets``: on a table with command keys, charged only once the signature is
        checked, so no flood of unsigned or forged commands starves the casino's), refused by
        parse_signed_command, naming a person who is no supervisor of this table
        (``check_person``), or ``malformed`` when the parsing itself failed (a defect to fix:
        logged as an error)."""
        now, keyed = host.clock(), self.verifier is not None
        if not keyed:
            _charged(self.budgets, now, signed=True)
        try:
            command, key_id = parse_signed_command(
                host.prefix,
                topic,
                payload,
                self.verifier,
                table_id=host.config.table.id,
            )
            check_person(command, self.supervisors)
        except CommandRefused:
            if keyed:
                _charged(self.budgets, now, signed=False)
            raise
        except Exception as exc:
            log.error(
                "command_parse_failed",
                topic=topic[:200],
                size=len(payload),
                error=describe(exc),
                exc_info=exc,
            )
            if keyed:
                _charged(self.budgets, now, signed=False)
            raise CommandRefused(
                f"malformed command: {type(exc).__name__}", reason="malformed"
            ) from None
        if keyed:
            _charged(self.budgets, now, signed=key_id is not None, request_id=command.request_id)
        return command, key_id

    async def _answer(self, session: Session, host: PublisherHost, message: Incoming) -> None:
        topic, payload, prefix = message.topic, message.payload, host.prefix
        if not topic.startswith(f"{prefix}cmd/"):
            log.warning("command_ignored", topic=topic[:200], error="not this table's topic")
            return
        name = topic.removeprefix(f"{prefix}cmd/")
        reply_topic, correlation = _reply_route(host, message, name)
        try:
            command, key_id = self._parse(host, topic, payload)
        except CommandRefused as exc:
            reply = self._refuse(host, topic, name, len(payload), exc)
            if exc.reason == "flood":
                # Past the unsigned budget nothing is published in answer, not even a refusal:
                # a flood of small commands must not make the table a broker's amplifier (the
                # journal counts them, one record a minute; issue 40).
                return
        else:
            # Journaled with the command (and an acknowledgement's identity): which key sent it.
            identity = topic if key_id is None else f"{topic} key={key_id}"
            if isinstance(command, Resend):  # the outbox's, not the table's: nothing to decide
                reply = await _resend(host, identity, command, self.resends)
            else:
                reply = await self._run(host, identity, command)
        properties = None
        if correlation is not None:
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.CorrelationData = correlation
        code = await session.publish_acked(
            reply_topic,
            reply_bytes(reply, self._signer),
            properties=properties,
            timeout=self.ack_timeout,
        )
        if code.is_failure:
            log.warning("command_reply_refused", topic=reply_topic[:200], reason=str(code))

    def _refuse(
        self, host: PublisherHost, topic: str, name: str, size: int, exc: CommandRefused
    ) -> ReplyPayload:
        """A command refused before the table: counted, logged, journaled, answered (a flood's
        refusals: counted, and one record a minute says how many, in the log as in the
        journal)."""
        self.refused += 1
        if exc.reason != "flood":
            log.warning("command_refused", topic=topic[:200], size=size, error=exc.error)
        try:
            self._report_refusal(host, topic, name, exc)
        except Exception as failure:  # the reply still goes out
            log.error("command_refusal_not_journaled", topic=topic[:200], error=str(failure))
        return ReplyPayload(ok=False, error=exc.error, request_id=exc.request_id, data=None)

    async def _run(self, host: PublisherHost, identity: str, command: Command) -> ReplyPayload:
        """A command handed to the table (from ``identity``: its topic, and the key that signed
        it); its reply (a timeout or a defect is answered too)."""
        self.commands += 1
        try:
            answer = await host.submit(command, origin=Origin("mqtt", identity))
            data = answer.data
            if answer.ok and isinstance(command, Authenticate) and data is not None:
                data = {**data, **await asyncio.to_thread(_authenticate, command.nonce)}
            reply = ReplyPayload(
                ok=answer.ok, error=answer.error, request_id=answer.request_id, data=data
            )
        except TimeoutError:
            reply = ReplyPayload(
                ok=False,
                error="the table did not answer in time",
                request_id=command.request_id,
                data=None,
            )
        except Exception as exc:  # still answered; the log has the defect
            log.error(
                "command_failed",
                kind=command.kind,
                request_id=command.request_id,
                error=describe(exc),
                exc_info=exc,
            )
            reply = ReplyPayload(
                ok=False,
                error="the table could not run the command (an internal error, logged)",
                request_id=command.request_id,
                data=None,
            )
        log.info(
            "command",
            kind=command.kind,
            request_id=command.request_id,
            ok=reply.ok,
            error=reply.error,
        )
        return reply


def _charged(
    budgets: CommandBudgets, now: datetime, *, signed: bool, request_id: str | None = None
) -> None:
    """CommandRefused when the command's budget is spent: ``rate_limited`` (signed, or any on a
    table without keys) or ``flood`` (unsigned or refused: counted, one warning a minute)."""
    reason = budgets.refusal(now, signed=signed)
    if reason == "rate_limited":
        raise CommandRefused(
            f"refused: more than {budgets.signed.per_minute} "
            f"{'signed commands' if budgets.keyed else 'commands'} a minute; try again shortly",
            request_id,
            reason="rate_limited",
        )
    if reason == "flood":
        raise CommandRefused(
            f"refused: more than {budgets.unsigned.per_minute} unsigned or refused commands a "
            "minute; try again shortly",
            reason="flood",
        )


async def _resend(
    host: PublisherHost, identity: str, command: Resend, budget: CommandRate
) -> ReplyPayload:
    """A ``resend``: the kept copies of the seqs it names back into the outbox (the drain
    publishes them, replayed, lowest seq first), as many as ``budget`` allows now (the rest
    of the range is asked for again later). Logged, not journaled: it changes nothing the
    table decided, and a copy it sends again is the journaled message."""
    first, last = command.from_seq, command.to_seq
    granted = budget.grant(host.clock(), last - first + 1)
    if not granted:
        log.warning("resend_refused", by=identity[:200], from_seq=first, to_seq=last)
        return ReplyPayload(
            ok=False,
            error=f"refused: more than {budget.per_minute} seqs a minute asked for again; "
            "try again shortly",
            request_id=command.request_id,
            data=None,
        )
    last = first + granted - 1
    queued, oldest = await asyncio.to_thread(host.journal.outbox.requeue, first, last)
    if queued:
        host.outbox_changed.set()
    log.info("resend", by=identity[:200], from_seq=first, to_seq=last, queued=queued)
    data = {"from_seq": first, "to_seq": last, "queued": queued, "oldest_kept": oldest}
    return ReplyPayload(ok=True, error=None, request_id=command.request_id, data=data)


def _reply_route(host: PublisherHost, message: Incoming, name: str) -> tuple[str, bytes | None]:
    """Where the reply goes and its correlation data: the MQTT 5 response topic when it is
    under an allowed prefix (a caller must not make the table publish elsewhere, on its own
    round topic, say), else ``<prefix>reply/<command>``."""
    response_topic, correlation = _response_topic(message)
    allowed = (host.topic("reply/"), *host.config.mqtt.reply_prefixes)
    if response_topic is not None and not response_topic.startswith(allowed):
        log.warning("response_topic_refused", topic=response_topic[:200], command=name)
        response_topic = None
    return response_topic or host.topic(f"reply/{name}"), correlation


def _supervisors(host: PublisherHost) -> frozenset[str] | None:
    """The badges a command may name as its supervisor (``[display] supervisors_file``); a file
    that cannot be read admits nobody, and says so. None without the file."""
    path = host.config.display.supervisors_file
    if path is None:
        return None
    from controller.badges import read_supervisors

    try:
        return frozenset(read_supervisors(path))
    except (OSError, ValueError) as exc:
        log.error("mqtt_supervisors_unreadable", error=str(exc)[:300])
        return frozenset()


def _authenticate(nonce: str) -> dict[str, Any]:
    """The software authentication's answer (controller/software.py), or why there is none."""
    from controller.software import authenticate

    try:
        return dict(authenticate(nonce))
    except Exception as exc:  # no package metadata (a source tree): say so, do not crash
        return {"hmac_sha256": None, "error": f"cannot authenticate: {exc}"}


def _response_topic(message: Incoming) -> tuple[str | None, bytes | None]:
    """The MQTT 5 response topic and correlation data of a request, where present and usable."""
    props = message.properties
    topic: object = getattr(props, "ResponseTopic", None) if props is not None else None
    correlation: object = getattr(props, "CorrelationData", None) if props is not None else None
    if not isinstance(topic, str) or not topic or topic.startswith("$") or set(topic) & {"+", "#"}:
        topic = None
    return topic, correlation if isinstance(correlation, bytes) else None


def _verifier(host: PublisherHost) -> CommandVerifier | None:
    """Signed commands when keys are configured (docs/mqtt.md); a keys file that cannot be
    read accepts no command but the read-only ones, and says so."""
    config = host.config.mqtt
    if config.command_keys_file is None:
        log.warning(
            "mqtt_commands_unsigned",
            detail="no command_keys_file: anyone who may publish on the command topics may "
            "command this table (docs/mqtt.md, signed commands)",
        )
        return None
    try:
        keys = read_keys(config.command_keys_file)
    except (OSError, ValueError) as exc:
        log.error("mqtt_command_keys_unreadable", error=str(exc))
        keys = {}
    verifier = CommandVerifier(
        keys,
        config.command_window,
        config.unsigned_read_only,
        clock=host.clock,
        table_id=host.config.table.id,
    )
    since = iso(host.clock() - timedelta(seconds=2 * config.command_window))
    seen = host.journal.history.recent_command_ids(since)
    verifier.remember((rid, datetime.fromisoformat(at)) for rid, at in seen)
    return verifier
