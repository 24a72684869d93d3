#!/usr/bin/env python
"""poll(h, 1) alone, aeronio against pyaeron in ONE process, chunks alternated.

Each side is a client of a standalone driver of its own (aeronio's `python -m aeronio.cli
driver`, Aeron's C media driver by bench/aeron_c_workers.py --driver), as in
bench/versus_aeron_c.py's one-call row, with that row's handlers: aeronio's
`one_process_workers.counting_handler(Received())`, pyaeron's `aeron_c_workers.Counter`. Per
round each side offers a chunk (untimed) and polls it back with `poll(handler, 1)` (timed);
the sides take turns in rotation, so the machine's load falls on all of them alike. A third side
runs aeronio's handler over a plain dataclass counter (class attributes as defaults, as
`Received` was): from Python 3.12 its attribute accesses are not specialised (docs/benchmarks.md,
"Where poll(h, 1)'s time went on 3.12"). Every message is counted and its number checked.

Needs an interpreter that imports both aeronio (its core built for it) and pyaeron (3.12+):

    PYTHONPATH=.:DIR_WITH_PYAERON PY312 bench/poll_alone.py --c-python PY312_WITH_PYAERON
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import one_process_workers as workers
import pyaeron
from aeron_c_workers import Counter
from worker_protocol import SEQ

from aeronio import ADMIN_ACTION, connect

BENCH = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass
class PlainReceived:
    """`Received` as a plain dataclass (its defaults class attributes)."""

    count: int = 0
    bad: str | None = None
    last_length: int = 0
    stalled: str | None = None


SIDES = ("pyaeron", "aeronio", "aeronio, plain dataclass counter")


def timed_polls(poll, handler, got, stop: int) -> float:
    """Seconds to poll(handler, 1) until `got.count` reaches `stop` (the harness's loop)."""
    empty = 0
    t0 = time.perf_counter()
    while got.count < stop:
        if poll(handler, 1) == 0:
            empty += 1
    return time.perf_counter() - t0


async def run(args, a_dir: str, c_dir: str) -> dict[str, list[float]]:
    msg = bytearray(args.size)
    frame = (32 + args.size + 31) // 32 * 32
    async with connect(a_dir) as client:
        a_sub = await client.add_subscription("aeron:ipc", 9)
        a_pub = await client.add_publication("aeron:ipc", 9)
        while not (a_sub.images and a_pub.is_connected):
            await asyncio.sleep(0.001)
        aeron = pyaeron.Aeron.connect(dir=c_dir)
        try:
            c_sub = aeron.add_subscription("aeron:ipc", 9)
            c_pub = aeron.add_publication("aeron:ipc", 9)
            c_pub.await_connected(10)
            c_sub.await_connected(10)
            counter = Counter()
            c_handler = counter.handler()
            sent = {"aeronio": 0, "pyaeron": 0}
            ns: dict[str, list[float]] = {side: [] for side in SIDES}
            for r in range(args.rounds + 1):
                for side in SIDES[r % 3 :] + SIDES[: r % 3]:
                    kind = "pyaeron" if side == "pyaeron" else "aeronio"
                    pub, first = (c_pub if kind == "pyaeron" else a_pub), sent[kind]
                    while pub.position_limit - pub.position < args.chunk * frame:
                        await asyncio.sleep(0.001)
                    for i in range(first, first + args.chunk):
                        SEQ.pack_into(msg, 0, i)
                        result = pub.offer(msg) if kind == "pyaeron" else pub.try_offer(msg)
                        if result == ADMIN_ACTION:  # the same value in both
                            result = pub.offer(msg) if kind == "pyaeron" else pub.try_offer(msg)
                        if not result or result < 0:
                            raise SystemExit(f"{side}: offer {i} refused with room: {result}")
                    sent[kind] = stop = first + args.chunk
                    if kind == "pyaeron":
                        seconds = timed_polls(c_sub.poll, c_handler, counter, stop)
                    else:
                        got = (workers.Received if side == "aeronio" else PlainReceived)(first)
                        seconds = timed_polls(a_sub.poll, workers.counting_handler(got), got, stop)
                        workers.checked(got, stop, args.size)
                    if r:  # the first round warms up
                        ns[side].append(seconds / args.chunk * 1e9)
            counter.check(sent["pyaeron"], args.size)
        finally:
            aeron.close()
    return ns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--c-python", required=True, help="a Python with pyaeron, for its driver")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=32)
    args = parser.parse_args()
    a_dir = tempfile.mkdtemp(prefix="aeronio-poll-alone-", dir="/dev/shm")
    c_dir = a_dir + "-c"
    drivers = [
        subprocess.Popen([sys.executable, "-m", "aeronio.cli", "driver", "--dir", a_dir],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True),
        subprocess.Popen([args.c_python, os.path.join(BENCH, "aeron_c_workers.py"), "--driver",
                          c_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True),
    ]  # fmt: skip
    try:
        for driver in drivers:
            driver.stdout.readline()  # its "... pid ..." line: up
        ns = asyncio.run(run(args, a_dir, c_dir))
    finally:
        drivers[0].terminate()
        drivers[1].stdin.close()
        for driver in drivers:
            driver.wait(30)
        shutil.rmtree(a_dir, ignore_errors=True)
        shutil.rmtree(c_dir, ignore_errors=True)
    print(
        f"poll(h, 1) alone, Python {sys.version.split()[0]}, {args.rounds} rounds of "
        f"{args.chunk:,} calls per side, {args.size}-byte messages, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end (ns per call; rate ÷ "
        "pyaeron's: the median of each round's ratio)"
    )
    for side, values in ns.items():
        ratio = statistics.median(c / v for c, v in zip(ns["pyaeron"], values, strict=True))
        print(f"  {side:34s} median {statistics.median(values):6.0f}  min {min(values):6.0f}"
              f"  {ratio:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
