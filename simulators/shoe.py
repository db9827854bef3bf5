"""Simulator of the reference smart dealing shoe (card mode).

``ShoeSimulator(port, seed=…)`` shuffles a real 53-card deck and, on ``await deal()``, sends
DEAL_START, one CARD per card for seven packets' worth (49), the STUB of four and DEAL_END.
Faults are those of the shuffler; a line fault hits the first card of packet 3.
"""

from __future__ import annotations

from drivers.codecs.shoe import msg_card, msg_deal_end, msg_deal_start, msg_stub
from drivers.framing import DeviceState, Message
from simulators.base import DeviceSimulator, Port, cli
from simulators.faults import FAULT_PACKET, DealPlan, Fault, parse_faults
from simulators.shuffler import ShufflerSimulator


class ShoeSimulator(ShufflerSimulator):
    """A shoe: the shuffler's deck and faults, reported card by card."""

    def __init__(
        self, port: Port | None = None, *, seed: int | None = None, interval: float = 0.0
    ) -> None:
        super().__init__(port, seed=seed, interval=interval)

    async def deal(self, faults: str | list[str] | frozenset[Fault] | None = None) -> DealPlan:
        chosen = faults if isinstance(faults, frozenset) else parse_faults(faults)
        plan = self.next_plan(chosen)
        self.last_plan = plan
        self.clear_faults()
        messages: list[Message] = [msg_deal_start(plan.shuffle_id)]
        messages += [msg_card(code) for code in plan.cards]
        messages += [msg_stub(plan.stub), msg_deal_end()]
        self.state = DeviceState.DEALING
        fault_at = 1 + sum(len(packet) for packet in plan.packets[:FAULT_PACKET])
        finished = await self.play(messages, fault_at, chosen)
        if finished:
            self.state = DeviceState.IDLE
        return plan


def main(argv: list[str]) -> int:
    async def action(sim: DeviceSimulator, faults: frozenset[Fault]) -> str:
        assert isinstance(sim, ShoeSimulator)
        plan = await sim.deal(faults)
        return f"dealt {plan.shuffle_id}" + (f" with {', '.join(sorted(faults))}" if faults else "")

    return cli(
        "shoe",
        argv,
        lambda port, seed, interval: ShoeSimulator(port, seed=seed, interval=interval),
        action,
        "a deal card by card (49 cards) and the stub",
    )
