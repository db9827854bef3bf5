"""``paigow-table house-way``: the House Way setting of seven cards, one hand or a stream, by the
filed way or any way file (``--way NAME|FILE``); ``house-way check FILE`` proves a way over every
hand and ``house-way diff A B`` compares two (controller/game/way, docs/house-way.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from controller.exits import EXIT_DATAERR, EXIT_IOERR, EXIT_NOINPUT, CliError, Parser, Subcommands
from controller.game.cards import CardError, card_texts, parse_cards
from controller.game.house_way import HouseWayError, house_way
from controller.game.house_way_cache import Setter
from controller.game.setting import Rules, Setting
from controller.game.way import Way, WayError, WaySyntaxError, load_way


def _rules_from(args: argparse.Namespace) -> Rules:
    return Rules(wheel_rank=args.wheel)


def _setter(way: Way | None) -> Setter:
    """The filed way's rule code, or a data way's rules (the same settings for dealer-open)."""
    if way is None:
        return house_way

    def by_way(cards: Sequence[int], rules: Rules) -> Setting:
        return way.set(cards, rules)

    return by_way


def _setting_json(
    cards: Sequence[object], rules: Rules, way: Way | None = None
) -> dict[str, object]:
    parsed = parse_cards([str(c) for c in cards])
    setting = _setter(way)(parsed, rules)
    return {"cards": card_texts(parsed), **setting.to_dict()}


def rule_code_line(
    number: int, text: str, rules: Rules, way: Way | None = None
) -> tuple[str, bool]:
    """Line ``number`` through the rule code: its JSON line (``{"line", "error"}`` for a line
    that is not seven cards) and whether it failed. The batch's fast path (:func:`batch_line`)
    answers the lines it reads with the same bytes."""
    try:
        cards = text.replace(",", " ").split()
        if len(cards) != 7:
            raise CardError(f"expected 7 cards, got {len(cards)}")
        record: dict[str, object] = _setting_json(cards, rules, way)
        failed = False
    except (CardError, HouseWayError, WayError) as exc:
        record = {"line": number, "error": str(exc)}
        failed = True
    return json.dumps(record, ensure_ascii=False) + "\n", failed


class _Stream:
    """JSON lines for hand lines: the rank-pattern table (controller/game/house_way_cache.py)
    and output strings from tables for the 96 % of hands that cannot make a flush, the rule code
    (the same output, byte for byte) for the rest and for any line it does not simply read."""

    def __init__(self, rules: Rules, way: Way | None = None) -> None:
        from controller.game.cards import DECK
        from controller.game.house_way_cache import PATTERN_RANKS, SUITS, load_table, table_of

        self.rules = rules
        self.setter = _setter(way)
        self.ranks = PATTERN_RANKS
        self.suits = SUITS
        self.codes = {str(c): int(c) for c in DECK}
        self.quoted = [json.dumps(str(c)) for c in DECK]
        self.way = None
        if way is None or (way.name == "dealer-open" and way.shipped):
            table = load_table(rules)  # the filed way: the packaged table
        else:
            # Another way: the same table, grown from its rules as patterns come (_grow).
            self.way = way
            table = way.pattern_table(rules)
            if not table.index:
                table = table_of(dict(way.cache(rules).entries))
        self.index = table.index
        self.columns = table.columns
        self.orders = table.orders
        self.names = table.names_json
        self._quoted_names: dict[str, str] = {}
        self._line = self._make_line()

    def _name(self, text: str | None) -> str:
        q = self._quoted_names.get(text or "")
        if q is None:
            q = self._quoted_names[text or ""] = json.dumps(text, ensure_ascii=False)
        return q

    def _complete(self, hand: list[int]) -> str:
        """A hand that may make a flush: the rule code's setting, written the same way."""
        from controller.game.setting import display_order

        setting = self.setter(hand, self.rules)
        q = self.quoted
        return "".join(
            (
                '{"cards": [',
                ", ".join([q[x] for x in hand]),
                '], "front": [',
                ", ".join([q[x] for x in display_order(setting.front)]),
                '], "back": [',
                ", ".join([q[x] for x in display_order(setting.back)]),
                '], "rule": ',
                self._name(setting.rule),
                ', "front_hand": ',
                self._name(setting.front_value.name),
                ', "back_hand": ',
                self._name(setting.back_value.name),
                "}\n",
            )
        )

    def _grow(self, ordered: bytes) -> int | None:
        """A data way's row for a pattern not yet in the table: set by its rules, added."""
        if self.way is None:
            return None
        try:
            entry = self.way.cache(self.rules).entry(list(ordered))
        except WayError:
            return None  # the slow path writes the error line
        if entry is None:
            return None
        if not hasattr(self, "_name_rows"):
            self._name_rows = {n: i for i, n in enumerate(self.names)}
            self._order_rows = {o: i for i, o in enumerate(self.orders)}
        row = len(self.columns[0])
        for column, value in zip(
            self.columns,
            (
                self._order_rows.setdefault(entry.order, len(self._order_rows)),
                *(self._name_row(n) for n in (entry.rule, entry.front_hand, entry.back_hand)),
            ),
            strict=True,
        ):
            column.append(value)
        if len(self.orders) < len(self._order_rows):
            self.orders.append(entry.order)
        self.index[ordered.translate(self.ranks)] = row
        return row

    def _name_row(self, name: str) -> int:
        found = self._name_rows.get(name)
        if found is None:
            found = self._name_rows[name] = len(self.names)
            self.names.append(json.dumps(name, ensure_ascii=False))
        return found

    def line(self, text: str) -> str | None:
        """The JSON line for a hand, or None: the rule code decides (errors included)."""
        return self._line(text)

    def _make_line(self) -> Callable[[str], str | None]:
        # One closure over locals: the per-hand path reads no attribute (it runs 10⁵ times a
        # second, where an attribute look-up is a few per cent).
        code = self.codes.__getitem__
        get_row = self.index.get
        order_of, rule_of, front_of, back_of = self.columns
        orders, names, q = self.orders, self.names, self.quoted
        suits, ranks = self.suits, self.ranks
        complete = self._complete
        grow = self._grow
        join = "".join

        def line(text: str) -> str | None:
            tokens = (text.replace(",", " ") if "," in text else text).split()
            if len(tokens) != 7:
                return None
            try:
                hand = list(map(code, tokens))
            except KeyError:
                return None
            ordered = bytes(sorted(hand))
            if len(set(ordered)) != 7:
                return None
            s = ordered.translate(suits)
            if max(s.count(0), s.count(1), s.count(2), s.count(3)) + s.count(4) >= 5:
                return complete(hand)  # it may make a flush: the rule code sets it
            row = get_row(ordered.translate(ranks))
            if row is None:
                row = grow(ordered)
                if row is None:
                    return None
            a, b, c, d, e, f, g = orders[order_of[row]]
            o = [q[x] for x in ordered]
            return join(
                (
                    '{"cards": [',
                    ", ".join([q[x] for x in hand]),
                    '], "front": [',
                    o[a],
                    ", ",
                    o[b],
                    '], "back": [',
                    o[c],
                    ", ",
                    o[d],
                    ", ",
                    o[e],
                    ", ",
                    o[f],
                    ", ",
                    o[g],
                    '], "rule": ',
                    names[rule_of[row]],
                    ', "front_hand": ',
                    names[front_of[row]],
                    ', "back_hand": ',
                    names[back_of[row]],
                    "}\n",
                )
            )

        return line


