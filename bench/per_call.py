#!/usr/bin/env python
"""The synchronous per-call costs of aeronio and of Aeron's C client (pyaeron), interleaved.

Each side runs in a child process of its own (aeronio: an embedded driver; pyaeron: Aeron's C
media driver embedded, SHARED threading), one IPC stream, a 64 MiB term, --size-byte messages
(default 32), and times, per repeat (each figure the median over chunks of 1024 calls):

  offer          `try_offer(msg)` (pyaeron: `offer(msg)`) N times, space always there
  poll(h, 1)     `subscription.poll(h, 1)` N times over a log holding N messages
  one thread     (a): up to 256 try_offer, then poll(h, 256), until N arrived
  round trip     a message offered and polled back by the same thread, N times (median and
                 p99 of each round trip, in µs; no second process: the cost of the calls)

Every message is counted (and the one thread's byte count checked). The children run in
rotation (`--side` more than once: A/B builds by PYTHONPATH, e.g. before:/tmp/base), --rounds
times, each repeating every workload --repeats times; the figures are the medians over all of a
side's repeats (ns per call; round trips in µs), with their min..max.

    python bench/per_call.py --side aeronio:. --side pyaeron:PATH/TO/python3.12-with-pyaeron
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BURST = 256
CHUNK = 1024
TERM = 64 * 1024 * 1024


def workloads(try_offer, poll, idle, n: int, size: int) -> dict[str, float]:
    """The four workloads over one publication and its subscription: ns per call (round trips
    in µs). `idle()` lets the driver move the publication's limit (aeronio's embedded driver
    runs one duty cycle on this thread; Aeron's runs on its own): the time it takes is left out
    of the figures."""
    msg = bytes(size)
    got = [0, 0]
    waited = [0.0]

    def wait() -> None:
        t0 = time.perf_counter()
        idle()
        waited[0] += time.perf_counter() - t0

    def timed(run, count: int) -> float:
        """The median over chunks of CHUNK calls (ns per call): a chunk the scheduler preempted
        (other processes share the cores) is one outlier among many; chunks that waited for the
        driver are left out."""
        per_call = []
        for _ in range(count // CHUNK):
            waited[0] = 0.0
            t0 = time.perf_counter()
            run(CHUNK)
            elapsed = time.perf_counter() - t0
            if not waited[0]:
                per_call.append(elapsed / CHUNK * 1e9)
        return statistics.median(per_call)

    def handler(buffer, header) -> None:
        got[0] += 1

    def counting(buffer, header) -> None:
        got[0] += 1
        got[1] += len(buffer)

    def fill(count: int) -> None:
        sent = 0
        while sent < count:
            if try_offer(msg) > 0:
                sent += 1
            else:
                wait()

    def poll1(count: int) -> None:
        for _ in range(count):
            poll(handler, 1)

    def one_thread(count: int) -> None:
        sent = 0
        start = got[0]
        while got[0] - start < count:
            k = min(BURST, count - sent)
            i = 0
            while i < k and try_offer(msg) > 0:
                i += 1
            sent += i
            if poll(counting, BURST) == 0 and i == 0:
                wait()

    out = {}
    while poll(handler, 4096):
        pass
    wait()
    n -= n % CHUNK
    out["offer"] = timed(fill, n)
    got[0] = 0
    out["poll(h, 1)"] = timed(poll1, n)
    if got[0] != n:
        raise RuntimeError(f"poll(h, 1) delivered {got[0]} of {n}")
    wait()
    got[0] = got[1] = 0
    out["one thread (a)"] = timed(one_thread, n)
    if got[0] != n or got[1] != n * size:
        raise RuntimeError(f"one thread: {got} of {n} messages")
    rtts = []
    clock = time.perf_counter_ns
    for _ in range(min(n, 100_000)):
        t0 = clock()
        while not try_offer(msg) > 0:
            wait()
            t0 = clock()
        while poll(handler, 1) == 0:
            pass
        rtts.append(clock() - t0)
    rtts.sort()
    out["rtt median µs"] = rtts[len(rtts) // 2] / 1000
    out["rtt p99 µs"] = rtts[len(rtts) * 99 // 100] / 1000
    return out


def run_aeronio(n: int, size: int, repeats: int) -> list[dict]:
    import asyncio

    import aeronio

    async def main() -> list[dict]:
        async with aeronio.connect(term_buffer_sparse_file=False) as client:
            sub = await client.add_subscription("aeron:ipc", 7)
            pub = await client.add_publication(f"aeron:ipc?term-length={TERM}", 7)
            while not (sub.images and pub.is_connected):
                await asyncio.sleep(0.001)
            invoke = client._owned_driver.invoke
            return [workloads(pub.try_offer, sub.poll, invoke, n, size) for _ in range(repeats)]

    return asyncio.run(main())


def run_pyaeron(n: int, size: int, repeats: int) -> list[dict]:
    import pyaeron
    from worker_protocol import PYAERON_ENV

    os.environ.update(PYAERON_ENV)

    directory = tempfile.mkdtemp(prefix="per-call-aeron-")
    driver = pyaeron.MediaDriver(dir=directory, threading="shared", dir_delete_on_shutdown=True)
    try:
        aeron = pyaeron.Aeron.connect(dir=driver.dir)
        sub = aeron.add_subscription("aeron:ipc", 7)
        pub = aeron.add_publication(f"aeron:ipc?term-length={TERM}", 7)
        pub.await_connected(10)
        sub.await_connected(10)
        # offer returns True (> 0) or a falsy code
        results = [workloads(pub.offer, sub.poll, _pause, n, size) for _ in range(repeats)]
        aeron.close()
    finally:
        driver.close()
        shutil.rmtree(directory, ignore_errors=True)
    return results


def _pause() -> None:
    time.sleep(0)


def child(args) -> int:
    if args.child == "pyaeron":
        results = run_pyaeron(args.count, args.size, args.repeats)
    else:
        results = run_aeronio(args.count, args.size, args.repeats)
    print(json.dumps({"python": sys.version.split()[0], "results": results}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="per round and side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--side",
        action="append",
        help="NAME:PYTHONPATH (aeronio on this interpreter) or pyaeron:INTERPRETER",
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter of aeronio sides")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    sides = args.side or ["aeronio:" + os.getcwd()]
    common = ["--count", str(args.count), "--size", str(args.size), "--repeats", str(args.repeats)]
    collected: dict[str, list[dict]] = {}
    versions = {}
    for _ in range(args.rounds):
        for side in sides:
            name, _, where = side.partition(":")
            if name == "pyaeron":
                cmd, env = [where, __file__, "--child", "pyaeron"], dict(os.environ)
            else:
                cmd = [args.python, __file__, "--child", "aeronio"]
                env = {**os.environ, "PYTHONPATH": where}
            done = subprocess.run(cmd + common, env=env, capture_output=True, text=True)
            if done.returncode:
                sys.stderr.write(done.stderr)
                raise SystemExit(f"{name} failed")
            report = json.loads(done.stdout.splitlines()[-1])
            versions[name] = report["python"]
            collected.setdefault(name, []).extend(report["results"])
    keys = list(next(iter(collected.values()))[0])
    print(
        f"{args.size}-byte messages, {args.count:,} per workload, medians of "
        f"{args.rounds} rounds x {args.repeats} repeats (ns per call; rtt in µs; min..max)"
    )
    print("  " + " " * 16 + "".join(f"{n + ' ' + versions[n]:>26s}" for n in collected))
    for key in keys:
        cells = []
        for name in collected:
            values = [r[key] for r in collected[name]]
            cells.append(
                f"{statistics.median(values):8.3f} ({min(values):.2f}..{max(values):.2f})"
                if "µs" in key
                else f"{statistics.median(values):8.1f} ({min(values):.0f}..{max(values):.0f})"
            )
        print(f"  {key:16s}" + "".join(f"{c:>26s}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
