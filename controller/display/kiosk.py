"""The kiosk's own credential (docs/display.md, "The kiosk's credential").

The kiosk is the dealer page in Chromium on the table computer. Its address (loopback) is the
address of every other program there too, so the display tells it apart by a credential, not by
its address: a session cookie, ``paigow_kiosk``, that only a holder of the kiosk token gets. A
request carrying it keeps its connection and its live stream under a flood (guard.py); it grants
nothing else (who may view or act is still access.py's rule).

The server's side, :class:`KioskKey`: the token (``[display] kiosk_token_file``, or a random one
made at start and known only to the process), one-time tickets, and the cookie's value: an
HMAC of the token, so it is not the token, and it stays valid across a restart of the
controller when the token comes from a file.

The launcher's side (``paigow-table kiosk``, run as the kiosk's user): :func:`fetch_ticket`
asks the server for a ticket with the token (``POST /api/kiosk/ticket``);
:func:`write_start_page` writes, in a directory only that user may enter, a page that sends the
browser to ``/kiosk#<ticket>``; :func:`launch` runs the browser on that page, so the ticket is
never on a command line (which every user of the computer can read in ``/proc``). The page
``/kiosk`` takes the ticket from the address's fragment (never sent to the server, never in a
log), spends it (``POST /api/kiosk``, which sets the cookie: HttpOnly, SameSite=Strict, gone
when the browser quits) and goes on to ``/dealer``. A ticket is good once, for ``TICKET_S``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from controller.config.readers import read_kiosk_token as read_kiosk_token
from controller.credentials import TOKEN_CHARS

#: The kiosk's session cookie (HttpOnly, SameSite=Strict, no expiry: it ends with the browser).
KIOSK_COOKIE: Final = "paigow_kiosk"
#: Seconds a ticket may wait to be spent.
TICKET_S: Final = 60.0
#: Tickets outstanding at most (a new one beyond that drops the oldest).
MAX_TICKETS: Final = 16
#: Characters a kiosk token must have (``openssl rand -hex 32`` makes 64).
MIN_TOKEN_CHARS: Final = TOKEN_CHARS
#: The name of the systemd credential the launcher reads by default (``LoadCredential=``).
CREDENTIAL_NAME: Final = "kiosk-token"
#: What the browser is given before the start page, when the launcher is given nothing else.
BROWSER_ARGS: Final = ("--kiosk", "--incognito", "--no-first-run", "--noerrdialogs")

_COOKIE_LABEL = b"paigow-table kiosk cookie v1"


@dataclass
class KioskKey:
    """The kiosk token, the tickets it buys and the cookie they are exchanged for."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    lifetime: float = TICKET_S
    clock: Callable[[], float] = time.monotonic
    _tickets: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def cookie(self) -> str:
        """The cookie's value: derived from the token, never the token itself."""
        return hmac.new(self.token.encode("utf-8"), _COOKIE_LABEL, hashlib.sha256).hexdigest()

    def token_ok(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8"))

    def cookie_ok(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(
            presented.encode("utf-8"), self.cookie.encode("ascii")
        )

    def ticket(self) -> str:
        """A new one-time ticket, good for ``lifetime`` seconds."""
        now = self.clock()
        self._tickets = {t: until for t, until in self._tickets.items() if until > now}
        while len(self._tickets) >= MAX_TICKETS:
            del self._tickets[next(iter(self._tickets))]
        ticket = secrets.token_urlsafe(32)
        self._tickets[ticket] = now + self.lifetime
        return ticket

    def redeem(self, ticket: str) -> bool:
        """Spend ``ticket``: True once, if it was made here and has not expired."""
        for known in list(self._tickets):
            if hmac.compare_digest(known.encode("utf-8"), ticket.encode("utf-8")):
                until = self._tickets.pop(known)
                return until > self.clock()
        return False


# --- the launcher (paigow-table kiosk) ---------------------------------------------------------


class TicketRefused(Exception):
    """The server answered, and refused the ticket (a wrong token, an old server)."""


def _post_json(url: str, body: dict[str, str], timeout: float) -> dict[str, object]:
    parts = urllib.parse.urlsplit(url)
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            # The server takes a change only from its own origin (access.py same_origin).
            "Origin": f"{parts.scheme}://{parts.netloc}",
        },
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data = json.loads(response.read().decode("utf-8"))
    return data if isinstance(data, dict) else {}


def fetch_ticket(
    base_url: str,
    token: str,
    *,
    wait: float = 0.0,
    every: float = 1.0,
    log: TextIO | None = None,
) -> str:
    """A one-time ticket from the display at ``base_url`` (``http://127.0.0.1:8080``). While
    the server cannot be reached, try again every ``every`` s for up to ``wait`` s (at boot
    the kiosk may start before the controller); then OSError. TicketRefused if it refuses."""
    url = base_url.rstrip("/") + "/api/kiosk/ticket"
    deadline = time.monotonic() + wait
    said = 0.0
    while True:
        try:
            data = _post_json(url, {"token": token}, timeout=10.0)
        except urllib.error.HTTPError as exc:
            raise TicketRefused(f"{url}: {exc.code} {exc.reason}") from None
        except (OSError, ValueError) as exc:  # not up yet (URLError is an OSError)
            if time.monotonic() >= deadline:
                raise OSError(f"{url}: {exc}") from None
            if log is not None and time.monotonic() - said >= 30:
                said = time.monotonic()
                print(f"paigow-table kiosk: waiting for {url}: {exc}", file=log, flush=True)
            time.sleep(every)
            continue
        ticket = data.get("ticket")
        if not isinstance(ticket, str) or not ticket:
            raise TicketRefused(f"{url}: no ticket in the answer")
        return ticket


def start_page(base_url: str, ticket: str | None) -> str:
    """The page the browser opens first: it goes at once to ``/kiosk#<ticket>`` (or to
    ``/dealer`` without a credential, when there is no ticket)."""
    base = base_url.rstrip("/")
    target = f"{base}/kiosk#{urllib.parse.quote(ticket, safe='')}" if ticket else f"{base}/dealer"
    escaped = target.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="refresh" content="0; url={escaped}">\n'
        "<title>Pai Gow table</title></head><body></body></html>\n"
    )


