"""``paigow-table run``, ``check-config``, ``demo`` and ``kiosk``: the table itself. Arguments
only here; what a command needs is imported when it runs, so the CLI starts without aiohttp or
aiomqtt."""

from __future__ import annotations

import argparse
import sys

from controller.exits import Subcommands


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    from controller.exits import existing_file
    from controller.wiring import run_from_config

    existing_file(args.config, "config")  # 66 or 74 as every command; a bad one is 78
    return asyncio.run(run_from_config(args.config))


def cmd_check_config(args: argparse.Namespace) -> int:
    from controller.config_check import check_config_main
    from controller.exits import existing_file

    existing_file(args.file, "config")  # 66 or 74, one line: a typo is not a config error
    return check_config_main(args.file)


def cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    from controller.exits import port_free

    port_free(args.http_port, "--http-port")  # one line now, not a traceback after 10 s
    if (
        args.tables is not None
    ):  # a pit of N tables: real daemons and the pit (simulators/pit_demo.py)
        from simulators.pit_demo import run_demo as run_pit_demo

        args.database = ""
        try:
            return asyncio.run(run_pit_demo(args))
        except KeyboardInterrupt:
            return 130

    from simulators.demo import run_demo

    try:
        return asyncio.run(run_demo(args))
    except KeyboardInterrupt:  # Ctrl-C before the daemon took over SIGINT (or after it)
        print("demo stopped", file=sys.stderr, flush=True)
        return 130


def cmd_kiosk(args: argparse.Namespace) -> int:
    from controller.display.kiosk import BROWSER_ARGS, launch, token_path

    extra = [a for a in args.browser_args if a != "--"] if args.browser_args else []
    browser = [args.browser, *(extra or BROWSER_ARGS)]
    return launch(args.url, token_path(args.token_file), browser, wait=args.wait)


def register(sub: Subcommands) -> None:
    p = sub.add_parser("run", help="run the table daemon", description="Run the table daemon.")
    p.add_argument("--config", required=True, help="the table's TOML config file")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser(
        "check-config",
        help="check a config file and print every error",
        description="Check a config file: every error with its key and what was expected.",
    )
    p.add_argument("file")
    p.set_defaults(func=cmd_check_config)
    p = sub.add_parser(
        "demo",
        help="the daemon with simulated devices, dealing rounds you can watch",
        description="Run the daemon with a simulated shuffler and RNG box over ptys.",
    )
    _demo_arguments(p)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser(
        "kiosk",
        help="open the dealer page in the kiosk's browser, with the kiosk's credential",
        description="Run the kiosk's browser on the dealer page with the kiosk's credential, "
        'which keeps it served under a flood (docs/display.md, "The kiosk\'s credential"). '
        "Run it as the kiosk's user; the token never goes on a command line.",
    )
    p.add_argument(
        "--url", default="http://127.0.0.1:8080", help="the display (default http://127.0.0.1:8080)"
    )
    p.add_argument(
        "--token-file",
        help="the kiosk token ([display] kiosk_token_file); default: the systemd credential "
        "kiosk-token ($CREDENTIALS_DIRECTORY/kiosk-token)",
    )
    p.add_argument("--browser", default="/usr/bin/chromium", help="default /usr/bin/chromium")
    p.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for the display to answer (at boot), then start without the "
        "credential (default 600)",
    )
    p.add_argument(
        "browser_args",
        nargs=argparse.REMAINDER,
        help="after --: the browser's arguments, in place of --kiosk --incognito --no-first-run "
        "--noerrdialogs",
    )
    p.set_defaults(func=cmd_kiosk)


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=None, help="stop after N rounds (default: run)")
    p.add_argument("--seed", type=int, default=None, help="seed the shuffles and RNG presses")
    p.add_argument("--interval", type=float, default=3.0, help="seconds between rounds")
    p.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="chance per round of a fault scenario (short packet, duplicate card, ...)",
    )
    p.add_argument(
        "--bias",
        choices=["stacked_joker", "stacked_aces", "repeat_order", "one_riffle", "rng_favours_3"],
        help="a biased simulated device, to see game protection catch it (docs/protection.md)",
    )
    p.add_argument("--journal", help="journal file (default: a temporary one)")
    p.add_argument(
        "--tables",
        type=int,
        default=None,
        metavar="N",
        help="N tables as real daemons and the pit's page over them (docs/pit.md); "
        "--http-port is then the pit page's",
    )
    p.add_argument(
        "--http-port",
        type=int,
        default=8080,
        help="port of the dealer and supervisor pages on 127.0.0.1 (default 8080)",
    )
    _demo_mqtt_arguments(p)


def _demo_mqtt_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--mqtt-port",
        type=int,
        default=None,
        help="port of the demo's private Mosquitto on 127.0.0.1 (default: a free one)",
    )
    group.add_argument("--broker", metavar="HOST:PORT", help="publish to this broker instead")
    group.add_argument("--no-mqtt", action="store_true", help="do not publish over MQTT")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="with --rounds: wait up to S seconds for the broker to acknowledge every message "
        "before stopping (default 60)",
    )
