"""The `aeronio` command: `demo` (IPC publisher and subscriber on an embedded driver) and
`logdump FILE` (a log buffer's metadata and frames)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import aeronio
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.logbuffer.logdump import dump_log


async def run_demo(count: int, size: int, stream_id: int, out=sys.stdout) -> None:
    """Publish `count` messages of `size` bytes over aeron:ipc and receive them all."""
    async with aeronio.connect() as aeron:
        subscription = await aeron.add_subscription("aeron:ipc", stream_id)
        publication = await aeron.add_publication("aeron:ipc", stream_id)
        while not subscription.images:
            await asyncio.sleep(0.001)
        print(f"driver dir {aeron.driver_dir}", file=out)
        print(
            f"publication session {publication.session_id} stream {stream_id}, "
            f"term length {publication.term_length}, initial term id {publication.initial_term_id}",
            file=out,
        )
        payload = bytearray(size)

        async def publish() -> None:
            for i in range(count):
                payload[:8] = i.to_bytes(8, "little")
                await publication.offer(payload)

        start = time.perf_counter()
        producer = asyncio.create_task(publish())
        received = 0
        async for message in subscription:
            if int.from_bytes(message.data[:8], "little") != received:
                raise RuntimeError(f"message {received} arrived out of order")
            received += 1
            if received == count:
                break
        await producer
        elapsed = time.perf_counter() - start
        image = subscription.images[0]
        rate = count / elapsed
        print(
            f"{count} messages of {size} B in {elapsed:.3f} s: {rate / 1e6:.2f} M msg/s, "
            f"{rate * size / 1e6:.1f} MB/s (await offer + async for, one loop)",
            file=out,
        )
        print(
            f"positions: pub-pos {publication.position}, sub-pos {image.position}, "
            f"pub-lmt {publication.position_limit}",
            file=out,
        )
        for info in aeron.counters.for_each():
            if info.type_id != 0 or info.value:
                print(f"{info.id:4d}: {info.value:>16,} - {info.label}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aeronio", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="IPC publisher and subscriber on an embedded driver")
    demo.add_argument("--count", type=int, default=1_000_000, help="messages to send")
    demo.add_argument("--size", type=int, default=32, help="message size in bytes (>= 8)")
    demo.add_argument("--stream-id", type=int, default=1001)
    logdump = commands.add_parser("logdump", help="print a log buffer's metadata and frames")
    logdump.add_argument("file")
    logdump.add_argument("--max-frames", type=int, default=100, help="frames shown per term")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.size < 8 or args.count < 1:
            parser.error("--size must be at least 8 and --count at least 1")
        asyncio.run(run_demo(args.count, args.size, args.stream_id))
    elif args.command == "logdump":
        log = LogBuffers.open(args.file)
        try:
            dump_log(log, args.max_frames, sys.stdout)
        finally:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
