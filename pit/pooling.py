"""Game protection pooled across the floor (issue 44; docs/protection.md, "Pooled across the
floor"). Pure: no I/O, no clock; the pit's worker (``pit.floorwatch``) feeds it the stored
rounds and keeps its state.

A table's own watch sees only its own rounds. A model's weakness (a firmware's riffle count, a
batch of RNG boxes) is on every table that runs it, so the floor runs the **same tests**
(``controller.protection``, not a copy) over pools:

- by **model and firmware** of the device of each role: the shuffler or shoe (``cards``: the
  deal's tests) and the RNG box or dice reader (``position``: the draw's tests);
- by **serial**, for a device seen on more than one table (a swap moved it): its evidence
  follows it from table to table.

Each pool is one ``Watch`` whose CUSUMs take the rounds of all its tables. Tests of consecutive
deals (a repeat, riffles of the previous order) compare each deal with **its own table's**
earlier deals only (a ``DealHistory`` a table): the pool adds each table's log-likelihood
ratios, it never mixes their deals. Under fair devices every round's ratio still has mean 1
given everything before it, on any table, so Ville's bound holds for the pooled CUSUM as for a
table's.

The false-alarm budget is the **floor's** (``FloorBudget``): F false alarms a year over every
table's own watch and every pool together, a share to each.
"""

from __future__ import annotations

import base64
import math
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote, unquote

from controller.protection.cusum import SumBank
from controller.protection.exact import DECK_CARDS, PACKET_SIZE, PACKETS
from controller.protection.observation import DRAW_METHODS, DealObservation
from controller.protection.watch import (
    ALL_CHECKS,
    DealHistory,
    Finding,
    ProtectionConfig,
    TestState,
    Watch,
)

Role = Literal["cards", "position"]
Kind = Literal["model", "serial"]
KINDS: tuple[Kind, ...] = ("model", "serial")
ROLES: tuple[Role, ...] = ("cards", "position")
#: The tests of each role's pool: the draw's tests read only the draw; the rest read the cards.
ROLE_CHECKS = {
    "cards": tuple(c for c in ALL_CHECKS if c().reads_deal),
    "position": tuple(c for c in ALL_CHECKS if not c().reads_deal),
}
#: A device's own draws (a software draw or a manual dice entry is not the device's).
DEVICE_DRAWS = {"rng", "dice"}
#: Odds the evidence must give before the floor names one table rather than the model, or the
#: model rather than one table: 20 to 1 (3.0 nats).
ATTRIBUTION_NATS = math.log(20.0)
STATE_VERSION = 1
#: The fewest of a model-mate's latest rounds a finding's attribution weighs (see ``Pool.shares``).
MATES_ROUNDS = 10


