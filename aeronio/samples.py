"""`aeronio ping`, `pong` and `rate`: measure a machine and a network as Aeron's samples do
(Ping/Pong, RateSubscriber), with the awaitable API.

Ping sends a message on the ping channel and waits for its echo on the pong channel before
sending the next; pong echoes whatever arrives. Each runs on the driver of `--dir` or, without
one, on an embedded driver of its own (then only UDP channels join two processes). Rate counts
what arrives on a channel and prints messages/s and MB/s each interval.
"""

from __future__ import annotations

import asyncio
import struct
import sys
import time
from typing import TextIO

import numpy as np

import aeronio

PING_CHANNEL = "aeron:udp?endpoint=localhost:20123"
PONG_CHANNEL = "aeron:udp?endpoint=localhost:20124"
PING_STREAM, PONG_STREAM = 1002, 1003
_SEQ = struct.Struct("<q")


async def pong(
    dir: str | None, ping_channel: str, ping_stream: int, pong_channel: str, pong_stream: int,
    count: int | None = None, out: TextIO = sys.stdout,
) -> int:  # fmt: skip
    """Echo every message of the ping stream on the pong stream (`count` of them, or forever)."""
    async with aeronio.connect(dir) as aeron:
        pings = await aeron.add_subscription(ping_channel, ping_stream)
        replies = await aeron.add_exclusive_publication(pong_channel, pong_stream)
        print(f"pong: echoing {ping_channel} stream {ping_stream} to {pong_channel} "
              f"stream {pong_stream}", file=out, flush=True)  # fmt: skip
        echoed = 0
        while echoed != count:
            try:
                async for message in pings:
                    await replies.offer(message.data)
                    echoed += 1
                    if echoed == count:
                        break
            except aeronio.ImageUnavailableError as lost:  # a ping gone: say so, echo the rest
                print(f"pong: {lost}", file=out, flush=True)
        return echoed


async def ping(
    dir: str | None, ping_channel: str, ping_stream: int, pong_channel: str, pong_stream: int,
    count: int, size: int, warmup: int, out: TextIO = sys.stdout, timeout: float = 30.0,
) -> np.ndarray:  # fmt: skip
    """`warmup` then `count` round trips of `size`-byte messages; the timed round trips (ns),
    and a percentile summary printed. Says what it waits for; TimeoutError naming the pong's
    streams when none connects within `timeout` s, or a round trip when it is not answered."""
    if size < _SEQ.size:
        raise ValueError(f"size {size} must be at least {_SEQ.size}")
    echo = f"echoing {ping_channel} stream {ping_stream} to {pong_channel} stream {pong_stream}"
    async with aeronio.connect(dir) as aeron:
        replies = await aeron.add_subscription(pong_channel, pong_stream)
        pings = await aeron.add_exclusive_publication(ping_channel, ping_stream)
        print(f"ping: waiting up to {timeout:g} s for a pong {echo}", file=out, flush=True)
        try:
            await pings.wait_connected(timeout)
            await replies.wait_connected(timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no pong {echo} connected within {timeout:g} s (start `aeronio pong` with "
                "the same channels, or give a longer --timeout)"
            ) from None
        message = bytearray(size)
        rtts = np.empty(count, dtype=np.int64)
        clock = time.perf_counter_ns
        for i in range(-warmup, count):
            _SEQ.pack_into(message, 0, i)
            start = clock()
            try:
                async with asyncio.timeout(timeout):  # a pong gone leaves nobody to offer to
                    await pings.offer(message)
                    reply = await replies.receive()
            except TimeoutError:
                raise TimeoutError(
                    f"round trip {i + warmup} of {warmup + count}: no answer from the pong "
                    f"within {timeout:g} s"
                ) from None
            end = clock()
            if _SEQ.unpack_from(reply.data)[0] != i:
                raise RuntimeError(f"round trip {i} answered by {_SEQ.unpack_from(reply.data)[0]}")
            if i >= 0:
                rtts[i] = end - start
    print(summary(rtts, size), file=out)
    return rtts


def summary(rtts: np.ndarray, size: int) -> str:
    """Round-trip percentiles in microseconds, as Aeron's Ping prints its histogram."""
    us = rtts / 1000.0
    points = [50, 90, 99, 99.9]
    cells = ", ".join(f"p{p:g} {np.percentile(us, p):.1f}" for p in points)
    return (
        f"{len(us):,} round trips of {size} B (us): min {us.min():.1f}, {cells}, "
        f"max {us.max():.1f}, mean {us.mean():.1f}"
    )


async def rate(
    dir: str | None, channel: str, stream: int, interval: float, reports: int | None,
    out: TextIO = sys.stdout,
) -> list[tuple[float, float]]:  # fmt: skip
    """Print messages/s and MB/s of what arrives every `interval` s (`reports` times, or
    forever); returns them."""
    got: list[tuple[float, float]] = []
    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(channel, stream)
        batches = subscription.batches()
        messages = payload = 0
        start = time.monotonic()
        print(f"rate: {channel} stream {stream}", file=out, flush=True)
        while reports is None or len(got) < reports:
            try:
                left = max(0.0, start + interval - time.monotonic())
                batch = await asyncio.wait_for(anext(batches), left)
                messages += len(batch)
                payload += sum(len(m.data) for m in batch)
            except TimeoutError:
                pass
            except aeronio.ImageUnavailableError as lost:  # a publisher gone: say so, go on
                print(f"rate: {lost}", file=out, flush=True)
            now = time.monotonic()
            if now - start >= interval:
                got.append((messages / (now - start), payload / (now - start) / 1e6))
                print(f"{got[-1][0]:,.0f} msgs/s, {got[-1][1]:.2f} MB/s", file=out, flush=True)
                messages = payload = 0
                start = now
    return got