def batch_line(rules: Rules, way: Way | None = None) -> Callable[[str], str | None]:
    """The batch's fast path (``house-way`` on stdin): a hand line's JSON line from the
    rank-pattern tables, or None for a line it does not read (the rule code answers those,
    :func:`rule_code_line`, with the bytes this path would give)."""
    return _Stream(rules, way).line


def house_way_lines(
    lines: Iterable[str], out: TextIO, rules: Rules, *, flush: bool = True, way: Way | None = None
) -> int:
    """Stream hands (one per line) to JSON lines; a bad line gives {"line", "error"} and goes on."""
    fast = batch_line(rules, way)
    failed = 0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        record = fast(text)
        if record is None:
            record, bad = rule_code_line(number, text, rules, way)
            failed += bad
        out.write(record)
        if flush:
            out.flush()
    return 1 if failed else 0


def house_way_stdin(rules: Rules, way: Way | None = None) -> int:
    """``house-way`` on stdin: whatever input is there is answered in one write, so a stream of
    hands is written in blocks while a person (or a program) typing one hand at a time gets each
    answer at once."""
    line = batch_line(rules, way)
    fd = sys.stdin.fileno()
    out = sys.stdout
    failed = 0
    number = 0
    rest = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if chunk:
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            lines = data[: cut - 1].decode("utf-8", errors="replace").split("\n") if cut else []
        else:
            lines = [rest.decode("utf-8", errors="replace")] if rest else []
        written: list[str] = []
        for raw in lines:
            number += 1
            record = line(raw)
            if record is None:
                text = raw.strip()
                if not text or text.startswith("#"):
                    continue
                record, bad = rule_code_line(number, text, rules, way)
                failed += bad
            written.append(record)
        if written:
            out.write("".join(written))
            out.flush()
        if not chunk:
            return 1 if failed else 0


