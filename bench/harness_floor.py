#!/usr/bin/env python
"""The versus harness's own cost per message, and so the best ratio any client could reach in it.

bench/versus_aeron_c.py times aeronio's calls inside the harness's Python: the loops that stamp
each message's number, offer it, poll, and check the number in a handler. This runs those same
loops (the functions in bench/aeron_workers.py and bench/one_process_workers.py, unchanged) with
stand-ins for the client's calls that cost what a call from Python cannot go below:

  try_offer(msg)       the builtin `len` (one C call of one argument, a positive result)
  poll(handler, n)     up to n prepared 32-byte messages (bytes, numbered in order) handed to the
                       handler from C (`deque(map(handler, ...))`), one Python frame per poll

Rows, ns per message (the best of --rounds, each --count messages):

  subscriber, 3 processes (a)   bench/aeron_workers.py's sub_poll: the subscriber's whole loop
  publisher, 3 processes (a)    aeron_workers.py's pub_spin: the publisher's whole loop
  one thread (a)                one_process_workers.py's offer_poll: both in one loop
  one thread (a), handler only  the one-thread handler called from C, nothing else

With --versus JSON (bench/versus_aeron_c.py --json, same Python), each row's ceiling: pyaeron's
median time per message in that run over the floor, the most aeronio ÷ pyaeron could be if
aeronio's calls cost no more than the stand-ins (across processes the slower of publisher and
subscriber bounds the rate).

    PYTHONPATH=$PWD python bench/harness_floor.py [--versus versus-312.json] \
        [--count 50000] [--rounds 21]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from collections import deque
from itertools import islice, repeat
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aeron_workers import SEQ, Received, Window, pub_spin, sub_poll, take_turns  # noqa: E402
from basics import check  # noqa: E402
from one_process_workers import counting_handler, offer_poll  # noqa: E402
from versus_aeron_c import ROWS as VERSUS_ROWS  # noqa: E402
from versus_aeron_c import SPIN  # noqa: E402

SIZE = 32


class StandIns:
    """A publication and a subscription whose calls are the stand-ins; the messages are
    numbered 0..count-1, handed out in order."""

    def __init__(self, count: int, numbers: list[int] | None = None) -> None:
        self.left = count
        numbers = list(range(count)) if numbers is None else numbers
        self.messages = iter([SEQ.pack(i) + bytes(SIZE - SEQ.size) for i in numbers])
        self.try_offer = len

    def poll(self, handler, limit: int) -> int:
        n = min(limit, self.left)
        self.left -= n
        deque(map(handler, islice(self.messages, n), repeat(None, n)), 0)
        return n


def spec(count: int) -> dict:
    return {
        "size": SIZE, "warmup": 0, "count": count, "timeout": 600.0, "burst": 256,
        "fragment_limit": 4096, **SPIN, "send_yield": 0,
    }  # fmt: skip


def counted(got: Received, count: int) -> None:
    """The loop saw every message, in order (as the versus runs check theirs)."""
    check(got.count == count and got.bad is None, f"{got.count} of {count} messages: {got.bad}")


async def subscriber(count: int, calls: StandIns | None = None) -> float:
    calls = calls or StandIns(count)
    got = Received()
    t0 = time.perf_counter()
    await sub_poll(calls, spec(count), Window(None), got)
    elapsed = time.perf_counter() - t0
    counted(got, count)
    return elapsed


async def publisher(count: int, calls: StandIns | None = None) -> float:
    calls = calls or StandIns(0)
    t0 = time.perf_counter()
    await pub_spin(calls, spec(count), 0, count)
    return time.perf_counter() - t0


async def one_thread(count: int, calls: StandIns | None = None) -> float:
    calls = calls or StandIns(count)
    got = Received()
    t0 = time.perf_counter()
    await offer_poll(calls, calls, spec(count), got, count, time.monotonic() + 600)
    elapsed = time.perf_counter() - t0
    counted(got, count)
    return elapsed


async def handler_only(count: int, calls: StandIns | None = None) -> float:
    calls = calls or StandIns(count)
    got = Received()
    handler = counting_handler(got)
    t0 = time.perf_counter()
    calls.poll(handler, count)
    elapsed = time.perf_counter() - t0
    counted(got, count)
    return elapsed


ROWS = {
    "subscriber, 3 processes (a)": (subscriber, "ipc-3p-a"),
    "publisher, 3 processes (a)": (publisher, "ipc-3p-a"),
    "one thread (a)": (one_thread, "ipc-1t-a"),
    "one thread (a), handler only": (handler_only, None),
}


def floors(count: int, rounds: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, (run, _) in ROWS.items():
            ns = asyncio.run(run(count)) / count * 1e9
            best[name] = min(best.get(name, ns), ns)
    return best


def pyaeron_ns(versus: dict, key: str) -> float | None:
    """pyaeron's median time per message in a versus JSON's row `key`."""
    for row in versus["rows"]:
        if row["test"] == VERSUS_ROWS[key] and row["pyaeron"]["values"]:
            return 1e9 / statistics.median(row["pyaeron"]["values"])
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=21, help="rounds; the best is kept")
    parser.add_argument("--versus", type=Path, help="a bench/versus_aeron_c.py --json file")
    args = parser.parse_args()
    versus = json.loads(args.versus.read_text()) if args.versus else None
    take_turns(spec(args.count))  # the loops yield as the versus workers' do
    best = floors(args.count, args.rounds)
    print(f"Python {platform.python_version()}, {args.count:,} messages, best of {args.rounds}")
    print()
    print("| harness loop, stand-in calls | floor ns/msg | pyaeron ns/msg | ceiling ÷ pyaeron |")
    print("|---|---:|---:|---:|")
    for name, (_, key) in ROWS.items():
        theirs = pyaeron_ns(versus, key) if versus and key else None
        ceiling = f"{theirs / best[name]:.2f}×" if theirs else "—"
        shown = f"{theirs:.0f}" if theirs else "—"
        print(f"| {name} | {best[name]:.0f} | {shown} | {ceiling} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