@dataclass(frozen=True, slots=True)
class FloorBudget:
    """The floor's false alarms a year, shared between the tables' own watches and the pools.

    ``tables`` × ``rounds_per_table_year`` rounds a year; the tables' own watches together get
    (1 − ``pooled_share``) of F, so each table's ``false_alarms_per_year`` should be
    ``table_false_alarms_per_year``; the pools get ``pooled_share`` of F, split equally between
    the kinds of pool (model, serial). A table's round goes into at most one pool of each kind
    and role, and a role's pool runs only that role's tests at the whole watch's share, so a kind's
    pools together see at most ``tables`` × ``rounds_per_table_year`` rounds a year and
    false-alarm at most its share of F whatever the pools' sizes (docs/protection.md)."""

    false_alarms_per_year: float = 0.1
    pooled_share: float = 0.5
    tables: int = 1
    rounds_per_table_year: int = 300_000

    def __post_init__(self) -> None:
        f, s = self.false_alarms_per_year, self.pooled_share
        if not (isinstance(f, (int, float)) and math.isfinite(f) and f > 0):
            raise ValueError(f"false_alarms_per_year must be a positive number, got {f!r}")
        if not (isinstance(s, (int, float)) and 0 < s < 1):
            raise ValueError(f"pooled_share must be between 0 and 1 (exclusive), got {s!r}")
        if isinstance(self.tables, bool) or not isinstance(self.tables, int) or self.tables < 1:
            raise ValueError(f"tables must be a whole number ≥ 1, got {self.tables!r}")

    @property
    def table_false_alarms_per_year(self) -> float:
        return self.false_alarms_per_year * (1 - self.pooled_share) / self.tables

    def table_config(self) -> ProtectionConfig:
        """What each table's own ``[protection]`` should be to keep the floor's budget."""
        return ProtectionConfig(
            false_alarms_per_year=self.table_false_alarms_per_year,
            rounds_per_year=self.rounds_per_table_year,
        )

    def pool_config(self) -> ProtectionConfig:
        """Every pool's: its share of F over the floor's N·R rounds a year, written as the
        same rate a round over R rounds (F·s / kinds / N a year), so a floor of any size fits
        ``ProtectionConfig``'s bounds."""
        return ProtectionConfig(
            false_alarms_per_year=(
                self.false_alarms_per_year * self.pooled_share / len(KINDS) / self.tables
            ),
            rounds_per_year=self.rounds_per_table_year,
        )

    def with_tables(self, tables: int) -> FloorBudget:
        return FloorBudget(
            self.false_alarms_per_year, self.pooled_share, max(1, tables),
            self.rounds_per_table_year,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        pool = self.pool_config()
        return {
            "false_alarms_per_year": self.false_alarms_per_year,
            "pooled_share": self.pooled_share,
            "tables": self.tables,
            "rounds_per_table_year": self.rounds_per_table_year,
            "table_false_alarms_per_year": self.table_false_alarms_per_year,
            "pool_false_alarms_per_year_per_kind": (
                self.false_alarms_per_year * self.pooled_share / len(KINDS)
            ),
            "pool_rounds_per_year": self.tables * self.rounds_per_table_year,
            "pool_false_alarm_rate": pool.false_alarm_rate,
        }


@dataclass(frozen=True, slots=True)
class PoolKey:
    """A pool: by ``model`` (make, model, firmware) or by ``serial`` (one device), of a role."""

    kind: Kind
    role: Role
    make: str
    model: str
    firmware: str
    serial: str = ""

    @property
    def id(self) -> str:
        """``kind:role:make|model|firmware[|serial]``, each part percent-encoded (a table names
        its devices in printable ASCII, ``|`` and ``:`` included: a name must not split)."""
        parts: tuple[str, ...] = (self.make, self.model, self.firmware)
        parts += (self.serial,) if self.kind == "serial" else ()
        return f"{self.kind}:{self.role}:" + "|".join(quote(p, safe=" ") for p in parts)

    @property
    def label(self) -> str:
        what = "shuffler/shoe" if self.role == "cards" else "RNG box/dice reader"
        name = " ".join(p for p in (self.make, self.model) if p) or "unnamed model"
        text = f"{what} {name}" + (f", firmware {self.firmware}" if self.firmware else "")
        return text + (f", serial {self.serial}" if self.kind == "serial" else "")

    @classmethod
    def from_id(cls, text: str) -> PoolKey:
        kind, role, rest = [*text.split(":", 2), "", ""][:3]
        parts = [unquote(p) for p in rest.split("|")]
        if kind not in KINDS or role not in ROLES or len(parts) != (4 if kind == "serial" else 3):
            raise ValueError(f"not a pool id: {text!r}")
        return cls(kind, role, *parts)


@dataclass(frozen=True, slots=True)
class Share:
    """One table's part of a pooled finding's evidence: its log-likelihood ratio for the
    finding's alternative over the finding's window, and its rounds in it."""

    table: str
    llr: float
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "llr": _finite(self.llr), "rounds": self.rounds}


