"""Mild biases, caught in the fewest rounds the exact mathematics allows (docs/protection.md
"Several bias sizes"): the RNG box and each die against a bank of alternatives from just
detectable to gross, and each card or rank by the seat its hand went to after the draw."""

from __future__ import annotations

from datetime import datetime
from math import log

from controller.game.cards import DECK
from controller.protection import exact
from controller.protection.checks import (
    CELLS,
    Cell,
    CountingCheck,
    RankCell,
    Round,
    alternative,
)
from controller.protection.exact import DECK_CARDS, PACKETS

SEAT_LABELS = (*(f"position {k + 1}" for k in range(PACKETS)), "stub")
RNG_RATIOS = (1.1, 1.2, 1.3, 1.5, 2.0)
DIE_CHANCES = (0.19, 0.21, 0.25, 0.3)
MIXED_CHANCES = (0.19, 0.21)  # one of the three dice, which one unknown
SEAT_RATIOS = (2.0, 4.0)


class RngBias(CountingCheck):
    name = "rng_bias"
    reads_deal = False
    title = "RNG numbers, mild to gross bias"
    watches = (
        "each RNG draw's number against 1/7 each; CUSUMs per number for it drawn 1.1, 1.2, 1.3,"
        " 1.5 and 2 times its share"
    )
    advice = "swap the RNG box and send it for testing"
    severity = "warning"
    count_size = PACKETS

    def __init__(self) -> None:
        p = 1.0 / PACKETS
        self.hit = [log(rho) for rho in RNG_RATIOS]
        miss = [log((1 - rho * p) / (1 - p)) for rho in RNG_RATIOS]
        super().__init__(miss * PACKETS)

    def applies(self, r: Round) -> bool:
        return r.obs.draw_method in ("rng", "software_rng") and r.obs.number is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        i = (r.obs.number or 1) - 1
        self.counts[i] += 1
        k = len(RNG_RATIOS)
        return self.bank.add_all(range(i * k, i * k + k), self.hit, self.rounds, now)

    def reference(self, i: int) -> str:
        return "1/7 each (a fair RNG)"

    def alternative(self, i: int) -> str:
        number, j = divmod(i, len(RNG_RATIOS))
        return f"{number + 1} drawn {RNG_RATIOS[j]}× its share ({RNG_RATIOS[j]:.1f}/7)"

    def label(self, i: int) -> str:
        return f"number {i // len(RNG_RATIOS) + 1} drawn too often ({self.alternative(i)})"

    def evidence(self, i: int) -> str:
        number = i // len(RNG_RATIOS)
        return f"{self.counts[number]} of {self.rounds} draws were {number + 1} (fair: 1/7)"

    def cells(self, worst: int) -> list[Cell]:
        return [Cell(str(i + 1), c, self.rounds / PACKETS) for i, c in enumerate(self.counts)]


