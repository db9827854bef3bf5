"""The docs match what exists (issue 26): every config key is in the commented example and every
key the docs or the example name exists; every MQTT topic, command and schema is in
docs/mqtt.md and every one docs/mqtt.md names exists. A renamed key, a new command or a stale
example fails here instead of misleading an operator."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel

from controller.config.models import (
    Config,
    DisplayConfig,
    JournalConfig,
    LimitsConfig,
    LoggingConfig,
    MqttConfig,
    PaytablesConfig,
    ProtectionSettings,
    RulesConfig,
    TableConfig,
)
from controller.messages import COMMAND_KINDS, Payload

REPO = Path(__file__).resolve().parents[1]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
EXAMPLE = REPO / "config" / "table.example.toml"
SECTIONS: dict[str, type[BaseModel]] = {
    "table": TableConfig,
    "rules": RulesConfig,
    "paytables": PaytablesConfig,
    "mqtt": MqttConfig,
    "display": DisplayConfig,
    "journal": JournalConfig,
    "limits": LimitsConfig,
    "protection": ProtectionSettings,
    "logging": LoggingConfig,
}


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _example_keys() -> dict[str, set[str]]:
    """Keys the example sets, or shows commented out (``# key = …``), per section."""
    keys: dict[str, set[str]] = {}
    section = ""
    for line in _text(EXAMPLE).splitlines():
        head = re.match(r"^#?\s*\[([a-z_.]+)\]", line)
        if head:
            section = head.group(1)
            parent, _, child = section.rpartition(".")
            if parent:  # [table.seats] is the table's seats, [mqtt.tls] the mqtt's tls
                keys.setdefault(parent, set()).add(child)
            continue
        key = re.match(r"^#?\s*([a-z_]+)\s*=", line)
        if key and section:
            keys.setdefault(section, set()).add(key.group(1))
    return keys


def test_every_config_key_is_in_the_example_and_every_example_key_exists() -> None:
    example = _example_keys()
    for section, model in SECTIONS.items():
        fields = set(model.model_fields)
        shown = example.get(section, set())
        assert fields - shown == set(), f"[{section}] keys missing from {EXAMPLE.name}"
        assert shown - fields == set(), f"[{section}] keys in {EXAMPLE.name} that do not exist"
    assert set(Config.model_fields) <= set(SECTIONS) | {"devices"}
    # And the example, with its commented keys as it is, is a valid config.
    tomllib.loads(_text(EXAMPLE))


def test_every_config_key_the_docs_name_exists() -> None:
    """A ``[section] key`` a page names is a key of the table's config; on docs/pit.md, of the
    pit's (``pit.config.PitConfig``) or the table's."""
    from pit.config import PitConfig

    pit_sections = {
        name: field.annotation
        for name, field in PitConfig.model_fields.items()
        if isinstance(field.annotation, type)
    }
    named = {
        (m.group(1), m.group(2), path.name == "pit.md")
        for path in DOCS
        for m in re.finditer(r"`\[([a-z_.]+)\] ([a-z_]+)`", _text(path))
    }
    assert len(named) > 10
    for section, key, of_pit in sorted(named):
        top = section.split(".")[0]
        configs: list[dict[str, Any]] = [pit_sections, SECTIONS] if of_pit else [SECTIONS]
        found = [c[top] for c in configs if top in c]
        assert found, f"[{section}] {key}: no such section"
        if "." not in section:
            assert any(key in m.model_fields for m in found), f"the docs name [{section}] {key}"


def _payloads() -> list[type[Payload]]:
    found: list[type[Payload]] = []
    todo: list[type[Payload]] = list(Payload.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in found if c.SCHEMA]


def test_every_topic_schema_and_command_is_in_docs_mqtt_and_every_one_it_names_exists() -> None:
    mqtt = _text(REPO / "docs" / "mqtt.md")
    payloads = _payloads()
    topics = {p.TOPIC for p in payloads} | {"dead", "cmd/", "reply/"}
    for topic in topics:
        assert f"<prefix>{topic}" in mqtt, f"topic <prefix>{topic} is not in docs/mqtt.md"
    named_topics = set(re.findall(r"`<prefix>([a-z_]+/?)", mqtt))
    assert named_topics - topics - {"cmd/", "reply/", "device/"} == set(), (
        "docs/mqtt.md names topics that do not exist"
    )
    schemas = {p.SCHEMA for p in payloads}
    for schema in schemas:
        assert f"`{schema}`" in mqtt or f"{schema}.v" in mqtt, f"{schema} not in docs/mqtt.md"
    named_schemas = set(re.findall(r"`(paigow\.[a-z_]+)`", mqtt))
    assert named_schemas - schemas == set(), "docs/mqtt.md names schemas that do not exist"
    files = {p.name for p in (REPO / "docs" / "schemas").glob("*.json")}
    for name in files:
        if name.startswith("command."):  # one line names them all: `command.<kind>.json`
            assert "command.<kind>.json" in mqtt and name[8:-5] in COMMAND_KINDS, name
        else:
            assert name in mqtt or name.split(".v")[0] in mqtt, f"{name} not in docs/mqtt.md"
    for kind in COMMAND_KINDS:
        assert f"`{kind}`" in mqtt, f"command {kind} is not in docs/mqtt.md"
    named_commands = set(re.findall(r"`<prefix>cmd/([a-z_]+)`", mqtt))
    assert named_commands - set(COMMAND_KINDS) == set()


def test_every_example_message_in_the_docs_validates_and_its_signature_checks() -> None:
    """Issue 39: an outside client checks the docs' examples against the published schemas
    (Ajv, jsonschema) and their signatures against the test vector's key. Every ```json block
    of every page parses (an abbreviated shape is fenced as text); every message among them
    validates against its own schema, and every signed one verifies (docs/mqtt.md §2: the
    examples are signed with the test vector's key). A payload changed in the code and not in
    the docs fails here."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from controller.feed_signature import keyring, public_key_line, verify_envelope

    vector = Ed25519PrivateKey.from_private_bytes(bytes(range(32))).public_key()
    keys = keyring([public_key_line(vector)])
    checked = signed = 0
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in re.findall(r"```json\n(.*?)```", _text(page), re.S):
            example = json.loads(block)  # a block that is not JSON fails: fence it as text
            if not isinstance(example, dict):
                continue
            if "schema" in example:
                name = f"{example['schema']}.v{example.get('version', 1)}.json"
            elif {"ok", "error", "request_id", "data"} <= set(example):
                name = "reply.json"
            else:
                continue
            schema = json.loads(_text(REPO / "docs" / "schemas" / name))
            jsonschema.Draft202012Validator(schema).validate(example)
            checked += 1
            if "schema" in example:  # a feed message: signed, as every message the table sends
                verify_envelope(example, keys, table_id=example["table_id"])
                signed += 1
    assert checked >= 11 and signed >= 7


# --- commands, options and way digests (issue 34) -----------------------------------------------

#: A word of a command line that stands for something, not a value the parser could read.
_PLACEHOLDER = re.compile(r"…|\.\.\.|[\[\]|<>{}]")
_SHELL_END = {";", "|", "||", "&&", ">", ">>", "<", "2>", "2>&1", "&", "#"}


def _parser() -> argparse.ArgumentParser:
    from controller.cli import command_parser

    return command_parser()


_NO_SUCH = "no-such-subcommand"


@functools.cache
def _answer(*words: str) -> tuple[int | str | None, str, str]:
    """The real parser's answer to ``paigow-table WORDS``: its exit code (None if it parsed),
    and what it printed on stdout and stderr (a command is only parsed, never run)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _parser().parse_args(list(words))
        except SystemExit as exc:
            return exc.code, out.getvalue(), err.getvalue()
    return None, out.getvalue(), err.getvalue()


def _subcommands(path: list[str]) -> set[str] | None:
    """The subcommands ``paigow-table PATH`` takes as its next word, as its usage error for
    one it does not know lists them (None: it takes none)."""
    _code, _out, err = _answer(*path, _NO_SUCH)
    listed = re.search(rf"invalid choice: '{_NO_SUCH}' \(choose from ([^)]*)\)", err)
    return None if listed is None else set(re.findall(r"'([^']*)'", listed.group(1)))


def _usage(path: list[str]) -> str:
    """The command ``paigow-table PATH --help`` shows the usage of ("" if none)."""
    _code, out, _err = _answer(*path, "--help")
    found = re.match(r"usage: (.*?)\s+\[-h\]", out, re.S)  # -h: every parser's first option
    return found.group(1) if found else ""


def _options(path: list[str]) -> set[str]:
    """The options of ``paigow-table PATH``, as its --help lists them (``  -j, --journal J``)."""
    _code, out, _err = _answer(*path, "--help")
    invocations = [
        re.split(r"\s{2,}", line.strip())[0] for line in re.findall(r"^  -.*", out, re.M)
    ]
    return {part.split(" ")[0] for inv in invocations for part in inv.split(", ")}


def _words(command: str) -> list[str]:
    """The words after ``paigow-table``, up to anything the shell would take."""
    command = command.split(";")[0]
    try:
        words = shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote in prose
        words = command.split()
    start = next(i for i, w in enumerate(words) if w.endswith("paigow-table"))
    words = words[start + 1 :]
    end = next((i for i, w in enumerate(words) if w in _SHELL_END or w.startswith(">")), None)
    return words[:end]


def _commands() -> list[tuple[str, str, bool]]:
    """Every ``paigow-table …`` the README and docs/ show: (file, command, complete). A line of
    a code block is a complete command; inline code may be a fragment (``audit verify``)."""
    found: list[tuple[str, str, bool]] = []
    for path in DOCS:
        text = _text(path)
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("$ ")
                if re.match(r"(sudo -u \S+ )?(\S*/)?paigow-table ", line):
                    found.append((path.name, line, not _PLACEHOLDER.search(line)))
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for inline in re.findall(r"`((?:\S*/)?paigow-table [^`]+)`", prose):
            found.append((path.name, inline, False))
    # Output that begins with the program's name ("paigow-table 0.1.0: …") is not a command.
    return [
        c for c in found if re.fullmatch(r"--[a-z-]+|[a-z][a-z-]*", (_words(c[1]) or ["-x"])[0])
    ]


def _walk(words: list[str]) -> tuple[list[str], list[str]]:
    """The subcommand words of a command (its subcommands, house-way's verbs), and the rest."""
    path: list[str] = []
    rest = list(words)
    while rest and rest[0] in {"--wheel", "--version"}:
        rest = rest[2:] if rest[0] == "--wheel" else rest[1:]
    while rest and not rest[0].startswith("-") and not _PLACEHOLDER.search(rest[0]):
        word = rest[0]
        subcommands = _subcommands(path)
        if subcommands is not None and word not in subcommands:
            raise LookupError(f"no subcommand {' '.join([*path, word])!r}")
        if subcommands is None and _usage([*path, word]) != f"{_usage(path)} {word}":
            break  # an argument (house-way's cards), not a verb with its own parser
        path.append(rest.pop(0))
    return path, rest


def test_every_command_and_option_the_docs_show_exists() -> None:
    """A renamed subcommand or option fails here instead of misleading an operator."""
    commands = _commands()
    assert len(commands) > 100
    problems = []
    for name, command, _complete in commands:
        try:
            path, rest = _walk(_words(command))
        except LookupError as exc:
            problems.append(f"{name}: {command}: {exc}")
            continue
        known = _options(path)
        assert "--help" in known, f"paigow-table {' '.join(path)} --help lists no options"
        for word in rest:
            option = word.split("=")[0].strip("[]")
            if option.startswith("--") and option not in known:
                problems.append(f"{name}: {command}: paigow-table {' '.join(path)} has no {option}")
    assert problems == [], "\n".join(problems)


def test_every_complete_command_line_in_the_docs_parses() -> None:
    """Each command line of a code block, as a person would paste it, is accepted by the real
    parser (a word in capitals stands for a number where one is expected)."""
    parser = _parser()
    parsed = 0
    for name, command, complete in _commands():
        if not complete:
            continue
        words = _words(command)
        for _ in range(8):
            try:
                with contextlib.redirect_stderr(io.StringIO()) as err:
                    parser.parse_args(words)
                parsed += 1
                break
            except SystemExit as exc:
                if exc.code == 0:  # --help, --version
                    parsed += 1
                    break
                bad = re.search(r"invalid \w+ value: '([A-Z_]+)'", err.getvalue())
                assert bad, f"{name}: {command}: {err.getvalue().splitlines()[-1]}"
                words = [("1" if w == bad.group(1) else w) for w in words]
    assert parsed > 15


def test_the_digest_of_every_way_the_docs_price_is_the_way_file_s() -> None:
    """docs/math.md's table of prices by way, and every line of the docs that gives a way's
    sha256, name the digest the table journals and `house-way check` prints."""
    from controller.game.way import load_way, shipped_ways

    ways = {name: load_way(name) for name in shipped_ways()}
    for extra in (REPO / "tests" / "game" / "ways").glob("*.toml"):
        ways[extra.name] = load_way(extra)
    math = _text(REPO / "docs" / "math.md")
    priced = re.findall(r"^\| `([a-z-]+)` \| `([0-9a-f]+)` \|", math, re.MULTILINE)
    assert {name for name, _ in priced} == set(shipped_ways())
    for name, digest in priced:
        assert digest == ways[name].digest, f"docs/math.md prices {name} as sha256 {digest}"
    checked = 0
    for path in DOCS:
        for line in re.split(r"\n\s*\n", _text(path)):  # a paragraph
            if not re.search(r"sha-?256", line, re.IGNORECASE):
                continue
            named = [w for n, w in ways.items() if re.search(rf"`{re.escape(n)}`|{n}\b", line)]
            for digest in re.findall(r"\b[0-9a-f]{12,64}\b", line):
                if named and not digest.isdigit():
                    assert any(w.digest.startswith(digest) for w in named), (
                        f"{path.name}: {digest} is not the digest of {[w.name for w in named]}"
                    )
                    checked += 1
    assert checked >= 3


#: A measured rate or duration ("490 messages/s", "about 10 s", "80 s").
_MEASURED = re.compile(
    r"\b\d[\d,.]* ?(?:messages|msg|rounds|hands|settings)/s\b|\b(?:about|takes|took) \d[\d.]* s\b"
)
#: What reproduces a figure: a command a person can run.
_REPRODUCED = re.compile(
    r"`(?:\S*/)?(?:paigow-table|pytest|python|make|time) |`tests/\S+\.py|bench/"
)


def test_every_measured_figure_says_how_to_measure_it() -> None:
    """A rate or a duration in the README or the guides a newcomer reads carries, in its
    paragraph (or table row), the command that measures it (issue 34)."""
    problems = []
    for name in ("README.md", "docs/mqtt.md", "docs/house-way.md", "docs/operations.md"):
        text = re.sub(r"```.*?```", "", _text(REPO / name), flags=re.S)
        for paragraph in re.split(r"\n\s*\n|\n(?=\|)", text):
            figure = _MEASURED.search(paragraph)
            if figure and not _REPRODUCED.search(paragraph):
                problems.append(f"{name}: {figure.group(0)!r} in: {paragraph[:120]!r}")
    assert problems == [], "\n".join(problems)


def test_the_pit_example_says_to_check_it_with_pit_check_config() -> None:
    """Issue 39: its header said to check it with ``pit migrate`` (which connects)."""
    header = [
        line
        for line in _text(REPO / "config" / "pit.example.toml").splitlines()[:4]
        if line.startswith("#")
    ]
    assert any("paigow-table pit check-config" in line for line in header), header
