"""A subscriber process stopped (SIGSTOP) past the driver's client liveness timeout, then
resumed: what it is told, how soon, and what it missed.

    python -m bench.hostile.stopped_subscriber [--stop-s 15]

A standalone driver (default 10 s client liveness timeout), an IPC publisher here offering
numbered messages as fast as it may, a subscriber process polling them. The subscriber is
stopped for `--stop-s` seconds, then resumed; the report (JSON) gives when the driver timed it
out, what its `poll` raised after it resumed and how long that took, whether its
unavailable-image handler ran, its images left, and the messages it received and missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import struct
import time

import aeronio
from aeronio.counters import SystemCounters
from tests.support.child import ChildError
from tests.support.procs import IPC, Procs, module_argv, system_counters

STREAM = 11
TOLD_WITHIN_S = 30.0  # not told by then: reported as never told


async def subscriber(dir: str) -> None:
    """The subscriber process: poll until a poll raises, then report."""
    received = {"count": 0, "last": -1}
    unavailable = []

    def on_fragment(buffer, header) -> None:
        received["count"] += 1
        received["last"] = struct.unpack_from("<q", buffer)[0]

    async with aeronio.connect(dir, driver_timeout_s=30) as aeron:
        subscription = await aeron.add_subscription(
            IPC, STREAM, unavailable_image=lambda image: unavailable.append(image.is_closed)
        )
        await subscription.wait_connected(30)
        print("ready", flush=True)
        try:
            while True:
                if not subscription.poll(on_fragment, 100):
                    await asyncio.sleep(0.001)
        except aeronio.AeronError as e:
            told = {
                "raised": type(e).__name__,
                "message": str(e),
                "unavailable_handler_ran": unavailable,
                "images_left": len(subscription.images),
                "received": received["count"],
                "last_received": received["last"],
            }
            print("told", json.dumps(told), flush=True)


async def main(stop_s: float) -> dict:
    procs = Procs()
    try:
        dir = procs.new_dir()
        procs.driver(dir)
        async with aeronio.connect(dir, driver_timeout_s=10) as aeron:
            publication = await aeron.add_publication(IPC, STREAM)
            child = procs.spawn(
                [*module_argv("bench.hostile.stopped_subscriber"), "--sub", dir], "sub"
            )
            await child.aexpect("ready", timeout=60)
            sent = 0
            stop = asyncio.Event()

            async def publish() -> None:
                nonlocal sent
                while not stop.is_set():
                    if publication.try_offer(struct.pack("<q", sent)) > 0:
                        sent += 1
                    else:
                        await asyncio.sleep(0.0005)
                    if sent % 256 == 0:
                        await asyncio.sleep(0)

            publisher = asyncio.create_task(publish())
            await asyncio.sleep(1)
            timeouts = system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS]
            sent_at_stop = sent
            stopped = time.monotonic()
            child.send_signal(signal.SIGSTOP)
            timed_out_s = None
            while time.monotonic() - stopped < stop_s:
                if timed_out_s is None and (
                    system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS] > timeouts
                ):
                    timed_out_s = time.monotonic() - stopped
                await asyncio.sleep(0.05)
            sent_at_resume = sent
            child.send_signal(signal.SIGCONT)
            resumed = time.monotonic()
            try:
                told = json.loads(await child.aexpect("told", timeout=TOLD_WITHIN_S))
                told_after_s = round(time.monotonic() - resumed, 3)
            except ChildError:
                told, told_after_s = {"raised": None, "last_received": -1, "received": 0}, None
            stop.set()
            await publisher
            if told["raised"] is None:
                child.kill()
            await child.await_exit(30)
        return {
            "stop_s": stop_s,
            "driver_timed_it_out_after_s": None if timed_out_s is None else round(timed_out_s, 2),
            "told_after_resume_s": told_after_s,
            **told,
            "sent_before_stop": sent_at_stop,
            "sent_while_stopped": sent_at_resume - sent_at_stop,
            "sent_in_all": sent,
            "missed_up_to_last_received": told["last_received"] + 1 - told["received"],
        }
    finally:
        procs.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stop-s", type=float, default=15.0)
    parser.add_argument("--sub", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sub:
        asyncio.run(subscriber(args.sub))
    else:
        print(json.dumps(asyncio.run(main(args.stop_s)), indent=1))
