#!/usr/bin/env python
"""Where the time per message goes, in one process: each step of the API timed on its own.

The log is filled with N messages of --size bytes (default 32; an embedded driver, aeron:ipc,
64 MiB terms), then drained by one form of reading; each figure is the median over --repeats
of (elapsed / N), in nanoseconds per message, including the Python loop around the call:

  try_offer          `try_offer(msg)` in a for loop
  await offer        `await pub.offer(msg)` in a for loop (space always there)
  poll (no-op)       `poll(handler, 4096)` until N, the handler a no-op lambda
  poll (counting)    the same, the handler counting in a closure
  poll_messages      `image.poll_messages(list, 1024)`: whole messages copied, no iteration
  async for          `async for message in subscription` (copied messages)
  views              `async for message in subscription.messages(copy=False)`
  batches            `async for batch in subscription.batches()`, counting len(batch)
  pyzmq send+recv    PUSH/PULL over inproc:// in one thread: 256 `send(bytes)` then 256 `recv()`

    python bench/per_message_costs.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import zmq
from basics import run_main

import aeronio

BURST = 256


async def measure(n: int, repeats: int, size: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        results.setdefault(name, []).append(seconds / n * 1e9)

    async with aeronio.connect(term_buffer_sparse_file=False) as client:
        sub = await client.add_subscription("aeron:ipc", 7)
        pub = await client.add_publication("aeron:ipc?term-length=64m", 7)
        while not sub.images:
            await asyncio.sleep(0.001)
        image = sub.images[0]
        msg = bytes(size)
        try_offer = pub.try_offer

        async def fill() -> float:
            await asyncio.sleep(0.005)  # the conductor moves the limit
            t0 = time.perf_counter()
            sent = 0
            while sent < n:
                result = try_offer(msg)
                if result > 0:
                    sent += 1
                elif result != aeronio.ADMIN_ACTION:
                    raise RuntimeError(f"try_offer returned {result} (window too small for N)")
            return time.perf_counter() - t0

        def noop(buffer, header) -> None:
            pass

        for _ in range(repeats):
            add("try_offer", await fill())

            count = 0

            def counting(buffer, header) -> None:
                nonlocal count
                count += 1

            t0 = time.perf_counter()
            while count < n:
                sub.poll(counting, 4096)
            add("poll (counting)", time.perf_counter() - t0)

            await fill()
            t0 = time.perf_counter()
            got = 0
            while got < n:
                got += sub.poll(noop, 4096)
            add("poll (no-op)", time.perf_counter() - t0)

            await fill()
            t0 = time.perf_counter()
            got = 0
            out: list = []
            while got < n:
                out.clear()
                image.poll_messages(out, 1024)
                got += len(out)
            add("poll_messages", time.perf_counter() - t0)

            await fill()
            t0 = time.perf_counter()
            got = 0
            async for _message in sub:
                got += 1
                if got == n:
                    break
            add("async for", time.perf_counter() - t0)

            await fill()
            t0 = time.perf_counter()
            got = 0
            async for _message in sub.messages(copy=False):
                got += 1
                if got == n:
                    break
            add("views", time.perf_counter() - t0)

            await fill()
            t0 = time.perf_counter()
            got = 0
            async for batch in sub.batches():
                got += len(batch)
                if got >= n:
                    break
            add("batches", time.perf_counter() - t0)

            await asyncio.sleep(0.005)
            offer = pub.offer
            t0 = time.perf_counter()
            for _ in range(n):
                await offer(msg)
            add("await offer", time.perf_counter() - t0)
            got = 0
            while got < n:
                got += sub.poll(noop, 4096)
    return results


def zmq_costs(n: int, repeats: int, size: int) -> list[float]:
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("inproc://per-message")
    push = ctx.socket(zmq.PUSH)
    push.connect("inproc://per-message")
    send, recv = push.send, pull.recv
    msg = bytes(size)
    times = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(n // BURST):
                for _ in range(BURST):
                    send(msg)
                for _ in range(BURST):
                    recv()
            times.append((time.perf_counter() - t0) / (n // BURST * BURST) * 1e9)
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000, help="messages per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="median of this many")
    parser.add_argument("--size", type=int, default=32, help="message size in bytes")
    args = parser.parse_args(argv)
    results = asyncio.run(measure(args.count, args.repeats, args.size))
    results["pyzmq send+recv"] = zmq_costs(args.count, args.repeats, args.size)
    print(f"ns per {args.size}-byte message, median of {args.repeats} x {args.count:,} (min..max)")
    for name, values in results.items():
        print(
            f"  {name:18s} {statistics.median(values):7.1f}   "
            f"({min(values):.1f}..{max(values):.1f})"
        )
    return 0


if __name__ == "__main__":
    run_main(main)
