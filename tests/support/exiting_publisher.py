"""A child that publishes on UDP through its own embedded driver and leaves at once.

argv: channel stream count size how [linger_ns]. It offers `count` messages (message i is `size`
bytes, its first 8 bytes i), says `offered POSITION` and then, by `how`:
- `exit`: leaves `async with aeronio.connect()`, says `closed SECONDS` (how long leaving took)
  and returns (a normal exit), under asyncio.run;
- `sigterm`: waits under `aeronio.run` until a SIGTERM unwinds it.
The embedded driver's `publication_linger_ns` is `linger_ns` when given. Its warnings go to
stderr (logging's last resort).
"""

from __future__ import annotations

import asyncio
import struct
import sys
import time

import aeronio
from tests.support.procs import say


def message(i: int, size: int) -> bytes:
    return struct.pack("<q", i) + bytes((i + k) % 251 for k in range(size - 8))


async def publish(channel: str, stream: int, count: int, size: int, how: str, options) -> None:
    async with aeronio.connect(**options) as aeron:
        publication = await aeron.add_publication(channel, stream)
        await publication.wait_connected(timeout=30)
        for i in range(count):
            await publication.offer(message(i, size), timeout=30)
        say("offered", publication.position)
        if how == "sigterm":
            await asyncio.Event().wait()
        offered = time.monotonic()
    say("closed", f"{time.monotonic() - offered:.3f}")


def main() -> None:
    channel, stream, count, size, how, *linger = sys.argv[1:]
    options = {"publication_linger_ns": int(linger[0])} if linger else {}
    work = publish(channel, int(stream), int(count), int(size), how, options)
    if how == "sigterm":
        aeronio.run(work)
    else:
        asyncio.run(work)


if __name__ == "__main__":
    main()
