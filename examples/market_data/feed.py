"""The feed: synthetic ticks (market.py) published as arrays of records on two channels at once,
IPC to the other processes of this host's driver and UDP multicast.

    python examples/market_data/feed.py --dir DRIVER_DIR [--multicast GROUP:PORT] [--symbols N]
        [--rate TICKS_PER_S] [--speed X] [--seed N]

Says `ready` once every publication is connected, `status` every second, and publishes until
SIGTERM or SIGINT; then says `done`: per channel, the ticks appended, the CRC-32 of their bytes
and the final position. Those figures are exact even when the signal lands mid-batch, so the
consumers can check theirs against them.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import zlib

import numpy as np
from market import Market
from options import add_market_options, multicast
from status import Meter, report, run_script, say
from ticks import IPC_TICKS, MINUTE_NS, TICK, TICKS_STREAM, multicast_ticks

import aeronio

STEP_S = 0.01  # a batch of ticks every 10 ms


class Channel:
    """A publication and what it has appended: count and CRC-32 of the records."""

    def __init__(self, name: str, publication: aeronio.ExclusivePublication):
        self.name = name
        self.publication = publication
        self.count = 0
        self.crc = 0

    async def offer(self, records: np.ndarray) -> None:
        """Append every record (rows of a 2-D uint8 array), waiting through back-pressure;
        the tally moves with each part appended, so a cancellation leaves it exact."""
        start = 0
        while start < len(records):
            appended = self.publication.try_offer_batch(records, start)
            if appended > 0:
                self.crc = zlib.crc32(records[start : start + appended], self.crc)
                self.count += appended
                start += appended
            elif appended in (aeronio.CLOSED, aeronio.MAX_POSITION_EXCEEDED):
                raise aeronio.PublicationClosedError(f"{self.name}: result {appended}")
            else:  # back-pressured, not connected, admin action: the window opens soon
                await asyncio.sleep(0.001)

    def summary(self) -> dict:
        """Ticks appended, their CRC-32, the position after them."""
        return {"count": self.count, "crc": self.crc, "position": self.publication.position}


async def publish(channels: list[Channel], market: Market, meter: Meter) -> None:
    """A batch of ticks every STEP_S on every channel, until cancelled."""
    next_step = time.monotonic()
    while True:
        ticks = market.step(time.time_ns())
        if len(ticks):
            records = ticks.view(np.uint8).reshape(len(ticks), TICK.itemsize)
            for channel in channels:
                await channel.offer(records)
            meter.add(len(ticks))
        # the next step STEP_S after this one, or at once if publishing took longer (the
        # market then makes the ticks of the whole time since)
        next_step = max(next_step + STEP_S, time.monotonic())
        await asyncio.sleep(next_step - time.monotonic())


async def main(args: argparse.Namespace) -> None:
    """Publish until cancelled, then say `done`."""
    async with aeronio.connect(args.dir) as aeron:
        channels = [Channel("ipc", await aeron.add_exclusive_publication(IPC_TICKS, TICKS_STREAM))]
        if args.multicast:
            udp = await aeron.add_exclusive_publication(
                multicast_ticks(*args.multicast), TICKS_STREAM
            )
            channels.append(Channel("udp", udp))
        for channel in channels:
            await channel.publication.wait_connected(30)
        start_ns = time.time_ns() // MINUTE_NS * MINUTE_NS
        market = Market(args.symbols, args.rate, args.speed, start_ns, args.seed)
        meter = Meter()
        say("ready", {c.name: c.publication.session_id for c in channels})

        def status() -> dict:
            positions = {c.name: c.publication.position for c in channels}
            return {"count": meter.count, "rate": meter.rate(), "positions": positions}

        reporter = asyncio.create_task(report(status))
        try:
            await publish(channels, market, meter)
        finally:
            reporter.cancel()
            say("done", {c.name: c.summary() for c in channels})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="the standalone driver's directory")
    parser.add_argument(
        "--multicast", type=multicast(), metavar="GROUP:PORT", help="also publish there"
    )
    add_market_options(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
