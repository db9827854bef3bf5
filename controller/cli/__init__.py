"""The command line, ``paigow-table`` (``python -m controller.cli``): ``main`` parses and runs.

main.py       the parser and the entry point
house_way.py  house-way
table.py      run, check-config, demo
analyze.py    analyze … (the game's math)
monitor.py    monitor, schemas (the MQTT feed)
"""

from controller.cli.main import build_parser, command_parser, main

__all__ = ["build_parser", "command_parser", "main"]