def load_way_or_fail(text: str) -> Way:
    """A shipped way or a way file; a :class:`CliError` if it cannot be: 66 no such way,
    74 unreadable, 65 not a way file (its line named)."""
    try:
        return load_way(text)
    except FileNotFoundError as exc:
        raise CliError(EXIT_NOINPUT, str(exc)) from None
    except IsADirectoryError:
        raise CliError(EXIT_NOINPUT, f"{text}: is a directory, not a way file") from None
    except OSError as exc:
        raise CliError(EXIT_IOERR, f"{text}: cannot be read: {exc.strerror or exc}") from None
    except WaySyntaxError as exc:
        raise CliError(EXIT_DATAERR, str(exc)) from None


_load = load_way_or_fail


def _progress(label: str) -> object:
    from controller.analysis.progress import Progress

    return Progress(label)


def cmd_check(args: argparse.Namespace) -> int:
    """``house-way check FILE``: parse (errors name the line), then prove over every hand."""
    from controller.game.way.check import check_way

    way = _load(args.file)
    report = check_way(
        way,
        _rules_from(args),
        workers=args.workers,
        progress=None if args.json else _progress(f"checking {way.name}"),  # type: ignore[arg-type]
    )
    proof = None
    if report.passed and not way.shipped:
        # The record a table needs before it deals this way (controller/game/way/proof.py).
        from controller.game.way.proof import write_proof

        proof = write_proof(args.file, way, report.hands, report.seconds)
    if args.json:
        print(
            json.dumps(
                {**report.to_dict(), "proof": str(proof) if proof else None}, ensure_ascii=False
            )
        )
        return 0 if report.passed else 1
    print(f"Way      {way.name}  (sha256 {way.digest})")
    print(
        f"Hands    {report.hands:,} of 154,143,080, in {report.classes:,} exact classes, "
        f"{report.seconds:.1f} s"
    )
    _print_rules(report.by_rule, report.hands)
    for f in report.failures:
        print(f"FAIL     {f.kind}: {f.detail}: {f.hands:,} hands, e.g. {f.example}")
    for rid in report.never_used:
        print(f"Note     rule {rid} sets no hand")
    if report.passed and not way.shipped and not any(p.exists() for p in way.table_files):
        # Proven: keep its rank-pattern table, so batches and analyses run at full speed.
        print(f"Table    {way.write_table()}")
    if proof is not None:
        print(f"Proof    {proof}")
    print(
        "Result   "
        + (
            "PASSED: exactly one rule sets every hand, none fouls"
            if report.passed
            else f"FAILED: {len(report.failures)} problem(s)"
        )
    )
    return 0 if report.passed else 1


def _print_rules(by_rule: dict[str, int], hands: int) -> None:
    """The hands each rule sets, in the way's order (docs/house-way.md)."""
    width = max((len(r) for r in by_rule), default=4)
    for rid, count in by_rule.items():
        share = count / hands if hands else 0.0
        print(f"Rule     {rid:<{width}} {count:>13,} hands  {share:>8.4%}")


def cmd_diff(args: argparse.Namespace) -> int:
    """``house-way diff A B``: the exact share of hands the two set differently, by rule pair."""
    from controller.game.way.diff import diff_ways

    a, b = _load(args.a), _load(args.b)
    report = diff_ways(
        a,
        b,
        _rules_from(args),
        workers=args.workers,
        progress=None if args.json else _progress(f"{a.name} vs {b.name}"),  # type: ignore[arg-type]
    )
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
        return 0
    print(f"A  {a.name}  (sha256 {a.digest})")
    print(f"B  {b.name}  (sha256 {b.digest})")
    print(
        f"Set differently: {report.differ:,} of 154,143,080 hands = {report.share:.4%} "
        f"({report.seconds:.1f} s)"
    )
    if report.unset:
        print(f"Not compared: {report.unset:,} hands one way cannot set (run house-way check)")
    print(f"{'rule in A':<16} {'rule in B':<22} {'hands':>11} {'share':>9}  example: A | B")
    for p in report.pairs:
        print(
            f"{p.rule_a:<16} {p.rule_b:<22} {p.hands:>11,} {p.share:>9.4%}  {p.example}: "
            f"{p.setting_a}  /  {p.setting_b}"
        )
    return 0


