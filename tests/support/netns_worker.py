"""One side of the loss tests, run as `python tests/netns_worker.py ROLE JSON-KWARGS` inside a
network namespace: an embedded media driver on a directory of its own (removed when it closes)
and a publication or a subscription, talking to the test on stdout (`tag json` lines, see
procs.say).

Message `seq` is `seq` as a little-endian u64 followed by `length(seq) - 8` bytes of a fixed
pseudo-random block from an offset derived from `seq`, lengths 16..200: the same messages as
tests/java/SequenceMessages.java makes and checks.
"""

from __future__ import annotations

import asyncio
import sys
import time

from tests.support.procs import read_stdin_line, say

MASK = (1 << 64) - 1
MIN_LENGTH = 16
MAX_LENGTH = 200
BLOCK_LENGTH = 65536
SALT = 0x6A09E667F3BCC908


def mix(x: int) -> int:
    """splitmix64's finaliser (SequenceMessages.mix)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


BLOCK = bytes(mix(i) & 0xFF for i in range(BLOCK_LENGTH))


def message(seq: int) -> bytes:
    h = mix(seq ^ SALT)
    length = MIN_LENGTH + (h & 0xFFFF) % (MAX_LENGTH - MIN_LENGTH + 1)
    start = (h >> 32) % (BLOCK_LENGTH - MAX_LENGTH)
    return seq.to_bytes(8, "little") + BLOCK[start : start + length - 8]


def system_counters(aeron) -> dict[str, int]:
    """The driver's system counters (Aeron's and aeronio's own), label -> value."""
    from aeronio.counters import SystemCounters

    types = {descriptor.type_id for descriptor in SystemCounters}
    return {info.label: info.value for info in aeron.counters.for_each() if info.type_id in types}


async def publish_all(publication, count: int, stats: dict[str, int]) -> None:
    """Offer messages 0..count-1, awaiting through back-pressure and yielding every 256 (the
    driver on this loop sends what is appended); `stats` counts "sent" and "waits" as it goes.
    Says `published`."""
    start = time.monotonic()
    stats.update(sent=0, waits=0)
    try_offer, offer = publication.try_offer, publication.offer
    for seq in range(count):
        data = message(seq)
        if try_offer(data) <= 0:
            stats["waits"] += 1
            await offer(data, timeout=60)
        stats["sent"] = seq + 1
        if not seq & 0xFF:
            await asyncio.sleep(0)
    say(
        "published",
        {"count": count, "position": publication.position, "seconds": time.monotonic() - start},
    )


async def publisher(dir: str, channel: str, stream: int, count: int) -> None:
    """Publish messages 0..count-1 once connected, say `published`, then wait for a line on
    stdin and say `counters` before closing (retransmits go on until then)."""
    import aeronio

    async with aeronio.MediaDriver.launch(dir) as driver, aeronio.connect(driver.dir) as aeron:
        publication = await aeron.add_publication(channel, stream)
        deadline = time.monotonic() + 30
        while not publication.is_connected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{channel} not connected within 30 s")
            await asyncio.sleep(0.005)
        say("connected", {"session_id": publication.session_id})
        await publish_all(publication, count, {})
        await read_stdin_line()
        say("counters", system_counters(aeron))


async def subscriber(
    dir: str, channel: str, stream: int, count: int, timeout: float, stay: bool = False
) -> None:
    """Subscribe, say `ready`, then check every message: seq 0..count-1 exactly once and in
    order, byte-identical. Says `progress` every second and one `result` when all arrived (and
    half a second more brought nothing extra) or `timeout` seconds passed; with `stay`, then
    waits for a line on stdin before closing (its driver directory is there to inspect)."""
    import aeronio

    received = next_seq = error_count = 0
    errors: list[str] = []
    sessions: set[int] = set()
    first = last = 0.0

    def error(text: str) -> None:
        nonlocal error_count
        error_count += 1
        if len(errors) < 20:
            errors.append(text)

    async with aeronio.MediaDriver.launch(dir) as driver, aeronio.connect(driver.dir) as aeron:
        subscription = await aeron.add_subscription(channel, stream)
        say("ready", {})

        async def receive(until: int) -> None:
            nonlocal received, next_seq, first, last
            async for msg in subscription:
                data = msg.data
                last = time.monotonic()
                if not received:
                    first = last
                received += 1
                sessions.add(msg.header.session_id)
                if len(data) < 8:
                    error(f"message {received}: only {len(data)} bytes")
                    continue
                seq = int.from_bytes(data[:8], "little")
                if seq != next_seq:
                    error(f"message {received}: seq {seq}, expected {next_seq}")
                if data != message(seq):
                    error(f"message {received}: seq {seq}: {len(data)} bytes, not those sent")
                next_seq = seq + 1
                if received >= until and next_seq == count:
                    return

        async def progress() -> None:
            while True:
                await asyncio.sleep(1)
                say("progress", {"received": received})

        reporter = asyncio.create_task(progress())
        try:
            await asyncio.wait_for(receive(count), timeout)
        except TimeoutError:
            error(f"timed out after {timeout} s with {received} of {count} messages")
        else:
            before = received
            try:
                await asyncio.wait_for(receive(received + 1), 0.5)
            except TimeoutError:
                pass
            if received != before:
                error(f"{received - before} extra messages after the last one")
        reporter.cancel()
        say(
            "result",
            {
                "received": received,
                "next_seq": next_seq,
                "error_count": error_count,
                "errors": errors,
                "sessions": sorted(sessions),
                "seconds": last - first,
                "counters": system_counters(aeron),
            },
        )
        if stay:
            await read_stdin_line()


ROLES = {"publisher": publisher, "subscriber": subscriber}

if __name__ == "__main__":
    import json

    asyncio.run(ROLES[sys.argv[1]](**json.loads(sys.argv[2])))