@dataclass(frozen=True, slots=True)
class Attribution:
    """Whose weakness a pooled finding is. ``verdict``: ``table`` (one table's device: the rest
    of the pool's evidence says its model-mates are fair, by at least ``ATTRIBUTION_NATS``),
    ``model`` (the others' evidence says they share it, by as much), ``device`` (a serial
    pool: one device, wherever it was), or ``undecided`` (neither yet: ``table`` leads; the
    pit weighs it again as the model-mates' rounds come in)."""

    verdict: Literal["table", "model", "device", "undecided"]
    table: str | None
    others_llr: float
    shares: tuple[Share, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "table": self.table,
            "others_llr": _finite(self.others_llr),
            "shares": [s.to_dict() for s in self.shares],
        }


def _finite(x: float) -> float:
    """For JSON: a ratio of zero (an outcome the alternative rules out) is −∞ nats; shown as
    −10⁹ (and a value that is no number, which the sums never make, as 0)."""
    if math.isnan(x):
        return 0.0
    return round(max(-1e9, min(1e9, x)), 3)


def _nats(x: float) -> str:
    return f"{x:.1f} nats" if math.isfinite(x) else "their deals rule that fault out"


def decide(kind: Kind, shares: list[Share], members: int = 1) -> Attribution:
    """The heterogeneity test between a pool and its members (see ``Attribution``): the leading
    table's ratio against the rest's summed ratio for the same alternative — the log of how much
    likelier the others' rounds are if they share the fault than if they are fair."""
    shares = sorted(shares, key=lambda s: -s.llr)
    if not shares:
        return Attribution("undecided", None, 0.0, ())
    lead = shares[0]
    others = sum(s.llr for s in shares[1:])
    if kind == "serial":
        verdict: Literal["table", "model", "device", "undecided"] = "device"
    elif (len(shares) == 1 and members == 1) or (len(shares) > 1 and others <= -ATTRIBUTION_NATS):
        verdict = "table"
    elif others >= ATTRIBUTION_NATS:
        verdict = "model"
    else:
        verdict = "undecided"
    return Attribution(verdict, lead.table, others, tuple(shares))


@dataclass(frozen=True, slots=True)
class PooledFinding:
    """A pool's test newly past its threshold, with whose it is and what to do."""

    pool: PoolKey
    finding: Finding
    attribution: Attribution
    tables: tuple[str, ...]

    @property
    def advice(self) -> str:
        a, f = self.attribution, self.finding
        shares = ", ".join(
            f"{s.table} {s.llr:.1f} nats in {s.rounds} rounds" for s in a.shares if s.llr > 0
        )
        if a.verdict == "table":
            return (
                f"table {a.table}'s {self.pool.label} alone: its model-mates' evidence says they "
                f"are fair ({_nats(a.others_llr)}). Take that device out of play and send it "
                f"for testing ({f.advice})"
            )
        if a.verdict == "device":
            return (
                f"the {self.pool.label}, on {', '.join(self.tables)}: take it out of play and "
                f"send it for testing ({f.advice}). Evidence: {shares}"
            )
        if a.verdict == "model":
            what = "; ".join(
                f"{k} {v}" for k, v in (("test", f.test), ("alternative", f.alternative),
                                        ("evidence", f.evidence), ("rounds", f.rounds)) if v
            )  # fmt: skip
            return (
                f"the model: every {self.pool.label} may share it. Pull the tables with the "
                f"largest shares first ({shares}); send the maker the finding ({what}). "
                f"{f.advice}"
            )
        return (
            f"table {a.table} carries most of the evidence; check its device first. The others' "
            f"evidence ({_nats(a.others_llr)}) does not yet tell the model from that table "
            f"({shares})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool.id,
            "label": self.pool.label,
            "kind": self.pool.kind,
            "role": self.pool.role,
            "finding": self.finding.to_dict(),
            "cusum": self.finding.cusum,
            "attribution": self.attribution.to_dict(),
            "tables": list(self.tables),
            "advice": self.advice,
        }


