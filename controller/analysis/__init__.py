"""The game's math, computed from the engine's own rules (issue 7, docs/rules.md §9).

``hand_classes`` enumerates every seven-card hand of the 53-card deck as weighted equivalence
classes; ``chan_chu`` and ``side_bets`` turn the classes into exact figures; ``base_game`` and
``side_bets`` run seeded, multi-process Monte Carlo; ``report`` writes docs/math.md; ``cli`` adds
``paigow-table analyze``.
"""
