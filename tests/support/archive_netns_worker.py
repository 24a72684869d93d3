"""The sides of the replay-merge loss test, run as `python -m tests.support.archive_netns_worker
ROLE JSON-KWARGS` in a network namespace, each with an embedded media driver of its own:

- `live`: a live stream on a dynamic multi-destination-cast publication; messages
  0..count-1 (netns_worker.message) at a steady rate; says `published` with every message's
  position, then waits for a line on stdin.
- `joiner`: an archive recording the live stream (REMOTE, as a destination of it), and, once
  `join_after` messages are recorded, a late joiner's `replay_merge` on the same driver; says
  `result` with what it received.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from pathlib import Path

from tests.support.netns_worker import message, system_counters
from tests.support.procs import read_stdin_line, say


def digest(positions: list[int]) -> str:
    """A short fingerprint of a list of positions, to compare two sides' lists."""
    return hashlib.sha256(json.dumps(positions).encode()).hexdigest()


async def live(dir: str, channel: str, stream: int, count: int, per_ms: int) -> None:
    import aeronio

    async with aeronio.MediaDriver.launch(dir) as driver, aeronio.connect(driver.dir) as aeron:
        publication = await aeron.add_exclusive_publication(channel, stream)
        say("ready", {"session_id": publication.session_id})
        deadline = time.monotonic() + 30
        while not publication.is_connected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{channel} not connected within 30 s")
            await asyncio.sleep(0.005)
        from aeronio.counters import MDC_DESTINATIONS_TYPE_ID

        (destinations,) = [
            aeron.counters.counter(info.id)
            for info in aeron.counters.for_each()
            if info.type_id == MDC_DESTINATIONS_TYPE_ID
        ]
        positions, most = [], 0
        for seq in range(count):
            positions.append(await publication.offer(message(seq), timeout=60))
            if seq % per_ms == 0:
                await asyncio.sleep(0.001)
                most = max(most, destinations.get())
        say(
            "published",
            {"count": len(positions), "positions": digest(positions), "most_destinations": most},
        )
        await read_stdin_line()
        say("counters", system_counters(aeron))


async def joiner(
    dir: str,
    recording_channel: str,
    replay_destination: str,
    live_destination: str,
    stream: int,
    count: int,
    join_after: int,
) -> None:
    import aeronio
    from aeronio import archive

    async with aeronio.MediaDriver.launch(dir) as driver, aeronio.connect(driver.dir) as aeron:
        async with archive.Archive.launch(
            aeron,
            archive_dir=Path(dir) / "archive",  # removed with the driver's directory
            **archive.LOCAL_ARCHIVE,
        ) as arch:
            async with archive.connect(aeron, **archive.LOCAL) as client:
                await client.start_recording(
                    recording_channel, stream, archive.SourceLocation.REMOTE
                )
                say("ready")
                while not await client.list_recordings():
                    await asyncio.sleep(0.01)
                (recording,) = await client.list_recordings()
                # at least `join_after` messages recorded (each takes 64 bytes or more)
                while await client.get_recording_position(recording.recording_id) < 64 * join_after:
                    await asyncio.sleep(0.01)
                received: list[tuple[int, int]] = []
                errors: list[str] = []
                merge = client.replay_merge(
                    recording.recording_id, stream, replay_destination, live_destination
                )
                started = time.monotonic()
                replaying_at_end = None
                async for m in merge:
                    if len(received) == count - 2000:  # the live stream is still going
                        replaying_at_end = bool(arch.conductor.replays)
                    seq = int.from_bytes(m.data[:8], "little")
                    if m.data != message(seq):
                        errors.append(f"message {seq} differs")
                    received.append((seq, m.position))
                    if len(received) == count:
                        break
                try:  # a late duplicate would show now
                    extra = await asyncio.wait_for(merge.__anext__(), 0.5)
                    errors.append(f"extra message at {extra.position}")
                except TimeoutError:
                    pass
                await merge.aclose()
                seqs = [s for s, _ in received]
                wrong = next((i for i, s in enumerate(seqs) if s != i), None)
                say(
                    "result",
                    {
                        "received": len(seqs),
                        "replaying_2000_before_the_end": replaying_at_end,
                        "first_out_of_order": wrong,
                        "positions": digest([p for _, p in received]),
                        "errors": errors,
                        "seconds": time.monotonic() - started,
                        "counters": system_counters(aeron),
                    },
                )


if __name__ == "__main__":
    role, kwargs = sys.argv[1], json.loads(sys.argv[2])
    asyncio.run({"live": live, "joiner": joiner}[role](**kwargs))
