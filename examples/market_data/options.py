"""Command-line options shared by the example's scripts, checked by argparse (a bad value is a
usage error naming the option)."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable

from aeronio.errors import ChannelUriError
from aeronio.protocol.channel import split_address


def number(kind: type, low: float, high: float | None = None) -> Callable[[str], float]:
    """An argparse type: a number of `kind` from `low` (exclusive for floats, inclusive for ints)
    up to `high` (inclusive)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        too_low = value < low if kind is int else value <= low
        if too_low or (high is not None and value > high):
            above = f"at least {low}" if kind is int else f"above {low}"
            within = f"{above} and at most {high}" if high is not None else above
            raise argparse.ArgumentTypeError(f"{text}: must be {within}")
        return value

    return parse


def multicast(any_port: bool = False) -> Callable[[str], tuple[str, int]]:
    """An argparse type: GROUP:PORT, an IPv4 multicast group whose last byte is odd (Aeron's
    control address is the next one) and a port (or 0 for any free one, with `any_port`)."""

    def parse(text: str) -> tuple[str, int]:
        try:
            group, port = split_address("GROUP:PORT", text)
            ip = ipaddress.IPv4Address(group)
        except (ChannelUriError, ValueError):
            ip, port = None, 0
        if (
            ip is None
            or not ip.is_multicast
            or ip.packed[3] % 2 == 0
            or port < (0 if any_port else 1)
        ):
            raise argparse.ArgumentTypeError(
                f"{text!r}: want GROUP:PORT, GROUP a multicast address 224-239.x.y.z with z odd"
                + (", PORT 0 for any free one" if any_port else ", PORT from 1")
            )
        return str(ip), port

    return parse


def add_market_options(parser: argparse.ArgumentParser) -> None:
    """The synthetic market's options (feed.py, run.py)."""
    parser.add_argument(
        "--symbols", type=number(int, 1, 1000), default=50, help="how many (50; at most 1000)"
    )
    parser.add_argument(
        "--rate",
        type=number(float, 0, 1_000_000),
        default=20_000,
        help="ticks per second on average (20000; at most 1000000)",
    )
    parser.add_argument(
        "--speed",
        type=number(float, 0, 3600),
        default=30.0,
        help="market seconds per wall-clock second (30: a 1-minute bar every 2 s; at most 3600)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the market's random seed (1)")
