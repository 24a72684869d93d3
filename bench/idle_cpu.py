#!/usr/bin/env python
"""What an idle aeronio costs: CPU (% of one core) and wake-ups per second of processes that
have nothing to do, each measured over --seconds from its CPU-time clock (nanoseconds) and its
voluntary context switches (/proc/<pid>/status: each is one sleep, so one wake-up).

Scenarios, each a fresh set of processes:

  asyncio 10/s   a bare asyncio loop whose one task sleeps 0.1 s at a time: what any loop that
                 wakes 10 times a second costs on this machine (an idle UDP stream's sender
                 heartbeats 10 times a second, Aeron's 100 ms)
  embedded       `aeronio.connect()` (an embedded driver) with nothing open
  embedded udp   the same with a publication and a subscription on aeron:udp (127.0.0.1),
                 connected, one message exchanged
  standalone     `aeronio driver` and two client processes, an IPC publication and an IPC
                 subscription on it, connected (each process measured)
  1 ms timer     `embedded udp` with the driver's timer every millisecond (timer_interval_ns):
                 a driver that ticks, for comparison
  aeron client   `aeronio driver` and one of Aeron's C clients (pyaeron, run by the Python of
                 --pyaeron-python, 3.12+) with an IPC subscription: the driver looks for its
                 commands every 10 ms (it rings no doorbell). Only with --pyaeron-python.

    python bench/idle_cpu.py [--seconds 10] [--repeats 3] [--json FILE] [--pyaeron-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SCENARIOS = ("asyncio 10/s", "embedded", "embedded udp", "standalone", "1 ms timer")
AERON_CLIENT = "aeron client"
# An idle Aeron C client: connects, subscribes to aeron:ipc, says ready, waits for stdin.
PYAERON_CHILD = """
import sys, pyaeron
aeron = pyaeron.Aeron.connect(dir=sys.argv[1])
subscription = aeron.add_subscription("aeron:ipc", 1001)
print("ready", flush=True)
sys.stdin.readline()
subscription.close()
aeron.close()
"""


def cpu_seconds(pid: int) -> float:
    """A process's CPU time from its CPU-time clock (clock_getcpuclockid(3)), in seconds."""
    return time.clock_gettime(((~pid) << 3) | 2)


def sleeps(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise RuntimeError(f"no voluntary_ctxt_switches for pid {pid}")


# -- the children ----------------------------------------------------------------------------


async def child(role: str, arg: str) -> None:
    """Set up, print "ready", then idle until a line on stdin."""
    import aeronio

    stdin_line = asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if role == "asyncio":

        async def tick() -> None:
            while True:
                await asyncio.sleep(0.1)

        task = asyncio.create_task(tick())
        print("ready", flush=True)
        await stdin_line
        task.cancel()
        return
    if role in ("embedded", "embedded-udp", "ticking"):
        options = {"timer_interval_ns": 1_000_000} if role == "ticking" else {}
        async with aeronio.connect(**options) as aeron:
            if role != "embedded":
                subscription = await aeron.add_subscription(arg, 7)
                publication = await aeron.add_publication(arg, 7)
                await publication.wait_connected(10)
                await publication.offer(b"hello", timeout=10)
                await subscription.receive()
            print("ready", flush=True)
            await stdin_line
        return
    side, dir = role, arg  # "pub" or "sub" of the standalone driver on dir
    async with aeronio.connect(dir) as aeron:
        if side == "pub":
            await (await aeron.add_publication("aeron:ipc", 7)).wait_connected(10)
        else:
            await (await aeron.add_subscription("aeron:ipc", 7)).wait_connected(10)
        print("ready", flush=True)
        await stdin_line


# -- the measurement ---------------------------------------------------------------------------


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def wait_ready(proc: subprocess.Popen, what: str) -> None:
    line = proc.stdout.readline()
    if "ready" not in line and "aeronio driver pid" not in line:
        raise RuntimeError(f"{what} did not start: {line!r}")


def measure(procs: dict[str, subprocess.Popen], seconds: float) -> dict[str, dict[str, float]]:
    time.sleep(1.0)  # settle into the idle state
    before = {name: (cpu_seconds(p.pid), sleeps(p.pid)) for name, p in procs.items()}
    start = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - start
    return {
        name: {
            "core_percent": 100 * (cpu_seconds(p.pid) - before[name][0]) / wall,
            "wakeups_per_s": (sleeps(p.pid) - before[name][1]) / wall,
        }
        for name, p in procs.items()
    }


def free_udp_channel() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"aeron:udp?endpoint=127.0.0.1:{s.getsockname()[1]}"


def run_scenario(
    name: str, seconds: float, pyaeron_python: str | None = None
) -> dict[str, dict[str, float]]:
    me = os.path.abspath(__file__)
    procs: dict[str, subprocess.Popen] = {}
    dir = None
    try:
        if name in ("standalone", AERON_CLIENT):
            dir = tempfile.mkdtemp(prefix="aeronio-idle-", dir="/dev/shm")
            shutil.rmtree(dir)
            procs["driver"] = spawn("-m", "aeronio.cli", "driver", "--dir", dir)
            wait_ready(procs["driver"], "the driver")
        if name == "standalone":
            for side in ("pub", "sub"):
                procs[side] = spawn(me, "--child", side, dir)
            for side in ("pub", "sub"):
                wait_ready(procs[side], side)
        elif name == AERON_CLIENT:
            procs["aeron"] = subprocess.Popen(
                [pyaeron_python, "-c", PYAERON_CHILD, dir],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            wait_ready(procs["aeron"], "the Aeron client")
        else:
            role = {"asyncio 10/s": "asyncio", "embedded": "embedded"}.get(name)
            role = role or ("ticking" if name == "1 ms timer" else "embedded-udp")
            procs["process"] = spawn(me, "--child", role, free_udp_channel())
            wait_ready(procs["process"], name)
        return measure(procs, seconds)
    finally:
        for key, proc in procs.items():
            if proc.poll() is None and key != "driver":
                proc.stdin.write("\n")
                proc.stdin.flush()
        for key, proc in procs.items():
            if key == "driver":
                proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if dir is not None:
            shutil.rmtree(dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per scenario (median shown)")
    parser.add_argument("--json", metavar="FILE", help="also write every run as JSON")
    parser.add_argument(
        "--pyaeron-python", metavar="PY", help="a Python with pyaeron: adds `aeron client`"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(*args.child))
        return
    results: dict[str, list] = {}
    print(
        f"idle CPU over {args.seconds:g} s per run, median of {args.repeats} runs (min..max), "
        f"{os.cpu_count()} cores"
    )
    print(f"{'scenario':14} {'process':8} {'% of a core':>24} {'wake-ups/s':>11}")
    scenarios = SCENARIOS + ((AERON_CLIENT,) if args.pyaeron_python else ())
    for name in scenarios:
        runs = results[name] = [
            run_scenario(name, args.seconds, args.pyaeron_python) for _ in range(args.repeats)
        ]
        for process in runs[0]:
            shares = sorted(run[process]["core_percent"] for run in runs)
            wakeups = statistics.median(run[process]["wakeups_per_s"] for run in runs)
            print(
                f"{name:14} {process:8} {statistics.median(shares):8.3f}% "
                f"({shares[0]:.3f}..{shares[-1]:.3f}) {wakeups:11.1f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": args.seconds, "runs": results}, f, indent=2)


if __name__ == "__main__":
    main()
