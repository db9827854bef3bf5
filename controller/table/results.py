"""Turning rules results into the messages a round carries: settings, side-wager results, deal
problems; and a player's setting against the dealer (what the table settles and the dealer page
previews)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from controller.game.cards import parse_card
from controller.game.deal import (
    DealProblem,
)
from controller.game.house_way import house_way
from controller.game.setting import Rules, Setting
from controller.game.wagers import (
    PaiGowResult,
    settle_pai_gow,
)
from controller.messages import (
    Problem,
    SettingOut,
    SideOut,
)


def player_result(
    cards: Sequence[str],
    front: Sequence[str] | None,
    dealer_setting: Setting | None,
    dealer_cards: Sequence[int],
    rules: Rules,
    *,
    seat: str,
    house_way_of: Callable[[Sequence[int]], Setting] | None = None,
) -> tuple[Setting, PaiGowResult]:
    """A player's setting of ``cards`` (``front`` in front, or the House Way when None) and its
    Pai Gow result against the dealer (docs/rules.md §4, §5): what the table settles and what the
    dealer page previews, from one piece of code. ValueError when the front is not two of them.
    ``house_way_of``: the table's House Way (its way file), else the filed way's rule code."""
    parsed = [parse_card(t) for t in cards]
    if front is None:
        setting = house_way_of(parsed) if house_way_of else house_way(parsed, rules)
    else:
        chosen = [parse_card(t) for t in front]
        if len(chosen) != 2 or any(c not in parsed for c in chosen):
            shown = " ".join(map(str, chosen))
            raise ValueError(f"front {shown} is not two of seat {seat}'s cards")
        setting = Setting.from_front(parsed, chosen, wheel_high=rules.wheel_high)
    return setting, settle_pai_gow(setting, dealer_setting, dealer_cards, rules)


def problem_of(p: DealProblem) -> Problem:
    return Problem(code=p.code, detail=p.detail)


def side_out(line: str, pays: int, wager: int | None) -> SideOut:
    win = None if wager is None else (wager * pays if pays > 0 else (0 if pays == 0 else -wager))
    return SideOut(line=line, pays=pays, wager=wager, win=win)


def setting_out(setting: Setting) -> SettingOut:
    return SettingOut(**setting.to_dict())  # type: ignore[arg-type]
