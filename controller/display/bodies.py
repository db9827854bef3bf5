"""The bodies the display's POSTs accept (docs/display.md, "What is refused").

A body is read whole (at most ``MAX_BODY`` bytes), must be UTF-8 JSON, an object, nested at
most ``MAX_DEPTH`` deep, and then match its endpoint's model exactly: strict types (no ``"3"``
for 3, no ``true`` or ``3.0`` for a die), no unknown keys. Anything else is a
:class:`BodyError`, which the server answers with a 400 and a JSON error naming the field; the
message never repeats what was sent (a PIN or a token may be in it).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Bytes a body may have (the aiohttp application's ``client_max_size`` is the same).
MAX_BODY = 64 * 1024
#: Nesting a body may have: the deepest the pages send is 2 (``{"occupied": {"6": false}}``).
MAX_DEPTH = 4


class BodyError(ValueError):
    """A body that is not JSON of the expected shape: a 400 with this message."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """How deep ``value`` nests (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            level += 1
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                break
            stack.extend((c, level) for c in item if isinstance(c, dict | list))
    return deepest


def parse(raw: bytes) -> dict[str, Any]:
    """A body's bytes as a JSON object, or :class:`BodyError`."""
    if len(raw) > MAX_BODY:
        raise BodyError(f"the body is too large: at most {MAX_BODY // 1024} KiB")
    too_deep = BodyError(f"the body is nested too deeply: at most {MAX_DEPTH} levels")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise BodyError("the body is not UTF-8") from None
    except RecursionError:
        # Deeper than the interpreter's recursion limit (~1,000): the C parser stops cleanly.
        raise too_deep from None
    except ValueError:
        raise BodyError("the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BodyError("expected a JSON object")
    if _depth(data) > MAX_DEPTH:
        raise too_deep
    return data


async def read(request: web.Request) -> dict[str, Any]:
    """The request's body as a JSON object, or :class:`BodyError` (too large, not JSON)."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BodyError(f"the body is too large: at most {MAX_BODY // 1024} KiB") from None
    return parse(raw)


# --- what each endpoint takes ------------------------------------------------------------------


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


Die = Annotated[int, Field(ge=1, le=6)]
Seat = Annotated[str, Field(min_length=1, max_length=8)]
Card = Annotated[str, Field(min_length=2, max_length=4)]
RoundId = Annotated[str, Field(min_length=1, max_length=128)]
Secret = Annotated[str, Field(max_length=128)]
#: A supervisor's badge (checked with a supervisors file) or, without one, the name typed.
Person = Annotated[str, Field(max_length=64)]
Reason = Annotated[str, Field(max_length=200)]


class DiceBody(Body):
    #: Three integers 1-6 (strict: no strings, floats or booleans).
    dice: list[Die] = Field(min_length=3, max_length=3)


class SeatsBody(Body):
    occupied: dict[Seat, bool] = Field(max_length=16)


class PlayerSettingBody(Body):
    seat: Seat
    front: list[Card] | None = Field(default=None, min_length=2, max_length=2)
    house_way: bool = False
    round_id: RoundId | None = None
    #: A correction (the seat's setting entered again) needs a supervisor: badge and PIN (or,
    #: without a supervisors file, the name and the void PIN) and a reason. A PIN given is
    #: checked, even for a first entry.
    badge: Person = ""
    by: Person = ""
    pin: Secret | None = None
    reason: Reason = ""


class PreviewBody(Body):
    seat: Seat
    front: list[Card] = Field(min_length=2, max_length=2)
    round_id: RoundId | None = None


class VoidBody(Body):
    pin: Secret = ""  # missing: a wrong PIN (refused and journaled)
    reason: Reason = ""
    round_id: RoundId | None = None
    badge: Person = ""  # with a supervisors file: the supervisor's badge
    by: Person = ""  # without one: the name typed beside the shared PIN (not checked)


class AcknowledgeBody(Body):
    alarm_id: str = Field(max_length=128)
    badge: Person = ""  # with a supervisors file: the supervisor's badge (journaled as by)
    by: Person = ""  # without one: the name typed beside the shared PIN (not checked)
    pin: Secret = ""
    note: str = Field(default="", max_length=200)


class SignInBody(Body):
    badge: str = Field(max_length=64)
    pin: Secret = ""


class EmptyBody(Body):
    """Sign-out and logout take nothing (the page sends ``{}``)."""


class LoginBody(Body):
    token: str = Field(min_length=1, max_length=1024)


class KioskTicketBody(Body):
    """The kiosk launcher's ``POST /api/kiosk/ticket``: the kiosk token."""

    token: str = Field(min_length=1, max_length=1024)


class KioskBody(Body):
    """The kiosk page's ``POST /api/kiosk``: the one-time ticket the launcher got."""

    ticket: str = Field(min_length=1, max_length=128)


B = TypeVar("B", bound=Body)


def validate(model: type[B], data: dict[str, Any]) -> B:
    """``data`` as ``model``, or :class:`BodyError` naming the first field that is wrong (its
    value is never repeated)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BodyError(f"{where}: {first['msg']}" if where else str(first["msg"])) from None


async def body(request: web.Request, model: type[B]) -> B:
    """The request's body, read and validated as ``model`` (:class:`BodyError` otherwise)."""
    return validate(model, await read(request))
