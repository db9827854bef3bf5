"""The pole display service: the essentials of each round on a 2×20 customer display."""

from __future__ import annotations

import asyncio

import structlog

from controller.ports import EffectSource
from controller.table import Effect, RoundClosed, StatusChanged
from drivers.base import DisplaySink
from drivers.codecs.pole import PoleResult, format_pole

log = structlog.get_logger(__name__)


def pole_screen(effect: Effect) -> PoleResult | None:
    """What the 2×20 pole display shows for an effect (None: leave the screen as it is)."""
    if isinstance(effect, StatusChanged):
        # The fault needs no disk to be shown: it stays until the next result after recovery.
        if effect.payload.state == "fault":
            return PoleResult.message("TABLE FAULT", "DO NOT SETTLE")
        return None
    if not isinstance(effect, RoundClosed):
        return None
    p = effect.payload
    if p.status != "settled":
        reason = p.reasons[0].code.replace("_", " ").upper() if p.reasons else ""
        banner = "ROUND VOID" if p.status == "void" else "ALL HANDS DEAD"
        return PoleResult.message(banner, reason)
    if p.dealer is None:
        return None
    if p.dealer.two_jacks or p.dealer.setting is None:
        return PoleResult.message("DEALER 2 JACKS", "PAI GOW LOSES")
    s = p.dealer.setting
    return PoleResult.dealer_setting(s.front, s.back, s.rule)


class PoleService:
    """Shows the essentials of each round on a pole display (latest screen wins)."""

    def __init__(self, sink: DisplaySink) -> None:
        self.sink = sink
        self.name = f"pole[{sink.name}]"
        self._latest: tuple[str, str] | None = None
        self._changed = asyncio.Event()
        self._fault = False

    def _on_effect(self, effect: Effect) -> None:
        screen = pole_screen(effect)
        if isinstance(effect, StatusChanged):
            fault = effect.payload.state == "fault"
            if self._fault and not fault:
                screen = PoleResult.message("TABLE READY", "JOURNAL OK AGAIN")
            self._fault = fault
        if screen is not None:
            self._latest = format_pole(screen)
            self._changed.set()

    async def run(self, host: EffectSource) -> None:
        host.subscribe(self._on_effect)
        while True:
            await self._changed.wait()
            self._changed.clear()
            if self._latest is not None:
                await self.sink.show(self._latest)