def _pack(obs: DealObservation, role: Role) -> str:
    """A ring entry's observation, compact (a cards pool keeps the deal; a position pool the
    draw alone)."""
    draw = bytes([
        DRAW_METHODS.index(obs.draw_method) + 1 if obs.draw_method else 0,
        obs.number or 0,
        *(obs.dice or (0, 0, 0)),
    ])  # fmt: skip
    deal = bytes([*obs.dealt, *obs.stub, *obs.positions]) if role == "cards" else b""
    return base64.b64encode(draw + deal).decode()


_FAIR_PACKETS = tuple(tuple(range(k * PACKET_SIZE, (k + 1) * PACKET_SIZE)) for k in range(PACKETS))


def _unpack(text: str, role: Role, round_id: str = "") -> DealObservation:
    raw = base64.b64decode(text)
    method = DRAW_METHODS[raw[0] - 1] if raw[0] else None
    dice = (raw[2], raw[3], raw[4]) if raw[2] else None
    if role == "cards":
        deal = raw[5:]
        packets = tuple(
            tuple(deal[k * PACKET_SIZE : (k + 1) * PACKET_SIZE]) for k in range(PACKETS)
        )
        stub, positions = tuple(deal[49:53]), tuple(deal[53:60])
    else:  # the draw's tests read only the draw: any whole deck will do
        packets, stub, positions = _FAIR_PACKETS, tuple(range(49, DECK_CARDS)), tuple(range(1, 8))
    return DealObservation(
        round_id,
        packets,
        stub,
        positions,
        method,
        raw[1] or None,
        dice,
    )


class Pool:
    """One pool's watch (its role's tests at the floor's pooled thresholds), each member
    table's earlier deals, and its last ``keep`` rounds for attributing a finding."""

    def __init__(self, key: PoolKey, config: ProtectionConfig, keep: int) -> None:
        self.key = key
        self.watch = Watch(config, checks=ROLE_CHECKS[key.role], shares=len(ALL_CHECKS))
        self.members: dict[str, DealHistory] = {}
        self.rounds_by: Counter[str] = Counter()
        self.ring: deque[tuple[str, str, datetime]] = deque(maxlen=keep)

    def observe(self, table: str, obs: DealObservation, now: datetime) -> list[PooledFinding]:
        history = self.members.get(table)
        if history is None:
            history = self.members[table] = DealHistory(self.watch.config.recent_deals)
        findings = self.watch.observe(obs, now, history)
        self.rounds_by[table] += 1
        self.ring.append((table, _pack(obs, self.key.role), now))
        return [
            PooledFinding(self.key, f, self.attribute(f), tuple(sorted(self.members)))
            for f in findings
        ]

    def shares(self, test: str, cusum: int, since: datetime) -> list[Share]:
        """Each member's log-likelihood ratio for ``f``'s CUSUM: its rounds in the ring replayed
        through the test's own code, the CUSUM summed unclamped (``SumBank``), over ``f``'s
        window; a model-mate with fewer rounds in the window than the table with the most
        evidence is weighed over as many of its latest rounds (at least ``MATES_ROUNDS``), so a
        finding raised within one table's few rounds still hears whether the others share it.
        The rounds before those only give the earlier deals. Each round's increment is taken
        alone (``SumBank.take``), so a round the alternative rules out (−∞) counts only in the
        windows that hold it."""
        kind = type(self.watch.check(test))
        by_table: dict[str, list[tuple[str, datetime]]] = {}
        for table, packed, at in self.ring:
            by_table.setdefault(table, []).append((packed, at))
        #: each member's increments a round (the rounds the test counted), with their time
        rounds: dict[str, list[tuple[datetime, float]]] = {}
        for table, entries in by_table.items():
            replay = Watch(self.watch.config, checks=[kind], shares=len(ALL_CHECKS))
            check = replay.check(test)
            bank = check.bank = SumBank(check.bank.base)
            mine: list[tuple[datetime, float]] = []
            for packed, at in entries:
                seen = check.rounds
                replay.observe(_unpack(packed, self.key.role), at)
                if check.rounds > seen:
                    mine.append((at, bank.take(cusum, check.rounds)))
            rounds[table] = mine

        def over(mine: list[tuple[datetime, float]], n: int) -> float:
            return math.fsum(x for _, x in mine[len(mine) - n :]) if n else 0.0

        window = {t: sum(1 for at, _ in mine if at >= since) for t, mine in rounds.items()}
        out = [Share(t, over(m, window[t]), window[t]) for t, m in rounds.items() if window[t]]
        if not out:
            return []
        lead = max(out, key=lambda s: s.llr)
        need = max(MATES_ROUNDS, lead.rounds)
        for t, mine in rounds.items():
            if t != lead.table and window[t] < need and mine:
                n = min(need, len(mine))
                out = [s for s in out if s.table != t] + [Share(t, over(mine, n), n)]
        return out

    def attribute(self, f: Finding) -> Attribution:
        shares = self.shares(f.test, f.cusum, f.since or f.at)
        return decide(self.key.kind, shares, len(self.members))

    def to_state(self) -> dict[str, Any]:
        return {
            "key": self.key.id,
            "watch": self.watch.to_state(),
            "members": {
                t: [[list(d), sorted(s)] for d, s in h.recent] for t, h in self.members.items()
            },
            "rounds_by": dict(self.rounds_by),
            "ring": [[t, packed, at.isoformat()] for t, packed, at in self.ring],
        }

    @classmethod
    def from_state(cls, data: dict[str, Any], config: ProtectionConfig, keep: int) -> Pool:
        pool = cls(PoolKey.from_id(data["key"]), config, keep)
        pool.watch = Watch.from_state(
            data["watch"], config, checks=ROLE_CHECKS[pool.key.role], shares=len(ALL_CHECKS)
        )
        for table, recent in data.get("members", {}).items():
            history = pool.members[table] = DealHistory(config.recent_deals)
            for dealt, stub in recent:
                history.recent.append((tuple(dealt), frozenset(stub)))
        pool.rounds_by.update({str(t): int(n) for t, n in data.get("rounds_by", {}).items()})
        for table, packed, at in data.get("ring", []):
            pool.ring.append((str(table), str(packed), datetime.fromisoformat(at)))
        return pool


