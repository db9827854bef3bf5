"""The 2×20 customer (pole) display: ESC/POS customer-display commands, pure text ⇄ bytes.

The host sends only these commands (docs/protocols-dice-pole.md "Pole display"):

    ESC @      1B 40        initialise: clear the screen, cursor home, default modes
    US MD1     1F 01        overwrite mode (no scrolling)
    CLR        0C           clear the screen, cursor home
    US $ x y   1F 24 x y    cursor to column x (1–20), row y (1–2)

and the printable ASCII characters 0x20–0x7E, which every ESC/POS display shows the same way in
its default (USA, PC437) character set. ``display_text`` maps any other character to a safe
substitute first (♠ → s, é → e, unknown → ?), so text can never inject a control byte.

``PoleScreen`` is the device side (the simulator's screen): it interprets the commands above and
the other common ones a display accepts, and counts what it does not understand.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

WIDTH: Final = 20
ROWS: Final = 2

ESC: Final = 0x1B
US: Final = 0x1F
CLR: Final = 0x0C
HOM: Final = 0x0B
CAN: Final = 0x18
BS: Final = 0x08
HT: Final = 0x09
LF: Final = 0x0A
CR: Final = 0x0D

INIT: Final = bytes((ESC, 0x40, US, 0x01, CLR))  # ESC @, US MD1, CLR

_SUBSTITUTES: Final = {
    "♣": "c",
    "♧": "c",
    "♦": "d",
    "♢": "d",
    "♥": "h",
    "♡": "h",
    "♠": "s",
    "♤": "s",
    "‘": "'",
    "’": "'",
    "‚": "'",
    "′": "'",
    "“": '"',
    "”": '"',
    "„": '"',
    "″": '"',
    "‐": "-",
    "‑": "-",
    "‒": "-",
    "–": "-",
    "—": "-",
    "−": "-",
    "…": "...",
    "×": "x",
    "·": ".",
    "•": "*",
    "ß": "ss",
    "Æ": "AE",
    "æ": "ae",
    "Ø": "O",
    "ø": "o",
    "Ł": "L",
    "ł": "l",
    "€": "E",
    "£": "L",
}


def _char(ch: str) -> str:
    if " " <= ch <= "~":
        return ch
    if ch in _SUBSTITUTES:
        return _SUBSTITUTES[ch]
    if unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp"):
        return " "  # controls and odd spaces: never send a control byte to the display
    folded = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    if folded and all(" " <= c <= "~" for c in folded):
        return folded  # é → e, ﬁ → fi, full-width Ａ → A
    return "?"


def display_text(text: str, width: int = WIDTH) -> str:
    """``text`` as the display can show it: printable ASCII only, exactly ``width`` characters
    (padded with spaces, or cut)."""
    mapped = "".join(_char(ch) for ch in text[: width * 4])
    return mapped[:width].ljust(width)


def display_lines(lines: Sequence[str]) -> tuple[str, str]:
    """Two display lines from any number of lines (missing ones blank, extra ones dropped)."""
    first = lines[0] if len(lines) > 0 else ""
    second = lines[1] if len(lines) > 1 else ""
    return display_text(first), display_text(second)


def cursor_to(column: int, row: int) -> bytes:
    """US $ x y: cursor to ``column`` 1–20 of ``row`` 1–2."""
    if not (1 <= column <= WIDTH and 1 <= row <= ROWS):
        raise ValueError(f"cursor position ({column}, {row}) is off the 20×2 screen")
    return bytes((US, 0x24, column, row))


def encode_frame(lines: Sequence[str]) -> bytes:
    """The bytes that show two lines: each is written whole at its row, so no clear (and no
    flicker) is needed between frames."""
    top, bottom = display_lines(lines)
    return cursor_to(1, 1) + top.encode("ascii") + cursor_to(1, 2) + bottom.encode("ascii")


# -- what the display shows: format_pole ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoleResult:
    """What the pole display should say: the dealer's setting, or a banner (which wins).

    ``front``/``back`` are card texts ("As", "JK"), ``rule`` the House Way rule id (docs/rules.md
    §7);
    ``banner`` is a message such as "ALL HANDS DEAD", with an optional second line ``detail``.
    """

    front: tuple[str, ...] = ()
    back: tuple[str, ...] = ()
    rule: str | None = None
    banner: str | None = None
    detail: str = ""

    @classmethod
    def dealer_setting(
        cls, front: Sequence[str], back: Sequence[str], rule: str | None = None
    ) -> PoleResult:
        return cls(front=tuple(front), back=tuple(back), rule=rule)

    @classmethod
    def message(cls, banner: str, detail: str = "") -> PoleResult:
        return cls(banner=banner, detail=detail)


def _centre(text: str) -> str:
    return display_text(display_text(text, WIDTH * 2).strip().center(WIDTH))


def _wrap(text: str) -> tuple[str, str]:
    """Split a long banner at the last space that leaves a first line of at most 20."""
    flat = display_text(text, WIDTH * 2).strip()
    cut = flat.rfind(" ", 0, WIDTH + 1)
    if len(flat) <= WIDTH or cut <= 0:
        return flat, ""
    return flat[:cut], flat[cut + 1 :]


def format_pole(result: PoleResult) -> tuple[str, str]:
    """The two 20-character lines for ``result`` (docs/protocols-dice-pole.md "Screens")::

    |FRONT As Ks    2P-77|      |   ALL HANDS DEAD   |
    |BACK  Qh Qd 9c 9s 4d|      |    SHORT PACKET    |
    """
    if result.banner is not None:
        if result.detail:
            return _centre(result.banner), _centre(result.detail)
        first, second = _wrap(result.banner)
        return _centre(first), _centre(second)
    front = " ".join(display_text(c, 2).strip() for c in result.front)
    back = " ".join(display_text(c, 2).strip() for c in result.back)
    rule = display_text(result.rule or "", WIDTH).strip()
    left = f"FRONT {front}"
    if rule and len(left) + 1 + len(rule) > WIDTH:
        left = f"F {front}"  # a long rule id (4K-JK-PAIR) needs the room
    top = f"{left} {rule.rjust(WIDTH - len(left) - 1)}"
    return display_text(top), display_text(f"BACK  {back}")


# -- the device side: what a display shows for the bytes it receives ----------------------------


class PoleScreen:
    """A 2×20 ESC/POS customer display's screen, fed bytes as they arrive (split anywhere).

    Emulates the commands the driver sends plus the usual others (HOM, CAN, BS, HT, LF, CR,
    US MD2 vertical scroll, and parameters of ESC R/t/=, US C/E/X that do not change the text).
    ``errors`` counts bytes it did not understand; a byte above 0x7E shows as "?".
    """

    _ESC_ONE_PARAM: Final = frozenset(b"Rt=")  # ESC R n, ESC t n, ESC = n
    _US_ONE_PARAM: Final = frozenset(b"CEX")  # US C n (cursor), US E n (blink), US X n (bright)

    def __init__(self) -> None:
        self.rows = [[" "] * WIDTH for _ in range(ROWS)]
        self.column = 0
        self.row = 0
        self.vertical_scroll = False
        self.errors = 0
        self._pending = bytearray()  # an incomplete escape sequence

    @property
    def lines(self) -> tuple[str, str]:
        return "".join(self.rows[0]), "".join(self.rows[1])

    def feed(self, data: bytes) -> None:
        for byte in data:
            if self._pending:
                self._pending.append(byte)
                self._command()
            elif byte in (ESC, US):
                self._pending.append(byte)
            else:
                self._single(byte)

    def _clear(self) -> None:
        self.rows = [[" "] * WIDTH for _ in range(ROWS)]
        self.column = self.row = 0

    def _command(self) -> None:
        seq = self._pending
        complete = self._esc_command(seq) if seq[0] == ESC else self._us_command(seq)
        if complete:
            self._pending.clear()

    def _esc_command(self, seq: bytearray) -> bool:
        """Applies an ESC sequence; False while it still needs its parameter byte."""
        op = seq[1]
        if op == 0x40:  # ESC @
            self._clear()
            self.vertical_scroll = False
        elif op in self._ESC_ONE_PARAM:
            return len(seq) >= 3
        else:
            self.errors += 1
        return True

    def _us_command(self, seq: bytearray) -> bool:
        """Applies a US sequence; False while it still needs parameter bytes."""
        op = seq[1]
        if op == 0x24:  # US $ x y
            if len(seq) < 4:
                return False
            x, y = seq[2], seq[3]
            if 1 <= x <= WIDTH and 1 <= y <= ROWS:
                self.column, self.row = x - 1, y - 1
            else:
                self.errors += 1
        elif op in (0x01, 0x02, 0x03):  # US MD1 overwrite, MD2 vertical, MD3 horizontal
            self.vertical_scroll = op == 0x02
        elif op in self._US_ONE_PARAM:
            return len(seq) >= 3
        else:
            self.errors += 1
        return True

    def _single(self, byte: int) -> None:
        if 0x20 <= byte <= 0x7E or byte >= 0x80:
            if byte >= 0x80:
                self.errors += 1
            self.rows[self.row][self.column] = chr(byte) if byte <= 0x7E else "?"
            self._advance()
        elif byte == CLR:
            self._clear()
        elif byte == HOM:
            self.column = self.row = 0
        elif byte == CAN:
            self.rows[self.row] = [" "] * WIDTH
            self.column = 0
        elif byte == BS:
            self.column = max(0, self.column - 1)
        elif byte == HT:
            self._advance()
        elif byte == LF:
            self._line_feed()
        elif byte == CR:
            self.column = 0
        else:
            self.errors += 1

    def _advance(self) -> None:
        self.column += 1
        if self.column < WIDTH:
            return
        self.column = 0
        if self.row + 1 < ROWS:
            self.row += 1
        elif self.vertical_scroll:
            self._scroll()
        else:
            self.row = 0  # overwrite mode wraps from the end of the lower line to home

    def _line_feed(self) -> None:
        if self.row + 1 < ROWS:
            self.row += 1
        elif self.vertical_scroll:
            self._scroll()
        else:
            self.row = 0

    def _scroll(self) -> None:
        self.rows = [*self.rows[1:], [" "] * WIDTH]