def write_start_page(directory: Path, base_url: str, ticket: str | None) -> Path:
    """Write the start page into ``directory`` (made 0700 if needed), readable by this user
    alone (0600), and return its path."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    path = directory / "start.html"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(start_page(base_url, ticket))
    path.chmod(0o600)
    return path


def token_path(given: str | None) -> Path | None:
    """The token file: as given, or the systemd credential ``kiosk-token`` (LoadCredential=)."""
    if given:
        return Path(given)
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    return Path(directory) / CREDENTIAL_NAME if directory else None


def launch(
    base_url: str,
    token_file: Path | None,
    browser: Sequence[str],
    *,
    wait: float = 600.0,
    log: TextIO | None = None,
) -> int:
    """Run the browser as the kiosk: on the start page with a fresh ticket; without one (no
    token, a refusal, no server within ``wait`` s) straight on ``/dealer``, which works the
    same but is not preferred under a flood (said on ``log``). The start page is removed once
    the ticket has been spent or has expired. The browser's exit status is returned."""
    log = log if log is not None else sys.stderr
    ticket: str | None = None
    if token_file is None:
        print(
            "paigow-table kiosk: no kiosk token (--token-file, or the systemd credential "
            f"{CREDENTIAL_NAME}): the page runs without the kiosk's credential",
            file=log,
            flush=True,
        )
    else:
        try:
            ticket = fetch_ticket(base_url, read_kiosk_token(token_file), wait=wait, log=log)
        except Exception as exc:  # the screen must come up whatever happened
            print(
                f"paigow-table kiosk: {exc}: the page runs without the kiosk's credential",
                file=log,
                flush=True,
            )
    with tempfile.TemporaryDirectory(prefix="paigow-kiosk-") as name:
        page = write_start_page(Path(name), base_url, ticket)
        process = subprocess.Popen([*browser, page.as_uri()])
        with contextlib.suppress(subprocess.TimeoutExpired):  # still running: the page goes
            return process.wait(timeout=TICKET_S)
        page.unlink(missing_ok=True)  # the ticket is spent or expired by now
        return process.wait()
