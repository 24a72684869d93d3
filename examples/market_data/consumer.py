"""A consumer: per-symbol top of book and VWAP (book.py) from the feed's ticks, over IPC or UDP
multicast, read in place with `batch_poll` (no copy, no Python per tick).

    python examples/market_data/consumer.py --dir DRIVER_DIR [--multicast GROUP:PORT]
        [--summary FILE]

Says `ready` with its subscription's registration id (run.py finds its position among the
driver's counters by it), `status` every second (ticks, rate, the age of the newest tick when it
arrived), and at SIGTERM or SIGINT `final`: the ticks received, the CRC-32 of their bytes and
the breaks in their sequence numbers; `--summary` also gets the book, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import zlib
from pathlib import Path

import numpy as np
from book import Book
from options import multicast
from status import Meter, report, run_script, say
from ticks import IPC_TICKS, TICKS_STREAM, multicast_ticks, receive

import aeronio


class Consumer:
    """The book and a tally of what came: count, CRC-32, sequence breaks, lag."""

    def __init__(self) -> None:
        self.book = Book()
        self.meter = Meter()
        self.crc = 0
        self.next_seq = 0
        self.breaks = 0
        self.lag_ns = 0  # the largest age of a batch's newest tick since the last status

    def take(self, ticks: np.ndarray) -> None:
        """A batch of ticks (a view over the log, valid during the call)."""
        self.lag_ns = max(self.lag_ns, time.time_ns() - int(ticks["wall"][-1]))
        self.book.update(ticks)
        self.crc = zlib.crc32(np.ascontiguousarray(ticks), self.crc)
        seq = ticks["seq"]
        self.breaks += int(np.count_nonzero(np.diff(seq, prepend=self.next_seq - 1) != 1))
        self.next_seq = int(seq[-1]) + 1
        self.meter.add(len(ticks))

    def status(self) -> dict:
        """The `status` payload: ticks, rate, lag in ms (the lag starts over)."""
        lag_ms, self.lag_ns = self.lag_ns / 1e6, 0
        return {"count": self.meter.count, "rate": self.meter.rate(), "lag_ms": lag_ms}

    def final(self) -> dict:
        """The `final` payload: ticks, CRC-32, sequence breaks."""
        return {"count": self.meter.count, "crc": self.crc, "breaks": self.breaks}


async def main(args: argparse.Namespace) -> None:
    """Subscribe, say `ready`, take ticks until cancelled, then report."""
    channel = IPC_TICKS if args.multicast is None else multicast_ticks(*args.multicast)
    consumer = Consumer()
    async with aeronio.connect(args.dir) as aeron:
        subscription = await aeron.add_subscription(channel, TICKS_STREAM)
        say("ready", {"subscription": subscription.registration_id})
        reporter = asyncio.create_task(report(consumer.status))
        try:
            await receive(subscription, consumer.take)
        finally:
            reporter.cancel()
            if args.summary:
                summary = {**consumer.final(), "book": consumer.book.rows()}
                args.summary.write_text(json.dumps(summary))
            say("final", consumer.final())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="the standalone driver's directory")
    parser.add_argument(
        "--multicast",
        type=multicast(),
        metavar="GROUP:PORT",
        help="the feed's multicast channel (default: its IPC channel)",
    )
    parser.add_argument("--summary", type=Path, help="where to write the final book (JSON)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
