"""``python -m simulators <device> [args]``: run one device simulator standalone.

Each device is a module with ``main(argv) -> int``, imported only when asked for, so a device
whose module is missing gives a clear message instead of breaking the others.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Final

DEVICES: Final = {
    "shuffler": "simulators.shuffler",
    "shoe": "simulators.shoe",
    "rng": "simulators.rng",
    "dice": "simulators.dice",
    "pole": "simulators.pole",
}

USAGE: Final = (
    "usage: python -m simulators <device> [args]\n"
    f"devices: {', '.join(DEVICES)}\n"
    "python -m simulators <device> --help for a device's options"
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    device, rest = args[0], args[1:]
    module_name = DEVICES.get(device)
    if module_name is None:
        print(f"unknown device {device!r}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"the {device} simulator is not available: no module {module_name}", file=sys.stderr)
        return 2
    entry: Callable[[list[str]], int] | None = getattr(module, "main", None)
    if not callable(entry):
        print(f"{module_name} has no main(argv) to run", file=sys.stderr)
        return 2
    return int(entry(rest))


if __name__ == "__main__":
    sys.exit(main())
