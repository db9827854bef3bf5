"""The benchmarks still run (issue 41: bench/pit.py read the Store's old methods after its split,
and a swallowed AttributeError left its ingest rate unmeasured): the in-process figures of
bench/pit.py and bench/mqtt_read.py on a few messages, each printing its last line of JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _figures(*args: str) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    figures: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return figures


def test_the_pits_in_process_figures() -> None:
    ingest = _figures("bench/pit.py", "--ingest-cost", "300", "--batch", "50",
                      "--database", "sqlite")  # fmt: skip
    assert ingest["stored"] == 300 and float(str(ingest["pit_cpu_ms_per_message"])) > 0
    verify = _figures("bench/pit.py", "--verify-cost", "200")
    assert verify


def test_the_mqtt_reading_figures() -> None:
    read = _figures("bench/mqtt_read.py", "--messages", "400", "--repeat", "1")
    assert float(str(read["mqtt5_pit_ms_per_message"])) > 0
    assert "ratio_mqtt311_pit" in read


def test_the_pooled_protection_figures() -> None:
    """bench/pooled.py's four parts on a few rounds (issue 44): each prints its figures."""
    figures = _figures(
        "bench/pooled.py", "--parts", "detect,fair,attribution,cpu", "--devices", "one_riffle",
        "--pools", "1,5", "--trials", "2", "--fair-rounds", "2000", "--attribution-trials", "1",
        "--cpu-rounds", "100", "--workers", "1",
    )  # fmt: skip
    assert "targets" in figures
    text = json.dumps(figures)
    for part in ("one_riffle", "false_alarms", "attribution", "ms_per_round"):
        assert part in text, part


def test_the_latency_figures() -> None:
    """bench/latency.py on three rounds (issue 42): a real daemon, its broker, and the casino
    system and the dealer page each observing from a process of its own; every round arrives
    at both, the floor is sampled after each, and the daemon stops cleanly."""
    figures = _figures("bench/latency.py", "--rounds", "3", "--warmup", "1")
    assert figures["rounds"] == 3 and figures["missing"] == 0 and figures["daemon_exit"] == 0
    for key in ("mqtt_p50_ms", "display_p50_ms", "floor_p50_ms", "rtt_p50_ms"):
        assert float(str(figures[key])) > 0, key


def test_the_footprint_figures_without_the_web_display() -> None:
    """bench/footprint.py --with-services --no-web-display (issue 42: what the web display
    costs is the difference): the daemon publishes to its broker with the display switched off,
    every message acknowledged; the flag alone is refused."""
    figures = _figures("bench/footprint.py", "--with-services", "--no-web-display",
                       "--runs", "1", "--rounds", "3")  # fmt: skip
    assert figures["services"] is True and figures["web_display"] is False
    assert figures["outbox_pending"] == 0 and float(str(figures["rss_mb_max"])) > 0
    alone = subprocess.run(
        [sys.executable, "bench/footprint.py", "--no-web-display"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert alone.returncode == 2 and "--with-services" in alone.stderr
