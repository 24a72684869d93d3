"""A replay goes on while the event loop's thread is busy: the replayer's thread copies the
recording into the replay's log (aeronio/archive/replayer.py) with the GIL released, beside a
subscriber that never yields to the loop. The driver is standalone (a process of its own), so
that the publisher limit moves while this process's loop does not turn."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

import aeronio
from aeronio import archive
from tests.support.procs import procs_fixture, wait_recorded

TERM = 64 * 1024
STREAM = 1001
CHANNEL = f"aeron:ipc?term-length={TERM}"

procs = pytest.fixture(procs_fixture, name="procs")


async def test_a_replay_goes_on_while_the_event_loop_is_blocked(procs, tmp_path):
    dir = procs.new_dir()
    procs.driver(dir, "--ipc-term-length", str(TERM))
    rng = random.Random(5)
    payloads = [
        i.to_bytes(4, "little") + rng.randbytes(rng.choice([28, 500, 3000])) for i in range(1500)
    ]
    async with (
        aeronio.connect(dir) as aeron,
        archive.Archive.launch(
            aeron, archive_dir=tmp_path / "archive", segment_file_length=4 * TERM,
            **archive.LOCAL_ARCHIVE,
        ),
        archive.connect(aeron, **archive.LOCAL) as client,
    ):  # fmt: skip
        await client.start_recording(CHANNEL, STREAM)
        publication = await aeron.add_exclusive_publication(CHANNEL, STREAM)
        async with asyncio.timeout(30):
            for payload in payloads:
                await publication.offer(payload)
        end = publication.position
        assert end > 20 * TERM // 2  # many windows of the replay's publication
        await wait_recorded(client, 0, end)
        await client.stop_recording(CHANNEL, STREAM)
        replay = await client.replay(0, 0, end, "aeron:ipc", 2002)
        [image] = replay.images
        messages: list = []
        async with asyncio.timeout(30):  # the first: REPLAYING, on the replayer's thread now
            while not image.poll_messages(messages, 64):
                await asyncio.sleep(0)
        # The event loop's thread now polls and never yields: the archive's conductor and the
        # client's do not run until every message came (or the deadline).
        deadline = time.monotonic() + 60
        while len(messages) < len(payloads) and time.monotonic() < deadline:
            image.poll_messages(messages, 64)
        assert len(messages) == len(payloads), f"{len(messages)} with the loop blocked"
        assert [message.data for message in messages] == payloads
        await replay.close()
