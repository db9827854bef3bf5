"""Game protection: exact statistical tests on every deal and first-position draw
(docs/protection.md). Pure: no I/O, no clock, no asyncio."""

from controller.protection.checks import Cell
from controller.protection.observation import DealObservation, observation_from_round
from controller.protection.watch import Finding, ProtectionConfig, TestState, Watch

__all__ = [
    "Cell",
    "DealObservation",
    "Finding",
    "ProtectionConfig",
    "TestState",
    "Watch",
    "observation_from_round",
]
