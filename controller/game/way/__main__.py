"""``python -m controller.game.way --write-tables``: the shipped ways' pattern tables."""

from controller.game.way.engine import main

raise SystemExit(main())
