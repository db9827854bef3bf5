"""Chan Chu, exactly: every line's combinations, probability and return, the house edge, and the
Envy bonus's value per other player (docs/rules.md §8, §9).

The line a hand is paid is the engine's: ``wagers.chan_chu`` on a hand of each census profile
(all hands of a profile contain the same lines, so they are paid alike); the Envy line is
``wagers.envy_line``. Sums are exact integers; fractions are taken last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from controller.analysis.census import Census, Profile
from controller.analysis.published import ENVY_WAGERS
from controller.game.paytables import (
    CHAN_CHU_PAYTABLES,
    ENVY_PAYTABLES,
    Paytable,
    chan_chu_paytable,
    envy_paytable,
)
from controller.game.wagers import chan_chu, envy_line

OTHER_PLAYERS = range(7)  # 0–6 other players at a seven-position table


@dataclass(frozen=True, slots=True)
class LineFigure:
    """One paytable line: pays (to 1, or dollars for Envy), hands that are paid it, its
    probability and its return (pays × probability)."""

    line: str
    pays: int
    combinations: int
    probability: float
    ret: float

    def to_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "pays": self.pays,
            "combinations": self.combinations,
            "probability": self.probability,
            "return": self.ret,
        }


@dataclass(frozen=True, slots=True)
class EnvyFigures:
    """The Envy bonus of a paytable: lines, the dollars one other player's hand is worth on
    average, and the Chan Chu house edge by other players and wager."""

    paytable: str
    lines: tuple[LineFigure, ...]
    value_dollars: float
    house_edge_by_players: dict[int, dict[int, float]]  # other players → wager → house edge

    def per_player(self, wager: int) -> float:
        """How much one other player lowers the house edge of a ``wager``-dollar Chan Chu bet."""
        return self.value_dollars / wager

    def to_dict(self) -> dict[str, object]:
        return {
            "paytable": self.paytable,
            "lines": [f.to_dict() for f in self.lines],
            "value_per_other_player_dollars": self.value_dollars,
            "per_other_player_5_dollar_wager": self.per_player(5),
            "house_edge_by_other_players": {
                str(n): {f"${w}": edge for w, edge in row.items()}
                for n, row in self.house_edge_by_players.items()
            },
        }


@dataclass(frozen=True, slots=True)
class ChanChuFigures:
    """A Chan Chu paytable's exact figures."""

    paytable: str
    total: int
    lines: tuple[LineFigure, ...]
    house_edge: float
    posted_house_edge: float | None
    envy: EnvyFigures | None

    def to_dict(self) -> dict[str, object]:
        record: dict[str, object] = {
            "paytable": self.paytable,
            "total": self.total,
            "lines": [f.to_dict() for f in self.lines],
            "house_edge": self.house_edge,
            "posted_house_edge": self.posted_house_edge,
        }
        if self.envy is not None:
            record["envy"] = self.envy.to_dict()
        return record

    def line(self, line: str) -> LineFigure:
        return next(f for f in self.lines if f.line == line)


def _paid_counts(census: Census, paid: Mapping[Profile, str | None]) -> dict[str | None, int]:
    counts: dict[str | None, int] = {}
    for p, weight in census.weights.items():
        line = paid[p]
        counts[line] = counts.get(line, 0) + weight
    return counts


def _figures(counts: dict[str | None, int], table: Paytable, total: int) -> list[LineFigure]:
    return [
        LineFigure(
            line,
            pays,
            counts.get(line, 0),
            counts.get(line, 0) / total,
            float(Fraction(pays * counts.get(line, 0), total)),
        )
        for line, pays in table.pays.items()
    ]


def envy_figures(census: Census, name: str, house_edge: Fraction) -> EnvyFigures:
    """Envy bonus figures for Chan Chu paytable ``name`` (PT3–PT5)."""
    table = envy_paytable(name)
    paid = {p: envy_line(cards, table) for p, cards in census.examples.items()}
    counts = _paid_counts(census, paid)
    total = census.total
    value = Fraction(sum(table.pays[line] * n for line, n in counts.items() if line), total)
    by_players = {
        n: {w: float(house_edge - n * value / w) for w in ENVY_WAGERS} for n in OTHER_PLAYERS
    }
    return EnvyFigures(table.name, tuple(_figures(counts, table, total)), float(value), by_players)


def chan_chu_figures(census: Census, name: str) -> ChanChuFigures:
    """Exact figures of Chan Chu paytable ``name`` (PT1–PT5) from a census of all hands."""
    table = chan_chu_paytable(name)
    paid = {p: chan_chu(cards, table).line for p, cards in census.examples.items()}
    counts = _paid_counts(census, paid)
    total = census.total
    edge = -Fraction(sum(table.pays[line] * n for line, n in counts.items() if line), total)
    envy = envy_figures(census, table.name, edge) if table.name in ENVY_PAYTABLES else None
    return ChanChuFigures(
        table.name,
        total,
        tuple(_figures(counts, table, total)),
        float(edge),
        None if table.posted_house_edge is None else table.posted_house_edge / 100,
        envy,
    )


def all_chan_chu_figures(census: Census) -> list[ChanChuFigures]:
    """PT1–PT5, from one census."""
    return [chan_chu_figures(census, name) for name in CHAN_CHU_PAYTABLES]
