"""Start-to-ready time and steady resident memory of the daemon (goals 1.5 s and 60 MB, issue 42;
80 MB was issue 8's).

Runs `paigow-table run --config …` as a real process with simulated devices on ptys and a real
Unix datagram socket as $NOTIFY_SOCKET: the time from spawn to READY=1, then the resident
memory (VmRSS, /proc) after dealing rounds, sampled over the steady part. The same-run baseline
is a bare `python -c pass` (start time) and a bare interpreter's VmRSS. The last line is one JSON
object. Run: `.venv/bin/python bench/footprint.py [--runs 5] [--rounds 200] [--with-services
[--no-web-display]] [--installed] [--smaps]`.

With ``--installed`` the daemon is the installed package's, started as its unit starts it
(``/opt/paigow-table/.venv/bin/paigow-table run``: Debian's Python, isolated, the package's own
dependencies and bytecode, no test tools in its environment), and the bare interpreter is that
venv's; run it as root after ``dpkg -i dist/paigow-table_*.deb`` (``make package``), and purge
the package afterwards if the suite is to run on this machine (tests/packaging installs its own).

Without ``--with-services`` the daemon runs its devices only (``[display] enabled = false``:
the display is on by default, on port 8080). With it, the config gains ``[mqtt]`` to a
Mosquitto this benchmark starts on a free port and ``[display]`` on a free port, as a table runs
on the floor; the outbox must then be empty after the rounds (every message acknowledged).
``--no-web-display`` keeps MQTT and its signed feed and switches the web display off: the
table whose results show on a serial pole display, and what the web display costs (the
difference with ``--with-services`` alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from common import broker_process, display_section, mqtt_section

from controller.journal import Journal
from controller.logging import configure_logging
from simulators.demo import DEMO_CONFIG
from simulators.mosquitto import free_port
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from simulators.tables import FAST_LIMITS as BENCH_LIMITS

MB = 1024 * 1024
#: The installed package (packaging/build-package): its command and its interpreter.
INSTALLED = Path("/opt/paigow-table/.venv/bin")


@dataclass(frozen=True)
class Under:
    """What is measured: the daemon's command, and the bare interpreter it is divided by (the
    one that runs the daemon)."""

    daemon: tuple[str, ...]
    bare: tuple[str, ...]


#: This checkout's daemon, in the running venv.
CHECKOUT = Under((sys.executable, "-m", "controller.cli"), (sys.executable,))
#: The installed package's, as its unit starts it (``--installed``).
PACKAGE = Under((str(INSTALLED / "paigow-table"),), (str(INSTALLED / "python3"), "-I"))


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def mappings(pid: int) -> list[tuple[str, int]]:
    """Resident bytes by what is mapped (a shared library, the heap, anonymous memory), from
    /proc/PID/smaps, largest first: where the resident size goes."""
    out: dict[str, int] = {}
    name = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else "[anonymous]"
        elif line.startswith("Rss:"):
            out[name] = out.get(name, 0) + int(head[1]) * 1024
    return sorted(out.items(), key=lambda kv: -kv[1])


def write_config(tmp: Path, extra: str = "") -> Path:
    text = DEMO_CONFIG.format(
        table="PG-BENCH",
        shuffler=tmp / "shuffler",
        rng=tmp / "rng",
        journal=tmp / "journal.sqlite3",
    )
    text += extra + BENCH_LIMITS
    path = tmp / "table.toml"
    path.write_text(text)
    return path


def start_to_ready(config: Path, tmp: Path, under: Under) -> tuple[float, subprocess.Popen[bytes]]:
    sock_path = tmp / f"notify-{time.monotonic_ns()}.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(sock_path))
    server.settimeout(30)
    env = {**os.environ, "NOTIFY_SOCKET": str(sock_path)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*under.daemon, "run", "--config", str(config)],
        env=env,
        cwd=tmp,  # not this checkout: `-m` would put its sources first on the path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while b"READY=1" not in server.recv(4096):
            pass
        return time.perf_counter() - start, proc
    finally:
        server.close()


def bare_python(under: Under) -> tuple[float, int]:
    start = time.perf_counter()
    subprocess.run([*under.bare, "-c", "pass"], check=True)
    elapsed = time.perf_counter() - start
    proc = subprocess.Popen([*under.bare, "-c", "import time; time.sleep(5)"])
    time.sleep(0.3)
    rss = rss_bytes(proc.pid)
    proc.kill()
    proc.wait()
    return elapsed, rss


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


async def steady_memory(
    config: Path, tmp: Path, under: Under, rounds: int, drain: bool = False, smaps: bool = False
) -> tuple[float, list[int], int]:
    shuffler = ShufflerSimulator(PtyPort(tmp / "shuffler"), seed=1)
    rng = RngSimulator(PtyPort(tmp / "rng"), seed=1)
    async with shuffler, rng:
        view = Journal.open(tmp / "journal.sqlite3", "PG-BENCH")
        events_before = view.history.stats().events
        ready, proc = await asyncio.to_thread(start_to_ready, config, tmp, under)
        samples: list[int] = []
        try:
            deadline = time.monotonic() + 20
            # Both devices online (two new events) before the first deal.
            while view.history.stats().events < events_before + 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            settled = view.history.stats().by_status.get("settled", 0)
            for n in range(1, rounds + 1):
                await rng.press()
                await shuffler.deal()
                while view.history.stats().rounds < settled + n:
                    await asyncio.sleep(0.01)
                if n > rounds // 4:  # the steady part: imports done, caches warm
                    samples.append(rss_bytes(proc.pid))
                if n % 50 == 0:
                    rss = rss_bytes(proc.pid) / MB
                    print(f"  {n}/{rounds} rounds, RSS {rss:.1f} MB", flush=True)
            deadline = time.monotonic() + 10
            while drain and view.history.stats().outbox_pending and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # the publisher acknowledges the last round's messages
            if smaps:
                print("resident by mapping (top 25):")
                for what, size in mappings(proc.pid)[:25]:
                    print(f"  {size / MB:7.2f} MB  {what}")
        finally:
            stop(proc)
        pending = view.history.stats().outbox_pending
        view.close()
        return ready, samples, pending


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="start-to-ready measurements")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument(
        "--with-services",
        action="store_true",
        help="MQTT to a broker started here and the display on a free port",
    )
    parser.add_argument(
        "--no-web-display",
        action="store_true",
        help="with --with-services: MQTT and its signed feed, the web display switched off (a "
        "table whose results show on a pole display); what the web display costs is the "
        "difference",
    )
    parser.add_argument(
        "--smaps", action="store_true", help="after the rounds, the resident size by mapping"
    )
    parser.add_argument(
        "--installed",
        action="store_true",
        help=f"the installed package's daemon ({INSTALLED}/paigow-table), as its unit runs it",
    )
    args = parser.parse_args()
    if args.no_web_display and not args.with_services:
        parser.error("--no-web-display goes with --with-services (without it there is none)")
    under = PACKAGE if args.installed else CHECKOUT
    if args.installed and not Path(PACKAGE.daemon[0]).exists():
        parser.error(f"no {PACKAGE.daemon[0]}: make package, then dpkg -i dist/*.deb")
    configure_logging("WARNING", "console")  # the simulators' debug lines are not figures
    with tempfile.TemporaryDirectory(prefix="paigow-footprint-") as name, ExitStack() as stack:
        tmp = Path(name)
        if args.with_services:
            broker = stack.enter_context(broker_process(tmp / "broker"))
            web = None if args.no_web_display else free_port()
            extra = mqtt_section(broker) + display_section(web)
        else:
            extra = display_section(None)
        config = write_config(tmp, extra)
        base_start, base_rss = bare_python(under)

        async def ready_runs() -> list[float]:
            times: list[float] = []
            shuffler = ShufflerSimulator(PtyPort(tmp / "shuffler"), seed=2)
            rng = RngSimulator(PtyPort(tmp / "rng"), seed=2)
            async with shuffler, rng:
                for i in range(args.runs):
                    elapsed, proc = await asyncio.to_thread(start_to_ready, config, tmp, under)
                    stop(proc)
                    times.append(elapsed)
                    print(f"  start to READY run {i + 1}: {elapsed * 1000:.0f} ms", flush=True)
            return times

        times = asyncio.run(ready_runs())
        _, samples, pending = asyncio.run(
            steady_memory(
                config, tmp, under, args.rounds, drain=args.with_services, smaps=args.smaps
            )
        )
    ready_s = statistics.median(times)
    rss_mb = max(samples) / MB
    version = subprocess.run(
        [*under.bare, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    print(f"daemon: {' '.join(under.daemon)}")
    print(
        f"python {version}; bare interpreter: start {base_start * 1000:.0f} ms, "
        f"RSS {base_rss / MB:.1f} MB"
    )
    print(
        f"start to READY: median {ready_s * 1000:.0f} ms over {args.runs} runs "
        f"({ready_s / base_start:.1f}× a bare interpreter start); goal 1.5 s: "
        f"{'met' if ready_s <= 1.5 else 'NOT met'}"
    )
    print(
        f"steady RSS after {args.rounds} rounds: max {rss_mb:.1f} MB, median "
        f"{statistics.median(samples) / MB:.1f} MB ({rss_mb * MB / base_rss:.1f}× a bare "
        f"interpreter); goal 60 MB: {'met' if rss_mb <= 60 else 'NOT met'}"
    )
    if args.with_services:
        what = "MQTT, no web display" if args.no_web_display else "MQTT and display"
        print(f"with {what}: outbox pending after the run {pending} (0: all delivered)")
    print(
        json.dumps(
            {
                "services": args.with_services,
                "web_display": args.with_services and not args.no_web_display,
                "installed": args.installed,
                "python": version,
                "ready_s": round(ready_s, 3),
                "ready_runs_s": [round(t, 3) for t in times],
                "rss_mb_max": round(rss_mb, 1),
                "rss_mb_median": round(statistics.median(samples) / MB, 1),
                "bare_python_start_s": round(base_start, 3),
                "bare_python_rss_mb": round(base_rss / MB, 1),
                "rounds": args.rounds,
                "outbox_pending": pending,
            }
        )
    )
    return 1 if args.with_services and pending else 0


if __name__ == "__main__":
    sys.exit(main())
