"""The floor: the table open or closed, the seats in play and their wagers, the dealer signed in,
and the players' own settings with their corrections (docs/audit.md "Corrections"). No I/O."""

from __future__ import annotations

from controller.game.cards import card_texts
from controller.messages import (
    CloseTable,
    OpenTable,
    PlayerPayload,
    PlayerSetting,
    SetSeats,
    SetWagers,
    SignIn,
    SignOut,
)
from controller.table.alarms import Alarms
from controller.table.effects import (
    CommandReply,
    DealerChanged,
    Effect,
    PlayerSettled,
    SeatsChanged,
    StatusChanged,
)
from controller.table.results import player_result, setting_out
from controller.table.state import CORRECTION_WINDOW, Round, TableEnv, TableState, status_of


class Floor:
    """Keeps ``state.floor``."""

    def __init__(self, state: TableState, env: TableEnv, alarms: Alarms) -> None:
        self.state = state
        self.env = env
        self.alarms = alarms

    def limit_corrections(self, per_round: int, per_hour: int) -> None:
        """At most ``per_round`` corrections of players' settings in a round and ``per_hour``
        in any hour ([limits]; 0 refuses every correction)."""
        if per_round < 0 or per_hour < 0:
            raise ValueError("correction limits must not be negative")
        self.state.floor.corrections_per_round = per_round
        self.state.floor.corrections_per_hour = per_hour

    def open_or_close(self, command: OpenTable | CloseTable) -> list[Effect]:
        self.state.floor.table_open = isinstance(command, OpenTable)
        return [
            CommandReply(command.request_id, command.kind, True),
            StatusChanged(status_of(self.state, self.env)),
        ]

    def set_seats(self, command: SetSeats) -> list[Effect]:
        occupied = self.state.floor.occupied
        unknown = sorted(set(command.occupied) - set(occupied))
        if unknown:
            raise ValueError(f"unknown seat {', '.join(unknown)} (seats: {', '.join(occupied)})")
        occupied.update(command.occupied)
        data = {"occupied": dict(occupied)}
        return [
            CommandReply(command.request_id, command.kind, True, data=data),
            SeatsChanged(dict(occupied)),
        ]

    def set_wagers(self, command: SetWagers) -> list[Effect]:
        if command.seat not in self.state.floor.occupied:
            raise ValueError(f"unknown seat {command.seat}")
        self.state.floor.wagers[command.seat] = command.wagers
        return [CommandReply(command.request_id, command.kind, True)]

    def sign_in(self, command: SignIn) -> list[Effect]:
        """A dealer takes the table; the rounds opened from now on record them. A different
        dealer already signed in makes it a rotation (journaled as this command)."""
        floor = self.state.floor
        was, floor.dealer_id = floor.dealer_id, command.dealer_id
        data = {"dealer_id": command.dealer_id, "replaces": was, "rotation": was is not None}
        return [
            CommandReply(command.request_id, command.kind, True, data=data),
            DealerChanged(command.dealer_id),
            StatusChanged(status_of(self.state, self.env)),
        ]

    def sign_out(self, command: SignOut) -> list[Effect]:
        floor = self.state.floor
        if floor.dealer_id is None:
            raise ValueError("no dealer is signed in")
        was, floor.dealer_id = floor.dealer_id, None
        return [
            CommandReply(command.request_id, command.kind, True, data={"dealer_id": was}),
            DealerChanged(None),
            StatusChanged(status_of(self.state, self.env)),
        ]

    # --- a player's own setting ---------------------------------------------------------

    def player_setting(self, command: PlayerSetting) -> list[Effect]:
        """A player's setting after the dealer's (its round, if named, was checked by the
        table); entered again, it is a correction."""
        r = self.state.rounds.round
        if r is None or not r.settled or r.voided or not r.dealer_cards:
            raise ValueError(
                "no settled round: a player sets only after the dealer (docs/rules.md §6)"
            )
        if r.seat_cards.get(command.seat) is None:
            raise ValueError(f"seat {command.seat} has no hand this round")
        if not command.house_way and command.front is None:
            raise ValueError("give the two front cards, or house_way true")
        payload = self._payload(r, command)
        earlier = r.players.get(command.seat)
        if earlier is not None:
            refused = self._correction_refused(r, command)
            if refused:
                return refused
        r.players[command.seat] = payload
        effects: list[Effect] = [
            CommandReply(
                command.request_id, "player_setting", True, data=payload.model_dump(mode="json")
            ),
            PlayerSettled(payload),
        ]
        if earlier is not None:
            effects.append(self._corrected(r, command, payload, earlier))
        return effects

    def _payload(self, r: Round, command: PlayerSetting) -> PlayerPayload:
        """The seat's hand set as the player asked (or by the House Way) against the dealer."""
        settings = self.env.settings
        setting, result = player_result(
            card_texts(r.seat_cards[command.seat]),
            None if command.house_way else command.front,
            r.dealer_setting,
            r.dealer_cards,
            settings.rules,
            seat=command.seat,
            house_way_of=settings.set_by_house_way,
        )
        earlier = r.players.get(command.seat)
        w = self.state.floor.wagers.get(command.seat)
        amount = w.pai_gow if w else None
        entry = int(earlier.setting_id.rsplit("/", 1)[1]) + 1 if earlier else 1
        return PlayerPayload(
            round_id=r.round_id,
            seat=command.seat,
            setting=setting_out(setting),
            house_way=command.house_way,
            foul=setting.is_foul,
            pai_gow=result.to_dict(),
            wager=amount,
            win=None
            if amount is None
            else {"win": amount, "push": 0, "lose": -amount}[str(result.outcome)],
            setting_id=f"{r.round_id}/{command.seat}/{entry}",
            corrects=earlier.setting_id if earlier else None,
            dealer_id=r.dealer_id,
            by=command.by,
            reason=command.reason.strip(),
        )

    def _corrected(
        self, r: Round, command: PlayerSetting, payload: PlayerPayload, earlier: PlayerPayload
    ) -> Effect:
        """A correction counted against the limits, and its warning."""
        r.corrections += 1
        self.state.floor.corrections.append(self.env.clock())
        entry = payload.setting_id.rsplit("/", 1)[1]
        return self.alarms.raise_alarm(
            "setting_corrected",
            "warning",
            f"seat {command.seat}'s setting in round #{r.round_seq} was corrected by "
            f"{command.by}: {payload.reason} (entry {entry} replaces "
            f"{earlier.setting_id}; correction {r.corrections} of at most "
            f"{self.state.floor.corrections_per_round} this round)",
            None,
            r.round_id,
            by=command.by,
        )

    def _correction_refused(self, r: Round, command: PlayerSetting) -> list[Effect]:
        """Why a correction (a seat's setting entered again) is refused, as its effects; [] when
        it may go ahead. It needs a supervisor (``by``: the display checked their badge and PIN,
        or the shared void PIN) and a reason, and stays within the limits of a round and an
        hour; a correction over a limit also raises a warning."""
        seat = command.seat
        if not command.by:
            raise ValueError(
                f"seat {seat} already has a setting this round: a correction needs a supervisor "
                "(badge and PIN) and a reason"
            )
        if not command.reason.strip():
            raise ValueError(f"a correction of seat {seat}'s setting needs a reason")
        why = self._over_limit(r)
        if not why:
            return []
        detail = f"the correction of seat {seat}'s setting is refused: {why}; the entry stands"
        return [
            CommandReply(command.request_id, command.kind, False, detail),
            self.alarms.raise_alarm(
                "correction_refused",
                "warning",
                f"{detail} (asked by {command.by})",
                None,
                r.round_id,
                by=command.by,
            ),
        ]

    def _over_limit(self, r: Round) -> str:
        """Which limit a correction now would go over ("" if none)."""
        floor = self.state.floor
        now = self.env.clock()
        floor.corrections = [t for t in floor.corrections if now - t < CORRECTION_WINDOW]
        if r.corrections >= floor.corrections_per_round:
            if floor.corrections_per_round == 0:
                return "corrections are off at this table ([limits] corrections_per_round = 0)"
            return (
                f"round #{r.round_seq} has had {r.corrections} correction(s), the most "
                "[limits] corrections_per_round allows"
            )
        if len(floor.corrections) >= floor.corrections_per_hour:
            if floor.corrections_per_hour == 0:
                return "corrections are off at this table ([limits] corrections_per_hour = 0)"
            return (
                f"{len(floor.corrections)} correction(s) in the last hour at this table, "
                "the most [limits] corrections_per_hour allows"
            )
        return ""
