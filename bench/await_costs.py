#!/usr/bin/env python
"""The await path's cost per call, A/B across builds and Pythons, against Aeron's C client.

Each "side" is a Python and a source tree (the aeronio build it imports), or pyaeron's Python.
The sides run one after another in fresh processes, round after round (interleaved), so a
machine busy with other work slows them alike; each process times every step --inner times
and reports its minimum, and the table gives the minimum and the median over the --rounds.
Figures are nanoseconds per call (per message), 32-byte messages, aeron:ipc, one process and
one thread, an embedded driver, the Python loop around the call included:

  try_offer      `try_offer(msg)` (pyaeron: `offer(msg)`), space always there
  await offer    `await offer(msg)` in a coroutine, space always there
  poll           `poll(handler, 4096)` per message, a no-op handler
  poll(h, 1)     `poll(handler, 1)` per call, one message there each time
  async for      `async for message in subscription` (copied messages) per message
  views          `async for message in subscription.messages(copy=False)` per message
  await done     `await` of an awaitable already completed (aeronio's, reused; nothing
                 offered): the interpreter's own cost of an await that does not suspend
  (a)            try_offer + poll: one message offered and taken
  (b)            await offer + async for
  (b)/(a)        the async API's throughput as a fraction of (a)'s

    python bench/await_costs.py --side 3.12=/path/to/python:/path/to/tree ... \
        [--pyaeron /work/venv312/bin/python] [--rounds 7] [--inner 5] [--n 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from worker_protocol import PYAERON_ENV

# Both children: N messages per step, INNER times; keep() takes each step's best.
PRELUDE = r"""
import json, sys, time

N, INNER = int(sys.argv[1]), int(sys.argv[2])
best = {}
NUMBERED = [i.to_bytes(8, "little") + bytes(24) for i in range(N)]

def keep(name, seconds, count):
    ns = seconds / count * 1e9
    best[name] = min(best.get(name, ns), ns)

def check(path, seen):
    # The untimed pass: every message of the path came, once, in order.
    if seen != list(range(N)):
        bad = next((i for i, s in enumerate(seen) if s != i), len(seen))
        sys.exit(f"{path}: {len(seen)} of {N} messages, the first wrong at {bad}")
"""

AERONIO_CHILD = (
    PRELUDE
    + r"""
import asyncio
import aeronio
from aeronio._core import Completed

async def main():
    async with aeronio.connect(term_buffer_sparse_file=False) as client:
        sub = await client.add_subscription("aeron:ipc", 7)
        pub = await client.add_publication("aeron:ipc?term-length=64m", 7)
        while not sub.images:
            await asyncio.sleep(0.001)
        msg = bytes(32)
        try_offer, offer, poll = pub.try_offer, pub.offer, sub.poll

        def noop(buffer, header):
            pass

        async def fill():
            await asyncio.sleep(0.002)
            sent = 0
            while sent < N:
                if try_offer(msg) > 0:
                    sent += 1
                else:
                    await asyncio.sleep(0)  # the conductor moves the limit

        def drain():
            got = 0
            while got < N:
                got += poll(noop, 4096)

        # Untimed, first: each path delivers N numbered messages, once each, in order.
        for path in ("poll", "poll(h, 1)", "async for", "views"):
            for message in NUMBERED:
                if path == "async for":
                    await offer(message)
                else:
                    while try_offer(message) <= 0:
                        await asyncio.sleep(0)
            seen = []
            take = lambda buffer, header: seen.append(int.from_bytes(buffer[:8], "little"))
            while path.startswith("poll") and len(seen) < N:
                poll(take, 4096 if path == "poll" else 1)
            if not path.startswith("poll"):
                messages = sub if path == "async for" else sub.messages(copy=False)
                async for message in messages:
                    seen.append(int.from_bytes(message.data[:8], "little"))
                    if len(seen) == N:
                        break
            check(path, seen)

        for _ in range(INNER):
            await asyncio.sleep(0.002)
            t0 = time.perf_counter()
            sent = 0
            while sent < N:
                if try_offer(msg) > 0:
                    sent += 1
                else:
                    await asyncio.sleep(0)
            keep("try_offer", time.perf_counter() - t0, N)
            t0 = time.perf_counter()
            got = 0
            while got < N:
                got += poll(noop, 4096)
            keep("poll", time.perf_counter() - t0, N)

            await fill()
            t0 = time.perf_counter()
            got = 0
            while got < N:
                got += poll(noop, 1)
            keep("poll(h, 1)", time.perf_counter() - t0, N)

            await asyncio.sleep(0.002)
            t0 = time.perf_counter()
            for _ in range(N):
                await offer(msg)
            keep("await offer", time.perf_counter() - t0, N)
            drain()

            await fill()
            t0 = time.perf_counter()
            got = 0
            async for _message in sub:
                got += 1
                if got == N:
                    break
            keep("async for", time.perf_counter() - t0, N)

            await fill()
            t0 = time.perf_counter()
            got = 0
            async for _message in sub.messages(copy=False):
                got += 1
                if got == N:
                    break
            keep("views", time.perf_counter() - t0, N)

            done = Completed.__new__(Completed)
            t0 = time.perf_counter()
            for _ in range(N):
                await done
            keep("await done", time.perf_counter() - t0, N)