class DiceBias(CountingCheck):
    """Per die (as the reader reports them, first to third) and face: that die shows the face
    with chance p (the other faces share the rest), LR 6p or 6(1-p)/5; and, for a die the
    reader does not keep apart, one of the three (unknown which) with p: LR = (6p·n + 6(1-p)/5
    ·(3-n))/3 for n dice showing the face, mean exactly 1."""

    name = "dice_bias"
    reads_deal = False
    title = "Each die, mild to gross bias"
    watches = (
        "each die's face (first, second, third as read) against 1/6; CUSUMs per die and face "
        "for it showing 0.19, 0.21, 0.25 or 0.3 of the time, and per face for one die of "
        "three (unknown which) at 0.19 or 0.21"
    )
    advice = "replace the dice: one is likely loaded; keep it for surveillance"
    severity = "warning"
    count_size = 3 * 6

    def __init__(self) -> None:
        d = len(DIE_CHANCES)
        self.hit = [log(6 * p) for p in DIE_CHANCES]
        miss = [log(6 * (1 - p) / 5) for p in DIE_CHANCES]
        self.mixed = [
            [log((6 * p * n + 6 * (1 - p) / 5 * (3 - n)) / 3) for n in range(4)]
            for p in MIXED_CHANCES
        ]
        self.single = 3 * 6 * d
        base = miss * (3 * 6) + [self.mixed[j][0] for _ in range(6) for j in range(2)]
        super().__init__(base)

    def applies(self, r: Round) -> bool:
        return r.obs.draw_method in ("dice", "dice_manual") and r.obs.dice is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        dice = r.obs.dice or (1, 1, 1)
        d = len(DIE_CHANCES)
        indices: list[int] = []
        xs: list[float] = []
        for slot, face in enumerate(dice):
            self.counts[slot * 6 + face - 1] += 1
            start = (slot * 6 + face - 1) * d
            indices += range(start, start + d)
            xs += self.hit
        for face in set(dice):
            n = dice.count(face)
            for j in range(len(MIXED_CHANCES)):
                indices.append(self.single + (face - 1) * len(MIXED_CHANCES) + j)
                xs.append(self.mixed[j][n])
        return self.bank.add_all(indices, xs, self.rounds, now)

    def reference(self, i: int) -> str:
        return "1/6 a face (fair dice)"

    def alternative(self, i: int) -> str:
        d = len(DIE_CHANCES)
        if i < self.single:
            cell, j = divmod(i, d)
            slot, face = divmod(cell, 6)
            return f"die {slot + 1} shows {face + 1} with chance {DIE_CHANCES[j]}"
        face, j = divmod(i - self.single, len(MIXED_CHANCES))
        return f"one die of three shows {face + 1} with chance {MIXED_CHANCES[j]}"

    def label(self, i: int) -> str:
        return self.alternative(i)

    def evidence(self, i: int) -> str:
        if i < self.single:
            slot, face = divmod(i // len(DIE_CHANCES), 6)
            n = self.counts[slot * 6 + face]
            return f"die {slot + 1} showed {face + 1} {n} times in {self.rounds} throws (fair: 1/6)"
        face = (i - self.single) // len(MIXED_CHANCES)
        n = sum(self.counts[slot * 6 + face] for slot in range(3))
        return f"{face + 1} came up {n} times on {3 * self.rounds} dice (fair: 1/6)"

    def cells(self, worst: int) -> list[Cell]:
        return [
            Cell(f"die {k // 6 + 1} shows {k % 6 + 1}", c, self.rounds / 6)
            for k, c in enumerate(self.counts)
        ]


class CardSeat(CountingCheck):
    """Each card's seat after the draw (the position 1–7 its hand went to, or the stub) against
    7/53 (4/53): CUSUMs per card and seat for twice and four times as often."""

    name = "card_seat"
    title = "Each card's seat"
    watches = (
        "which position (after the draw) each card goes to, or the stub, against 7/53 each "
        "(4/53 the stub); CUSUMs per card and position: twice and four times as often"
    )
    advice = (
        "take the shuffler out of play and call surveillance: a card is being steered to a seat"
    )
    severity = "critical"
    count_size = DECK_CARDS * CELLS

    def __init__(self) -> None:
        ps = [float(exact.cell_card_chance(k)) for k in range(CELLS)]
        self.p = ps
        self.hit = []
        base = []
        for p in ps:
            for rho in SEAT_RATIOS:
                q = alternative(p, rho)
                self.hit.append(log(q / p))
                base.append(log((1 - q) / (1 - p)))
        self.hit0 = self.hit[0::2]
        self.hit1 = self.hit[1::2]
        super().__init__(base * DECK_CARDS)

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        counts = self.counts
        cells = [c * CELLS + seat for c, seat in enumerate(r.seat_of)]
        for cell in cells:
            counts[cell] += 1
        hit0, hit1 = self.hit0, self.hit1
        indices = [2 * cell for cell in cells] + [2 * cell + 1 for cell in cells]
        xs = [hit0[seat] for seat in r.seat_of] + [hit1[seat] for seat in r.seat_of]
        return self.bank.add_all(indices, xs, self.rounds, now)

    def reference(self, i: int) -> str:
        return "7/53 a position, 4/53 the stub (a uniform deal)"

    def alternative(self, i: int) -> str:
        cell, j = divmod(i, len(SEAT_RATIOS))
        return f"{DECK[cell // CELLS]} to {SEAT_LABELS[cell % CELLS]} {SEAT_RATIOS[j]:g}× as often"

    def label(self, i: int) -> str:
        cell = i // len(SEAT_RATIOS)
        return f"{DECK[cell // CELLS]} to {SEAT_LABELS[cell % CELLS]} too often"

    def evidence(self, i: int) -> str:
        cell = i // len(SEAT_RATIOS)
        p = self.p[cell % CELLS]
        return (
            f"{DECK[cell // CELLS]} went to {SEAT_LABELS[cell % CELLS]} {self.counts[cell]} "
            f"times in {self.rounds} rounds (fair: {self.rounds * p:.1f})"
        )

    def cells(self, worst: int) -> list[Cell]:
        card = worst // len(SEAT_RATIOS) // CELLS
        return [
            Cell(
                f"{DECK[card]} {SEAT_LABELS[k]}",
                self.counts[card * CELLS + k],
                self.rounds * self.p[k],
            )
            for k in range(CELLS)
        ]


class RankSeat(RankCell):
    name = "rank_seat"
    title = "Each rank's seat"
    watches = (
        "how many of each rank's four cards go to each position (after the draw) or the stub, "
        "against the exact hypergeometric law; CUSUM per rank and position: twice as many"
    )
    advice = (
        "take the shuffler out of play and call surveillance: a rank is being steered to a seat"
    )
    by_seat = True
    cell_labels = SEAT_LABELS
