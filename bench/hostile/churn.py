"""Churn against a standalone driver: what it (and a client) hold before and after.

    python -m bench.hostile.churn [--cycles 10000] [--clients 200]

1. One client adds and closes an IPC and a UDP publication and subscription `--cycles` times
   (each image connected and one message received), with the garbage collector off.
2. `--clients` client processes (10 at a time) each add an IPC and a UDP publication and
   subscription; half of them are SIGKILLed, the others close.
Then, once the driver's counters are back to the baseline, the driver's and the first client's
fds, RSS and mapped logs (deleted ones apart) are printed as JSON, before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import sys
import time

import aeronio
from bench.children import free_port, progress
from tests.support.holdings import allocated_counters, held
from tests.support.procs import IPC, Procs, module_argv

STREAM = 7
DRIVER_OPTIONS = (
    "--term-length", "65536", "--ipc-term-length", "65536",
    "--client-liveness-timeout-ns", "2000000000",
    "--publication-linger-ns", "100000000",
)  # fmt: skip


async def cycle(aeron: aeronio.Aeron, channel: str) -> None:
    """A publication and a subscription that exchange a message and close (and are let go: a
    closed publication or image still held keeps its log mapped)."""
    subscription = await aeron.add_subscription(channel, STREAM)
    publication = await aeron.add_publication(channel, STREAM)
    await subscription.wait_connected(10)
    await publication.offer(b"churn", timeout=10)
    message = await asyncio.wait_for(subscription.receive(), 10)
    assert message.data == b"churn"
    await publication.close()
    await subscription.close()


async def client(dir: str, port: int) -> None:
    """A client process of phase 2: its streams, then "ready", then wait for stdin to close."""
    udp = f"aeron:udp?endpoint=127.0.0.1:{port}"
    async with aeronio.connect(dir, driver_timeout_s=10) as aeron:
        for channel in (IPC, udp):
            await aeron.add_subscription(channel, STREAM)
            await aeron.add_publication(channel, STREAM)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def _settle(dir: str, baseline: int, timeout: float = 120.0) -> float:
    """Seconds until the driver's allocated counters are back to `baseline`."""
    start = time.monotonic()
    while allocated_counters(dir) != baseline:
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"counters {allocated_counters(dir)} != baseline {baseline}")
        await asyncio.sleep(0.1)
    return time.monotonic() - start


async def main(cycles: int, clients: int) -> dict:
    procs = Procs()
    try:
        dir = procs.new_dir()
        driver = procs.driver(dir, *DRIVER_OPTIONS)
        report: dict = {"cycles": cycles, "clients": clients}
        async with aeronio.connect(dir, driver_timeout_s=10) as aeron:
            me = os.getpid()
            await (await aeron.add_subscription(IPC, STREAM)).close()  # its heartbeat counted
            baseline = allocated_counters(dir)
            report["before"] = {"driver": held(driver.pid, dir), "client": held(me, dir)}
            report["counters_baseline"] = baseline
            udp = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
            gc.disable()
            start = time.monotonic()
            for i in range(cycles):
                await cycle(aeron, IPC)
                await cycle(aeron, udp)
                if i % 1000 == 999:
                    progress(f"{i + 1} cycles, {time.monotonic() - start:.0f} s")
            report["cycles_s"] = round(time.monotonic() - start, 1)
            report["settle_after_cycles_s"] = round(await _settle(dir, baseline), 1)
            report["after_cycles"] = {"driver": held(driver.pid, dir), "client": held(me, dir)}
            gc.enable()

            start = time.monotonic()
            for batch in range(0, clients, 10):
                children = [
                    procs.spawn(
                        [*module_argv("bench.hostile.churn"), "--client", dir, str(free_port())],
                        f"client-{batch + i}",
                        stdin=True,
                    )
                    for i in range(min(10, clients - batch))
                ]
                for child in children:
                    await child.aexpect("ready", timeout=60)
                for i, child in enumerate(children):
                    if i % 2:
                        child.send_signal(signal.SIGKILL)
                    else:
                        child.release()  # stdin closed: it closes its client and exits
                for child in children:
                    await child.await_exit(60)
            report["clients_s"] = round(time.monotonic() - start, 1)
            report["settle_after_clients_s"] = round(await _settle(dir, baseline), 1)
            await asyncio.sleep(2)  # past the linger and image liveness: an idle driver
            report["after_clients"] = {"driver": held(driver.pid, dir)}
            report["counters_after"] = allocated_counters(dir)
        return report
    finally:
        procs.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--client", nargs=2, metavar=("DIR", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(client(args.client[0], int(args.client[1])))
    else:
        print(json.dumps(asyncio.run(main(args.cycles, args.clients)), indent=1))