def cmd_house_way(args: argparse.Namespace) -> int:
    rules = _rules_from(args)
    way = _load(args.way) if args.way else None
    if not args.cards:
        return house_way_stdin(rules, way)
    try:
        if len(args.cards) != 7:
            raise CardError(f"expected 7 cards, got {len(args.cards)}")
        record = _setting_json(args.cards, rules, way)
    except (CardError, WayError) as exc:
        print(f"paigow-table house-way: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(record, ensure_ascii=False))
        return 0
    front, back = " ".join(record["front"]), " ".join(record["back"])  # type: ignore[arg-type]
    print(f"Front  {front:<16} {record['front_hand']}")
    print(f"Back   {back:<16} {record['back_hand']}")
    print(f"Rule   {record['rule']}")
    return 0


class _Verbs:
    """``house-way``: seven cards (or none, for a stream), or the verbs ``check FILE`` and
    ``diff A B``, each its own parser, so its options go anywhere and ``--help`` is its own
    (``exits.Parser``'s ``verbs``)."""

    def __init__(self) -> None:
        self.parsers: dict[str, argparse.ArgumentParser] = {}

    def __call__(self, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]] | None:
        at = _first_word(words)
        verb = self.parsers.get(words[at]) if at is not None else None
        if verb is None or at is None:
            return None
        return verb, words[:at] + words[at + 1 :]


def _first_word(words: Sequence[str]) -> int | None:
    """Where the first word that is not an option (nor --way's value) is."""
    skip = False
    for at, word in enumerate(words):
        if skip:
            skip = False
        elif word == "--way":
            skip = True
        elif not word.startswith("-"):
            return at
    return None


def _verb_options(p: argparse.ArgumentParser, json_help: str) -> None:
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--workers", type=int, default=None, help="processes (default 2)")


def _verbs(prog: str) -> dict[str, argparse.ArgumentParser]:
    check = Parser(
        prog=f"{prog} check",
        description="Prove a way file (or a shipped way) over all 154,143,080 hands: exactly "
        "one rule sets each, none fouls; print the hands each rule sets. Writes a proof beside "
        "a way file that passes (docs/house-way.md). Exit 1 if it fails.",
    )
    check.add_argument("file", metavar="FILE|NAME", help="a way file, or a shipped way's name")
    _verb_options(check, "print one JSON object (hands_by_rule, failures, …)")
    check.set_defaults(func=cmd_check, command="house-way", action="check")
    diff = Parser(
        prog=f"{prog} diff",
        description="The exact share of all 154,143,080 hands two ways set differently, by "
        "rule pair, with an example of each (docs/house-way.md).",
    )
    diff.add_argument("a", metavar="A", help="a way file or a shipped way's name")
    diff.add_argument("b", metavar="B", help="the other")
    _verb_options(diff, "print one JSON object")
    diff.set_defaults(func=cmd_diff, command="house-way", action="diff")
    return {"check": check, "diff": diff}


def register(sub: Subcommands) -> None:
    verbs = _Verbs()
    p = sub.add_parser(
        "house-way",
        help="set seven cards by the House Way; check or compare way files",
        description=(
            "Set seven cards by the House Way (docs/rules.md §7, or --way). With cards: "
            "print the setting. Without: read hands from stdin, one per line, and write one "
            "JSON line per hand. 'house-way check FILE' proves a way file over all "
            "154,143,080 hands (one rule for each, no foul); 'house-way diff A B' gives the "
            "exact share of hands two ways set differently, by rule pair (each has its own "
            "--help; docs/house-way.md)."
        ),
        verbs=verbs,  # a keyword of exits.Parser, the class argparse makes it of
    )
    verbs.parsers = _verbs(p.prog)
    p.add_argument(
        "cards",
        nargs="*",
        help="seven cards, e.g. As Kd 7h 5s 3c 2d JK; or: check FILE; or: diff A B",
    )
    p.add_argument(
        "--way",
        metavar="NAME|FILE",
        help="a shipped way (dealer-open, the default; classic) or a way file",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_house_way)