@dataclass(slots=True)
class _Device:
    """A table's current device of a role."""

    make: str
    model: str
    firmware: str
    serial: str


@dataclass
class FloorWatch:
    """Every pool of the floor. ``identify`` each table's devices as they are known (the device
    history), ``observe`` each stored settled round; findings come back as ``PooledFinding``s."""

    budget: FloorBudget = field(default_factory=FloorBudget)
    keep_cards: int = 4_000
    keep_position: int = 20_000
    pools: dict[str, Pool] = field(default_factory=dict)
    devices: dict[tuple[str, Role], _Device] = field(default_factory=dict)
    #: serial → the tables it has been seen on (a serial pool once there are two)
    seen_on: dict[tuple[Role, str], set[str]] = field(default_factory=dict)

    def identify(
        self, table: str, role: str, make: str | None, model: str | None,
        firmware: str | None, serial: str | None,
    ) -> None:  # fmt: skip
        """The table's device of ``role`` is now this one (a swap replaces the one before)."""
        if role not in ROLES:
            return
        r: Role = role
        self.devices[(table, r)] = _Device(make or "", model or "", firmware or "", serial or "")
        if serial:
            self.seen_on.setdefault((r, serial), set()).add(table)

    def keys_for(self, table: str, role: Role) -> list[PoolKey]:
        d = self.devices.get((table, role))
        if d is None or not d.model:
            return []  # a device the table has not named cannot be pooled by model
        keys = [PoolKey("model", role, d.make, d.model, d.firmware)]
        if d.serial and len(self.seen_on.get((role, d.serial), ())) > 1:
            keys.append(PoolKey("serial", role, d.make, d.model, d.firmware, d.serial))
        return keys

    def observe(self, table: str, obs: DealObservation, now: datetime) -> list[PooledFinding]:
        out: list[PooledFinding] = []
        for role in ROLES:
            if role == "position" and obs.draw_method not in DEVICE_DRAWS:
                continue
            for key in self.keys_for(table, role):
                pool = self.pools.get(key.id)
                if pool is None:
                    pool = self.pools[key.id] = self._pool(key)
                out += pool.observe(table, obs, now)
        return out

    def remember(self, table: str, obs: DealObservation) -> None:
        """A deal the table dealt before its pools saw it (a floor that runs already): its cards
        pools compare the table's next deal with it; no test counts it."""
        for key in self.keys_for(table, "cards"):
            pool = self.pools.get(key.id)
            if pool is None:
                pool = self.pools[key.id] = self._pool(key)
            history = pool.members.get(table)
            if history is None:
                history = pool.members[table] = DealHistory(pool.watch.config.recent_deals)
            history.push(obs)

    def _pool(self, key: PoolKey) -> Pool:
        keep = self.keep_cards if key.role == "cards" else self.keep_position
        return Pool(key, self.budget.pool_config(), keep)

    def reattribute(
        self, pool_id: str, test: str, cusum: int, since: datetime
    ) -> Attribution | None:
        """An open finding weighed again with the rounds its pool has now (more of its
        model-mates' rounds may tell the model from one table); None for a pool not here."""
        pool = self.pools.get(pool_id)
        if pool is None or test not in pool.watch.names:
            return None
        return decide(pool.key.kind, pool.shares(test, cusum, since), len(pool.members))

    def reset(self, pool_id: str, test: str | None, now: datetime) -> None:
        """A supervisor acknowledged a pooled finding: that test of that pool starts afresh."""
        pool = self.pools.get(pool_id)
        if pool is not None and (test is None or test in pool.watch.names):
            pool.watch.reset(test, now)

    def view(self) -> list[dict[str, Any]]:
        """The floor protection view: each pool, its tables and rounds, its tests' evidence
        against their thresholds (highest first)."""
        out = []
        for pool in sorted(self.pools.values(), key=lambda p: p.key.id):
            states = sorted(pool.watch.states(), key=lambda s: -s.statistic / s.threshold)
            out.append({
                "pool": pool.key.id,
                "label": pool.key.label,
                "kind": pool.key.kind,
                "role": pool.key.role,
                "rounds": pool.watch.rounds,
                "tables": [
                    {"table": t, "rounds": n} for t, n in pool.rounds_by.most_common()
                ],
                "tests": [_test_view(s) for s in states],
            })  # fmt: skip
        return out

    def to_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "pools": [p.to_state() for p in self.pools.values()],
            "seen_on": [[role, serial, sorted(t)] for (role, serial), t in self.seen_on.items()],
        }

    def load(self, state: dict[str, Any]) -> None:
        """Carry on from ``to_state`` (thresholds from this floor's budget); ValueError says what
        does not fit."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"floor protection state: not a version {STATE_VERSION} state")
        config = self.budget.pool_config()
        for data in state.get("pools", []):
            key = PoolKey.from_id(data["key"])
            keep = self.keep_cards if key.role == "cards" else self.keep_position
            self.pools[key.id] = Pool.from_state(data, config, keep)
        for role, serial, tables in state.get("seen_on", []):
            self.seen_on[(role, serial)] = set(tables)


def _test_view(s: TestState) -> dict[str, Any]:
    return {
        "name": s.name,
        "title": s.title,
        "statistic": round(s.statistic, 3),
        "threshold": round(s.threshold, 3),
        "rounds": s.rounds,
        "worst": s.worst,
        "alarmed_since": None if s.alarmed_since is None else s.alarmed_since.isoformat(),
        "evidence": s.evidence,
    }
