"""Simulator of the reference RNG box: each press of the button sends DRAW with a number 1–7.

Line faults garbled_bytes, checksum_error and unplug_replug apply to the press; card faults
do not exist here.
"""

from __future__ import annotations

from drivers.codecs.rng import msg_draw
from simulators.base import DeviceSimulator, Port, cli
from simulators.biased import favour_3
from simulators.faults import LINE_FAULTS, Fault, parse_faults


class RngSimulator(DeviceSimulator):
    """An RNG box. ``press`` draws (seeded) or sends the number given."""

    def __init__(
        self,
        port: Port | None = None,
        *,
        seed: int | None = None,
        interval: float = 0.0,
        bias: str | None = None,
    ) -> None:
        """``bias``: ``rng_favours_3`` draws 3 at 1.5 times its share (simulators/biased.py)."""
        super().__init__(port, seed=seed, interval=interval)
        self.favour_3 = bias == "rng_favours_3"

    async def press(
        self,
        number: int | None = None,
        faults: str | list[str] | frozenset[Fault] | None = None,
    ) -> int:
        chosen = faults if isinstance(faults, frozenset) else parse_faults(faults)
        unknown = chosen - LINE_FAULTS
        if unknown:
            raise ValueError(f"the RNG box has no card faults: {', '.join(sorted(unknown))}")
        if number is not None:
            drawn = number
        elif self.favour_3:
            drawn = favour_3(self.rng, 0)[1] or 3
        else:
            drawn = self.rng.randint(1, 7)
        await self.play([msg_draw(drawn)], 0, chosen)
        return drawn


def main(argv: list[str]) -> int:
    async def action(sim: DeviceSimulator, faults: frozenset[Fault]) -> str:
        assert isinstance(sim, RngSimulator)
        return f"drew {await sim.press(faults=faults)}"

    return cli(
        "rng",
        argv,
        lambda port, seed, interval: RngSimulator(port, seed=seed, interval=interval),
        action,
        "a number 1–7 per button press",
    )
