"""The dealer's table monitor and the supervisor's view, served by the daemon (docs/display.md)."""

from controller.display.server import DisplayService

__all__ = ["DisplayService"]
