"""Simulator of the reference card-recognizing shuffler (packet mode).

``ShufflerSimulator(port, seed=…)`` shuffles a real 53-card deck and, on ``await deal()``, sends
DEAL_START, seven PACKETs of seven, the STUB of four and DEAL_END — with fault scenarios by
name (simulators/faults.py). ``python -m simulators shuffler --pty`` runs it standalone.
"""

from __future__ import annotations

from drivers.codecs.shuffler import msg_deal_end, msg_deal_start, msg_packet, msg_stub
from drivers.framing import DeviceState, Message
from simulators.base import DeviceSimulator, Port, cli
from simulators.biased import scenario
from simulators.faults import FAULT_PACKET, DealPlan, Fault, parse_faults, plan_deal

DECK_CODES = list(range(53))


class ShufflerSimulator(DeviceSimulator):
    """A shuffler that deals packets. ``deals`` counts the deals begun."""

    def __init__(
        self,
        port: Port | None = None,
        *,
        seed: int | None = None,
        interval: float = 0.0,
        bias: str | None = None,
    ) -> None:
        """``bias``: a biased shuffler by name (simulators/biased.py: stacked_joker,
        stacked_aces, repeat_order, one_riffle), for game protection's tests and demo."""
        super().__init__(port, seed=seed, interval=interval)
        self.deals = 0
        self.last_plan: DealPlan | None = None
        self.scenario = scenario(bias) if bias is not None else None

    def next_plan(self, faults: frozenset[Fault] = frozenset()) -> DealPlan:
        """Shuffle the deck for the next deal and apply the card faults."""
        if self.scenario is not None:
            sc = self.scenario
            deck = sc.deck(self.rng, sc.history, sc.deals)
            sc.history.append(list(deck))
            del sc.history[:-10]
            sc.deals += 1
        else:
            deck = list(DECK_CODES)
            self.rng.shuffle(deck)
        self.deals += 1
        tag = f"{self.seed:x}" if self.seed is not None else "r"
        return plan_deal(deck, f"sim-{tag}-{self.deals:04d}", faults)

    async def deal(self, faults: str | list[str] | frozenset[Fault] | None = None) -> DealPlan:
        """Deal one whole deck; returns what was meant to be reported (before line faults)."""
        chosen = faults if isinstance(faults, frozenset) else parse_faults(faults)
        plan = self.next_plan(chosen)
        self.last_plan = plan
        self.clear_faults()  # a device deals only once its faults are cleared
        messages: list[Message] = [msg_deal_start(plan.shuffle_id)]
        messages += [msg_packet(i, packet) for i, packet in enumerate(plan.packets)]
        messages += [msg_stub(plan.stub), msg_deal_end()]
        self.state = DeviceState.DEALING
        finished = await self.play(messages, 1 + FAULT_PACKET, chosen)
        if finished:
            self.state = DeviceState.IDLE
        return plan


def main(argv: list[str]) -> int:
    async def action(sim: DeviceSimulator, faults: frozenset[Fault]) -> str:
        assert isinstance(sim, ShufflerSimulator)
        plan = await sim.deal(faults)
        return f"dealt {plan.shuffle_id}" + (f" with {', '.join(sorted(faults))}" if faults else "")

    return cli(
        "shuffler",
        argv,
        lambda port, seed, interval: ShufflerSimulator(port, seed=seed, interval=interval),
        action,
        "a deal of seven packets and the stub",
    )
