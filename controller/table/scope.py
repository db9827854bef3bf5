"""A round-scoped command's round, checked where it acts (docs/mqtt.md, round-scoped): the one
check, made by the table as it stands when the command is handled, never earlier. No I/O."""

from __future__ import annotations

from controller.messages import Command, EnterDice, PlayerSetting, VoidRound
from controller.table.state import RoundsState


def round_problem(command: Command, rounds: RoundsState) -> str | None:
    """Why a command's ``round_id`` is not the round it would act on (None if it is, or if it
    names none): a ``void_round`` or ``player_setting`` naming a round that is not the table's
    newest, an ``enter_dice`` naming a round that is not being dealt (or null while one is).
    A signed round-scoped command that names no round was refused before (mqtt/signing.py)."""
    r = rounds.round
    named: str | None
    if isinstance(command, VoidRound | PlayerSetting):
        if command.round_id is None:
            return None
        named, target = command.round_id, (r.round_id if r is not None else None)
        if named == target:
            return None
        now = f"the table's round is {target!r}" if target else "the table has no round"
    elif isinstance(command, EnterDice):
        if "round_id" not in command.model_fields_set:
            return None
        named, target = command.round_id, (r.round_id if r is not None and not r.closed else None)
        if named == target:
            return None
        if target is None:
            now = "no round is being dealt (round_id null: the dice are for the next deal)"
        else:
            now = f"the round being dealt is {target!r}"
    else:
        return None
    shown = "null" if named is None else repr(named[:64])
    # Dice refused are not held for the next deal either: the dealer is told nothing changed.
    unchanged = "; nothing was changed" if isinstance(command, EnterDice) else ""
    return f"refused: round_id {shown} is not the round this {command.kind} would act on: " + (
        now + unchanged
    )
