"""What signing the feed costs per message (docs/performance.md §8): the table's side as it
publishes (``wire_payload``: the stored envelope parsed, ``replayed`` set, canonical JSON, the
Ed25519 signature) and the pit's side as it ingests (``verify_envelope``: parse, canonical JSON,
key lookup, verification), for the messages the feed carries most, built by the table's own
recorder path from a settled round of the demo's shuffler.

    python bench/signing.py [--n 2000]

Prints one JSON object: per message kind, its size and, for each step, the wall-clock median
and p99 and the mean CPU time a call, in µs.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # before bench/pit.py

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.feed_signature import FeedSigner, keyring, verify_envelope
from controller.journal import OutboxRow
from controller.mqtt.wire import wire_payload
from simulators.feed import SimTable


def _rows() -> dict[str, OutboxRow]:
    """One stored envelope of each kind, as the outbox holds it (compact JSON, key order kept)."""
    table = SimTable("PG-01", seed=1)
    by_schema: dict[str, dict[str, Any]] = {}
    for _ in range(200):
        for _topic, envelope in table.next_round(datetime.now(UTC)):
            by_schema.setdefault(envelope["schema"], envelope)
    rows = {}
    for schema, envelope in by_schema.items():
        data = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()
        rows[schema] = OutboxRow(
            envelope["msg_id"], envelope["seq"], "PG-01", "t", data, 1, False, "", 0, False, None
        )
    return rows


def _timed(n: int, step: Callable[[], object]) -> dict[str, float]:
    """Wall-clock median and p99 of ``n`` calls, and the mean CPU time of this thread per call
    (what the step costs on a busy machine, without the time it waited for a core)."""
    for _ in range(50):
        step()
    times = []
    cpu = time.thread_time_ns()
    for _ in range(n):
        start = time.perf_counter_ns()
        step()
        times.append((time.perf_counter_ns() - start) / 1000)
    cpu_us = (time.thread_time_ns() - cpu) / 1000 / n
    times.sort()
    return {
        "median_us": round(statistics.median(times), 1),
        "p99_us": round(times[n * 99 // 100], 1),
        "cpu_mean_us": round(cpu_us, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="messages per measurement")
    args = parser.parse_args()
    signer = FeedSigner(Ed25519PrivateKey.generate())
    keys = keyring([signer.public_key])
    out: dict[str, Any] = {}
    for schema, row in _rows().items():
        signed = wire_payload(row, signer)
        out[schema] = {
            "bytes": len(row.payload),
            "signed_bytes": len(signed),
            "sign": _timed(args.n, functools.partial(wire_payload, row, signer)),
            "verify": _timed(args.n, functools.partial(verify_envelope, signed, keys)),
            "ed25519_only": _timed(args.n, functools.partial(signer.signature, row.payload)),
        }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
