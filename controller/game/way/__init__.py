"""The House Way as data (issue 23): a way is a TOML file of rules (``language``), set by one
engine (``engine``), proven over every hand (``check``) and compared with another (``diff``).
The shipped ways are in ``controller/game/ways/``; docs/house-way.md teaches the language."""

from controller.game.way.engine import Way, WayError, load_way, shipped_ways
from controller.game.way.language import WaySyntaxError

__all__ = ["Way", "WayError", "WaySyntaxError", "load_way", "shipped_ways"]