asyncio.run(main())
print(json.dumps(best))
"""
)

PYAERON_CHILD = (
    PRELUDE
    + r"""
import tempfile
import pyaeron

with tempfile.TemporaryDirectory(dir="/dev/shm") as dir:
    driver = pyaeron.MediaDriver(dir=dir + "/aeron", threading="shared")
    aeron = pyaeron.Aeron.connect(dir=driver.dir)
    sub = aeron.add_subscription("aeron:ipc", 7)
    pub = aeron.add_publication("aeron:ipc?term-length=64m", 7)
    pub.await_connected(10.0)
    while not sub.image_count:
        time.sleep(0.001)
    msg = bytes(32)
    offer, poll = pub.offer, sub.poll

    def noop(buffer, header):
        pass

    def fill():
        time.sleep(0.002)
        sent = 0
        while sent < N:
            if offer(msg):
                sent += 1

    # Untimed, first: each path delivers N numbered messages, once each, in order.
    for path, limit in (("poll", 4096), ("poll(h, 1)", 1)):
        for message in NUMBERED:
            while not offer(message):
                pass
        seen = []
        take = lambda buffer, header: seen.append(int.from_bytes(bytes(buffer)[:8], "little"))
        while len(seen) < N:
            poll(take, limit)
        check(path, seen)

    for _ in range(INNER):
        time.sleep(0.002)
        t0 = time.perf_counter()
        sent = 0
        while sent < N:
            if offer(msg):
                sent += 1
        keep("try_offer", time.perf_counter() - t0, N)
        t0 = time.perf_counter()
        got = 0
        while got < N:
            got += poll(noop, 4096)
        keep("poll", time.perf_counter() - t0, N)
        fill()
        t0 = time.perf_counter()
        got = 0
        while got < N:
            got += poll(noop, 1)
        keep("poll(h, 1)", time.perf_counter() - t0, N)
    pub.close()
    sub.close()
    aeron.close()
    driver.close()
print(json.dumps(best))
"""
)

COLUMNS = ("try_offer", "await offer", "poll", "poll(h, 1)", "async for", "views", "await done")


def run_side(python: str, tree: str | None, n: int, inner: int) -> dict[str, float]:
    code = AERONIO_CHILD if tree else PYAERON_CHILD
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    else:
        env.update(PYAERON_ENV)
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [python, "-c", code, str(n), str(inner)],
            env=env,
            cwd=cwd,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    if "await offer" in figures:
        figures["(a)"] = figures["try_offer"] + figures["poll"]
        figures["(b)"] = figures["await offer"] + figures["async for"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--side", action="append", default=[], metavar="LABEL=PYTHON:TREE", help="repeatable"
    )
    parser.add_argument("--pyaeron", metavar="PYTHON", help="a Python with pyaeron installed")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--json", metavar="FILE", help="also write every figure here")
    args = parser.parse_args()
    sides: dict[str, tuple[str, str | None]] = {}
    for spec in args.side:
        label, _, where = spec.partition("=")
        python, _, tree = where.partition(":")
        # The children run in a directory of their own: paths from here made absolute.
        python = os.path.abspath(python) if os.sep in python else python
        sides[label] = (python, os.path.abspath(tree or os.getcwd()))
    if args.pyaeron:
        sides["pyaeron"] = (os.path.abspath(args.pyaeron), None)
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in sides}
    for r in range(args.rounds):
        for label, (python, tree) in sides.items():
            runs[label].append(run_side(python, tree, args.n, args.inner))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    columns = COLUMNS + ("(a)", "(b)")
    print(f"ns per call, min / median of {args.rounds} rounds (each the best of {args.inner})")
    print(f"{'side':<16}" + "".join(f"{c:>16}" for c in columns) + f"{'(b)/(a)':>10}")
    for label, figures in runs.items():
        cells = []
        for c in columns:
            values = [f[c] for f in figures if c in f]
            cells.append(f"{min(values):7.1f}/{statistics.median(values):7.1f}" if values else "-")
        ratios = [f["(a)"] / f["(b)"] for f in figures if "(b)" in f]
        ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
        print(f"{label:<16}" + "".join(f"{cell:>16}" for cell in cells) + f"{ratio:>10}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
