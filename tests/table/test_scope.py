"""The round a round-scoped command may name (controller/table/scope.py), checked once, by the
table, when the command acts: the MQTT layer no longer reads the live table (issue 33)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.messages import parse_command
from controller.table import CommandReply, RoundRefused
from controller.table.scope import round_problem
from controller.table.state import Phase, Round, RoundsState
from drivers.events import DealStarted
from tests.table.test_machine import make_table

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def _rounds(latest: str | None, dealing: bool) -> RoundsState:
    if latest is None:
        return RoundsState()
    phase = Phase.DEALING if dealing else Phase.SETTLED
    return RoundsState(round=Round(latest, 1, T0, phase=phase))


def test_a_round_id_must_be_the_round_the_command_would_act_on() -> None:
    settled, dealing, nothing = _rounds("R1", False), _rounds("R2", True), _rounds(None, False)

    def problem(kind: str, body: dict[str, Any], rounds: RoundsState) -> str | None:
        return round_problem(parse_command({**body, "kind": kind}), rounds)

    accepted: list[tuple[str, dict[str, Any], RoundsState]] = [
        ("void_round", {"round_id": "R1"}, settled),
        ("void_round", {"round_id": "R2"}, dealing),
        ("void_round", {}, settled),  # unsigned: the table's newest, as before
        ("player_setting", {"seat": "1", "house_way": True, "round_id": "R1"}, settled),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": None}, settled),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": None}, nothing),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": "R2"}, dealing),
        ("enter_dice", {"dice": [1, 2, 3]}, dealing),  # unsigned, no round named
        ("close_table", {}, dealing),
    ]
    for kind, body, rounds in accepted:
        assert problem(kind, body, rounds) is None, (kind, body)
    refused: list[tuple[str, dict[str, Any], RoundsState, str]] = [
        ("void_round", {"round_id": "R0"}, settled, "the table's round is 'R1'"),
        ("void_round", {"round_id": "R1"}, nothing, "the table has no round"),
        ("player_setting", {"seat": "1", "round_id": "R1"}, dealing, "the table's round is 'R2'"),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": "R1"}, settled, "no round is being dealt"),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": None}, dealing, "being dealt is 'R2'"),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": "R1"}, dealing, "being dealt is 'R2'"),
    ]
    for kind, body, rounds, expected in refused:
        error = problem(kind, body, rounds) or ""
        assert f"is not the round this {kind} would act on: " in error
        assert expected in error, error


def test_the_table_refuses_a_stale_round_as_a_refusal_of_its_source() -> None:
    """Refused where it acts, journaled as a refusal (not as the command) and counted against
    the channel and identity it came from, like every refusal before the table."""
    table, _ = make_table()
    table.handle(DealStarted(device="shuffler", shuffle_id="s-1"))
    for n in range(table.refusals_before_alarm):
        effects = table.handle(
            parse_command({"kind": "void_round", "round_id": "OLD", "request_id": f"q{n}"}),
            ("mqtt", "casino/cmd/void_round"),
        )
        [reply] = [e for e in effects if isinstance(e, CommandReply)]
        [refused] = [e.refusal for e in effects if isinstance(e, RoundRefused)]
        assert not reply.ok and reply.request_id == f"q{n}"
        assert (refused.channel, refused.identity, refused.reason) == (
            "mqtt",
            "casino/cmd/void_round",
            "round",
        )
    assert [a.code for a in table.latched.values()] == ["command_refused"]
    assert table.round is not None and not table.round.closed  # nothing was voided
