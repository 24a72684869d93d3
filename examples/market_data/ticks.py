"""The tick record, defined once, and where ticks travel.

A tick is one fixed-layout little-endian record (`TICK`, a numpy dtype without padding): the
feed publishes arrays of them with `offer_batch`, the consumers read them in place with
`batch_poll` + `batch.records(TICK)`, and Spark decodes the recording with the same layout
(`SPARK_SCHEMA`, derived from `TICK`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import aeronio

TICK = np.dtype(
    [
        ("ts", "<i8"),  # market time, ns since the epoch (the feed's accelerated clock)
        ("wall", "<i8"),  # when published, CLOCK_REALTIME ns (the consumers' lag)
        ("seq", "<i8"),  # the feed's tick number, from 0
        ("bid", "<f8"),
        ("ask", "<f8"),
        ("price", "<f8"),  # the trade: at the ask when bought, at the bid when sold
        ("qty", "<i4"),
        ("symbol", "<i2"),
        ("side", "i1"),  # +1 buyer-initiated, -1 seller-initiated
        ("flags", "u1"),  # BURST
    ]
)
BURST = 1  # the tick belongs to a burst (a news-like flurry on one symbol)

_SPARK_TYPES = {
    "i8": "long",
    "i4": "int",
    "i2": "short",
    "i1": "byte",
    "u1": "byte",
    "f8": "double",
}
# `format("aeronio").option("layout", "fixed")`: the record's fields in order.
SPARK_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[TICK[name].str[1:]]}" for name in TICK.names)

TICKS_STREAM = 2001
BARS_STREAM = 2002
IPC_TICKS = "aeron:ipc?term-length=4m"
BARS = "aeron:ipc?term-length=1m"
MINUTE_NS = 60_000_000_000


def multicast_ticks(group: str, port: int) -> str:
    """The feed's multicast channel: loopback only (interface 127.0.0.1), nothing leaves the
    host."""
    return f"aeron:udp?endpoint={group}:{port}|interface=127.0.0.1|term-length=4m"


def symbol_names(count: int) -> list[str]:
    """`count` distinct made-up tickers, the same for every process."""
    rng = np.random.default_rng(20260101)
    consonants, vowels = "BCDFGHKLMNPRSTVXZ", "AEIOU"
    names: list[str] = []
    while len(names) < count:
        c = rng.integers(0, len(consonants), 3)
        v = rng.integers(0, len(vowels), 1)
        name = consonants[c[0]] + vowels[v[0]] + consonants[c[1]] + consonants[c[2]]
        if name not in names:
            names.append(name)
    return names


def last_of_each(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys and, for each, the index of its last occurrence."""
    distinct, first_from_end = np.unique(keys[::-1], return_index=True)
    return distinct, len(keys) - 1 - first_from_end


async def receive(
    subscription: aeronio.Subscription, handle: Callable[[np.ndarray], object], limit: int = 4096
) -> None:
    """Hand each batch of ticks to `handle` as records of TICK viewed in place in the log (valid
    during the call), until cancelled; while none come, poll every millisecond."""

    def on_batch(batch) -> None:
        handle(batch.records(TICK))

    while True:
        if subscription.batch_poll(on_batch, limit):
            await asyncio.sleep(0)  # let the other tasks (status, keepalives) run
        else:
            await asyncio.sleep(0.001)
