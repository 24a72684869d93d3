"""The archive in a process of its own (`aeronio archive serve`) on a standalone driver, with the
test process as its client, publisher and an independent subscriber: an archive SIGKILLed while
it records (recovery on restart and offline by `aeronio archive verify`, then extension), a
full disk under a recording, and the durable sync levels.

Every stream the archive records is also collected byte for byte by the test's own subscription
(`Collector`), so what the segment files hold is compared with what the stream carried.
Every wait is bounded; every child is SIGKILLed and reaped at teardown (see procs.Procs), and
the tmpfs is unmounted in a finally.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import aeronio
from aeronio import archive
from aeronio.archive import segments
from aeronio.logbuffer.descriptor import FRAME_ALIGNMENT
from tests.support.child import Child, child_env
from tests.support.procs import (
    Procs,
    await_until,
    cpu_seconds,
    make_payload,
    procs_fixture,
    wait_recorded,
)
from tests.support.tmpfs import mounted

TERM = 64 * 1024
SEGMENT = 128 * 1024
STREAM = 1001
CHANNEL = f"aeron:ipc?term-length={TERM}"
CLIENT = archive.LOCAL
# A SIGKILLed archive's subscriptions hold the publisher back until the driver times its client
# out: 5 s, short for that wait, long enough that this test's own client, its loop starved on a
# busy machine, is not timed out too (with 2 s one was, in CI, 2.4 s without a keepalive). A
# closed publication is gone soon after it drained.
DRIVER_OPTIONS = (
    "--ipc-term-length",
    str(TERM),
    "--client-liveness-timeout-ns",
    "5000000000",
    "--publication-linger-ns",
    "100000000",
)
DATA, PAD = 1, 0
END_FLAG = 0x40

procs = pytest.fixture(procs_fixture, name="procs")


# -- processes and tools ------------------------------------------------------------------------


async def start_archive(
    procs: Procs, driver_dir: str, archive_dir: str | Path, *options: str, name: str = "archive"
) -> Child:
    """`aeronio archive serve` on the driver of `driver_dir`, once it says it is ready."""
    args = [
        sys.executable, "-m", "aeronio.cli", "archive", "serve",
        "--dir", str(archive_dir), "--driver-dir", driver_dir,
        "--control-channel", "aeron:ipc",
        "--recording-events-channel", "aeron:ipc",
        *options,
    ]  # fmt: skip
    child = procs.spawn(args, name)
    ready = await child.aexpect("aeronio archive pid", timeout=20)
    assert ready.startswith(f"{child.pid} on {archive_dir} "), ready
    return child


async def kill_archive(child: Child) -> None:
    """SIGKILL, and reap (the catalog's lock goes with the process)."""
    await asyncio.to_thread(child.kill)
    assert child.proc.returncode == -signal.SIGKILL, child.describe()


async def stop_archive(child: Child) -> None:
    """SIGTERM: the archive closes (SIGKILL if it does not within 10 s) and exits 0."""
    await asyncio.to_thread(child.stop, signal.SIGTERM, 10.0)
    assert child.proc.returncode == 0, child.describe()


async def archive_tool(action: str, archive_dir: str | Path) -> subprocess.CompletedProcess:
    """`aeronio archive ACTION --dir DIR` to its end (in a thread: the loop keeps the test's
    client alive)."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "aeronio.cli", "archive", action, "--dir", str(archive_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        env=child_env(),
    )


def describe_run(run: subprocess.CompletedProcess) -> str:
    return f"{run.args}: exit {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"


def counter_by_prefix(aeron, prefix: str):
    """The one allocated counter whose label starts with `prefix` (CounterInfo), or None."""
    found = [info for info in aeron.counters.for_each() if info.label.startswith(prefix)]
    assert len(found) <= 1, found
    return found[0] if found else None


def rec_pos(aeron, recording_id: int) -> int | None:
    """The value of the recording's `rec-pos` counter, None while there is none."""
    info = counter_by_prefix(aeron, f"rec-pos: {recording_id} ")
    return None if info is None else aeron.counters.get_counter_value(info.id)


def stream_positions(aeron, stream_id: int) -> list[str]:
    """`label: value` of the stream's position counters (who holds it back)."""
    return [
        f"{info.label}: {aeron.counters.get_counter_value(info.id)}"
        for info in aeron.counters.for_each()
        if info.label.split(" ")[0] in ("pub-pos:", "pub-lmt:", "sub-pos:", "rec-pos:")
        and f" {stream_id} " in info.label
    ]


def archive_errors(aeron):
    """The running archive's `archive-errors - archiveId=...` counter (CounterInfo)."""
    info = counter_by_prefix(aeron, "archive-errors - archiveId=")
    assert info is not None, [i.label for i in aeron.counters.for_each()]
    return info


# -- the stream: a publisher and an independent collector of its bytes ---------------------------


class Publisher:
    """Offers make_payload(pub_id, 0), make_payload(pub_id, 1), ... until stopped or `limit`."""

    def __init__(self, publication, pub_id: int, limit: int | None = None):
        self.publication = publication
        self.pub_id = pub_id
        self.limit = limit
        self.sent = 0
        self.stopping = False
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self.stopping and (self.limit is None or self.sent < self.limit):
            result = self.publication.try_offer(make_payload(self.pub_id, self.sent))
            if result > 0:
                self.sent += 1
                if self.sent % 16 == 0:
                    await asyncio.sleep(0)
            elif result == aeronio.CLOSED:
                return
            else:
                await asyncio.sleep(0.001)

    async def stop(self) -> int:
        """Stop offering; the number of messages sent."""
        self.stopping = True
        await asyncio.wait_for(self.task, 10)
        return self.sent

    async def finish(self, timeout: float = 20) -> int:
        await asyncio.wait_for(self.task, timeout)
        return self.sent


class Collector:
    """What one image of a stream carries, as its terms hold it (PADs included), from its join
    position: the reference the segment files are compared with."""

    def __init__(self, subscription):
        self.subscription = subscription
        self.data = bytearray()
        self.start: int | None = None
        self.task = asyncio.create_task(self._run())

    @property
    def end(self) -> int | None:
        return None if self.start is None else self.start + len(self.data)

    def _poll(self) -> int:
        images = self.subscription.images
        if not images:
            return 0
        assert len(images) == 1, images
        image = images[0]

        def on_block(block, session_id, term_id) -> None:
            term_offset = int.from_bytes(block[8:12], "little")
            position = (term_id - image.initial_term_id) * image.term_length + term_offset
            if self.start is None:
                self.start = position
            assert position == self.end, (position, self.start, len(self.data))
            self.data += block

        return image.block_poll(on_block, 1 << 20)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0 if self._poll() else 0.001)

    def _at(self, position: int) -> bool:
        if self.task.done():
            self.task.result()  # what stopped it
        return self.end is not None and self.end >= position

    async def reach(self, position: int, timeout: float = 10) -> None:
        await await_until(
            lambda: self._at(position),
            timeout,
            lambda: f"the collector is at {self.end}, not at {position}",
        )

    def bytes(self, start: int, stop: int) -> bytes:
        assert self.start is not None and self.start <= start <= stop <= self.end
        return bytes(self.data[start - self.start : stop - self.start])

    def messages(self, stop: int) -> list[tuple[bytes, int]]:
        """(message, position after it) of every whole message that ends by `stop` (a message
        whose last fragment is after it is not one)."""
        out: list[tuple[bytes, int]] = []
        data, offset, assembling = self.data, 0, bytearray()
        while offset < len(data) and self.start + offset < stop:
            length = int.from_bytes(data[offset : offset + 4], "little")
            flags, kind = data[offset + 5], int.from_bytes(data[offset + 6 : offset + 8], "little")
            aligned = (length + FRAME_ALIGNMENT - 1) & ~(FRAME_ALIGNMENT - 1)
            assert length >= 32 and kind in (DATA, PAD), (self.start + offset, length, kind)
            if self.start + offset + aligned > stop:
                break
            if kind == DATA:
                assembling += data[offset + 32 : offset + length]
                if flags & END_FLAG:
                    out.append((bytes(assembling), self.start + offset + aligned))
                    assembling.clear()
            offset += aligned
        return out

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.subscription.close()


def segment_bytes(archive_dir: str | Path, layout: segments.RecordingLayout, start, stop) -> bytes:
    """The recording's bytes [start, stop) read straight from its segment files."""
    out = bytearray()
    position = start
    while position < stop:
        offset = layout.segment_offset(position)
        length = min(stop - position, layout.segment_length - offset)
        with open(Path(archive_dir) / layout.file_name(layout.segment_index(position)), "rb") as f:
            f.seek(offset)
            out += f.read(length)
        position += length
    return bytes(out)


def read_catalog(archive_dir: str | Path, recording_id: int = 0):
    """(descriptor, layout) from the catalog opened read-only (no archive process needed)."""
    with archive.Catalog(archive_dir, readonly=True) as catalog:
        return catalog.descriptor(recording_id), catalog.layout(recording_id)


def recorded_bytes(archive_dir: str | Path, layout, start: int, stop: int) -> bytes:
    """[start, stop) as RecordingReader reads it (whole frames only)."""
    with archive.RecordingReader(archive_dir, layout, start, stop) as reader:
        return b"".join(bytes(block.data) for block in reader.blocks())


def check_recorded(archive_dir, collector: Collector, start: int, stop: int) -> None:
    """The segment files hold exactly what the stream carried in [start, stop)."""
    _, layout = read_catalog(archive_dir)
    expected = collector.bytes(start, stop)
    raw = segment_bytes(archive_dir, layout, start, stop)
    assert len(raw) == len(expected) == stop - start
    if raw != expected:
        at = next(i for i in range(len(raw)) if raw[i] != expected[i])
        raise AssertionError(
            f"segment bytes differ from the stream's at position {start + at} of [{start}, {stop})"
        )
    assert recorded_bytes(archive_dir, layout, start, stop) == expected


def continuation(descriptor, position: int) -> str:
    """A channel whose exclusive publication continues the recorded stream at `position`."""
    term_length = descriptor.term_buffer_length
    term_id = descriptor.initial_term_id + position // term_length
    term_id = (term_id + 2**31) % 2**32 - 2**31  # a 32-bit term id wraps
    return (
        f"aeron:ipc?term-length={term_length}|init-term-id={descriptor.initial_term_id}"
        f"|term-id={term_id}|term-offset={position % term_length}|mtu={descriptor.mtu_length}"
    )


async def replay_messages(client, recording_id: int, length: int, count: int, stream_id: int):
    """(message, position after it) of the first `count` messages replayed from the start."""
    subscription = await client.replay(recording_id, 0, length, "aeron:ipc", stream_id)
    got: list[tuple[bytes, int]] = []
    try:
        async with asyncio.timeout(20):
            async for message in subscription:
                got.append((message.data, message.position))
                if len(got) == count:
                    break
    except TimeoutError:
        raise AssertionError(f"the replay gave {len(got)} of {count} messages") from None
    finally:
        await subscription.close()
    return got


def assert_same_messages(got, expected) -> None:
    assert len(got) == len(expected), (len(got), len(expected))
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"message {i}: {len(g[0])} bytes at {g[1]}, expected {len(e[0])} at {e[1]}"


async def wait_rec_pos(aeron, recording_id: int, position: int, timeout: float = 15) -> int:
    return await await_until(
        lambda: (value := rec_pos(aeron, recording_id)) is not None and value >= position and value,
        timeout,
        lambda: (
            f"rec-pos of recording {recording_id} is {rec_pos(aeron, recording_id)}, "
            f"not yet {position}"
        ),
    )


async def wait_reaped(aeron, label: str, timeout: float = 20) -> None:
    """Until the driver freed the counter of `label` (its client timed out)."""
    await await_until(
        lambda: counter_by_prefix(aeron, label) is None,
        timeout,
        f"the driver to free the counter {label!r} of a dead client",
    )


# -- 1. kill -9 mid-recording -------------------------------------------------------------------

RECOVERED = re.compile(r"^recordingId=0 recovered: stopPosition=(\d+)$", re.M)


@pytest.mark.slow
async def test_an_archive_killed_mid_recording_is_recovered_and_the_recording_extended(
    procs, tmp_path
):
    driver_dir = procs.new_dir()
    procs.driver(driver_dir, *DRIVER_OPTIONS)
    archive_dir = tmp_path / "archive"
    segment_option = ("--segment-file-length", str(SEGMENT))
    async with aeronio.connect(driver_dir, driver_timeout_s=5) as aeron:
        first_archive = await start_archive(procs, driver_dir, archive_dir, *segment_option)
        client = await archive.connect(aeron, **CLIENT)
        await client.start_recording(CHANNEL, STREAM)
        collector = Collector(await aeron.add_subscription(CHANNEL, STREAM))
        publication = await aeron.add_exclusive_publication(CHANNEL, STREAM)
        publisher = Publisher(publication, pub_id=0)

        # Only one archive at a time may write the catalog.
        refused = await archive_tool("verify", archive_dir)
        assert refused.returncode == 1, describe_run(refused)
        assert "is in use by a running archive" in refused.stderr, describe_run(refused)

        seen = await wait_rec_pos(aeron, 0, 4 * SEGMENT)
        errors_label = archive_errors(aeron).label
        await kill_archive(first_archive)
        last_seen = rec_pos(aeron, 0)  # the counter outlives its archive until the driver reaps
        assert last_seen is not None and last_seen >= seen
        await client.close()

        # The driver times the dead archive out, so the publisher goes on.
        await wait_reaped(aeron, errors_label)
        sent_before = publisher.sent
        await await_until(lambda: publisher.sent > sent_before + 100, 10, "the publisher")

        # A new archive on the same directory repairs the catalog.
        second_archive = await start_archive(procs, driver_dir, archive_dir, *segment_option)
        client = await archive.connect(aeron, **CLIENT)
        (listed,) = await client.list_recordings()
        stop = listed.stop_position
        assert stop >= last_seen and stop % FRAME_ALIGNMENT == 0, (stop, last_seen)
        assert listed.start_position == 0 and collector.start == 0
        assert (listed.term_buffer_length, listed.segment_file_length) == (TERM, SEGMENT)
        assert listed.session_id == publication.session_id
        assert await client.get_stop_position(0) == stop
        assert await client.get_recording_position(0) == archive.NULL_POSITION  # not active
        assert read_catalog(archive_dir)[0].stop_position == stop
        await collector.reach(stop)
        check_recorded(archive_dir, collector, 0, stop)
        assert stop > 4 * SEGMENT and len(segments.segment_indices(archive_dir, 0)) > 4

        # The stream goes on; what was recorded is its first `stop` bytes.
        sent = await publisher.stop()
        first_part = collector.messages(stop)
        assert [data for data, _ in first_part] == [
            make_payload(0, i) for i in range(len(first_part))
        ]
        assert len(first_part) < sent
        await publication.close()
        await await_until(lambda: not collector.subscription.images, 10, "the publication to go")
        await collector.close()

        # Extend the recording with a stream that continues at its stop position.
        channel = continuation(listed, stop)
        await client.extend_recording(0, channel, STREAM)
        collector = Collector(await aeron.add_subscription(channel, STREAM))
        extension = await aeron.add_exclusive_publication(channel, STREAM)
        assert extension.position == stop
        second_count = 1500
        await Publisher(extension, pub_id=1, limit=second_count).finish()
        end = extension.position
        await wait_recorded(client, 0, end)
        await client.stop_recording(channel, STREAM)
        assert await client.get_stop_position(0) == end
        assert collector.start == stop
        await collector.reach(end)
        check_recorded(archive_dir, collector, stop, end)
        second_part = collector.messages(end)
        assert [data for data, _ in second_part] == [
            make_payload(1, i) for i in range(second_count)
        ]
        got = await replay_messages(client, 0, end, len(first_part) + second_count, 2002)
        assert_same_messages(got, first_part + second_part)
        await extension.close()
        await await_until(lambda: not collector.subscription.images, 10, "the extension to go")
        await collector.close()

        # Extend again and kill the archive while it records: `verify`, with no archive
        # running, recovers the recording offline.
        channel = continuation(read_catalog(archive_dir)[0], end)
        await client.extend_recording(0, channel, STREAM)
        collector = Collector(await aeron.add_subscription(channel, STREAM))
        third = await aeron.add_exclusive_publication(channel, STREAM)
        publisher = Publisher(third, pub_id=2)
        seen = await wait_rec_pos(aeron, 0, end + 2 * SEGMENT)
        errors_label = archive_errors(aeron).label
        await kill_archive(second_archive)
        last_seen = rec_pos(aeron, 0)
        assert last_seen is not None and last_seen >= seen
        await client.close()
        listing = await archive_tool("list", archive_dir)
        assert listing.returncode == 0, describe_run(listing)
        assert " stopPosition=-1 " in listing.stdout, describe_run(listing)  # left active
        verified = await archive_tool("verify", archive_dir)
        assert verified.returncode == 0, describe_run(verified)
        found = RECOVERED.search(verified.stdout)
        assert found, describe_run(verified)
        recovered = int(found.group(1))
        assert recovered >= last_seen and recovered % FRAME_ALIGNMENT == 0, (recovered, last_seen)
        assert "recordingId=0 OK" in verified.stdout.splitlines(), describe_run(verified)
        assert read_catalog(archive_dir)[0].stop_position == recovered
        again = await archive_tool("verify", archive_dir)  # nothing left to recover
        assert (again.returncode, again.stdout) == (0, "recordingId=0 OK\n"), describe_run(again)
        await wait_reaped(aeron, errors_label)
        sent_before = publisher.sent  # the dead archive held it back until the driver reaped it
        await await_until(lambda: publisher.sent > sent_before + 100, 10, "the publisher")
        sent = await publisher.stop()
        await collector.reach(recovered)
        check_recorded(archive_dir, collector, end, recovered)
        third_part = collector.messages(recovered)
        assert [data for data, _ in third_part] == [
            make_payload(2, i) for i in range(len(third_part))
        ]
        assert len(third_part) < sent

        # A third archive takes the recovered catalog as it is; every message replays in order.
        third_archive = await start_archive(procs, driver_dir, archive_dir, *segment_option)
        client = await archive.connect(aeron, **CLIENT)
        (listed,) = await client.list_recordings()
        assert (listed.start_position, listed.stop_position) == (0, recovered)
        refused = await archive_tool("verify", archive_dir)
        assert refused.returncode == 1, describe_run(refused)
        assert "is in use by a running archive" in refused.stderr, describe_run(refused)
        expected = first_part + second_part + third_part
        got = await replay_messages(client, 0, recovered, len(expected), 2003)
        assert_same_messages(got, expected)
        await client.close()
        await stop_archive(third_archive)
        verified = await archive_tool("verify", archive_dir)
        assert (verified.returncode, verified.stdout) == (0, "recordingId=0 OK\n"), describe_run(
            verified
        )
        await third.close()
        await collector.close()


# -- 2. a full disk ---------------------------------------------------------------------------

FULL_DISK_SEGMENT = 256 * 1024


@pytest.mark.slow
async def test_a_full_disk_stops_the_recording_and_the_archive_goes_on(procs, tmp_path):
    driver_dir = procs.new_dir()
    procs.driver(driver_dir, *DRIVER_OPTIONS)
    with mounted(tmp_path / "disk", "1m") as archive_dir:
        async with aeronio.connect(driver_dir, driver_timeout_s=5) as aeron:
            service = await start_archive(
                procs, driver_dir, archive_dir, "--segment-file-length", str(FULL_DISK_SEGMENT)
            )
            try:
                await full_disk(aeron, service, archive_dir)
            finally:
                # the archive lets go of its files before the tmpfs goes
                await asyncio.to_thread(service.stop, signal.SIGTERM, 10.0)


async def full_disk(aeron, service: Child, archive_dir: Path) -> None:
    capacity = os.statvfs(archive_dir).f_blocks * os.statvfs(archive_dir).f_frsize
    client = await archive.connect(aeron, **CLIENT)
    errors = archive_errors(aeron)
    assert aeron.counters.get_counter_value(errors.id) == 0
    await client.start_recording(CHANNEL, STREAM)
    collector = Collector(await aeron.add_subscription(CHANNEL, STREAM))
    publication = await aeron.add_exclusive_publication(CHANNEL, STREAM)
    total = 4 * 1024 * 1024  # a few MiB: four times what the disk holds
    publisher = Publisher(publication, pub_id=0)

    # The write that finds the disk full stops the recording, and it is counted.
    await await_until(
        lambda: aeron.counters.get_counter_value(errors.id) >= 1,
        20,
        lambda: f"an archive error (rec-pos {rec_pos(aeron, 0)}, published {publication.position})",
    )
    await await_until(lambda: rec_pos(aeron, 0) is None, 10, "the recording to stop")
    assert service.proc.poll() is None, service.describe()
    (listed,) = await client.list_recordings()  # the archive still answers
    stop = listed.stop_position
    assert stop != archive.NULL_POSITION, listed
    assert 0 < stop < capacity and stop % FRAME_ALIGNMENT == 0, (stop, capacity)
    assert await client.get_stop_position(0) == stop
    assert await client.get_recording_position(0) == archive.NULL_POSITION
    with pytest.raises(OSError) as full:  # the disk is full indeed
        with open(archive_dir / "probe", "wb") as f:
            f.write(bytes(capacity))
    assert full.value.errno == errno.ENOSPC
    (archive_dir / "probe").unlink()

    # The catalog is whole, and what was recorded is the stream's first `stop` bytes.
    descriptor, layout = read_catalog(archive_dir)
    assert (descriptor.start_position, descriptor.stop_position) == (0, stop)
    assert descriptor.segment_file_length == FULL_DISK_SEGMENT
    await collector.reach(stop)
    check_recorded(archive_dir, collector, 0, stop)
    assert segments.recover_stop_position(archive_dir, layout) == stop  # no torn frame beyond

    # A new recording request is answered (the disk is still full) and the archive goes on.
    errors_before = aeron.counters.get_counter_value(errors.id)
    try:
        await client.start_recording(CHANNEL, STREAM + 1)
    except archive.ArchiveError:
        pass  # an answer
    else:
        other = await aeron.add_exclusive_publication(CHANNEL, STREAM + 1)
        # Less than a term window; its last ones may find no subscriber: the recording's first
        # write fails and stops it, and with it the one subscription of the stream.
        publisher = Publisher(other, pub_id=1, limit=50)
        await await_until(
            lambda: aeron.counters.get_counter_value(errors.id) > errors_before,
            10,
            lambda: f"the second recording's write to fail (rec-pos {rec_pos(aeron, 1)})",
        )
        await await_until(lambda: rec_pos(aeron, 1) is None, 10, "the second recording to stop")
        assert await publisher.stop() > 0
        await other.close()
    listed = await client.list_recordings()
    assert listed[0].stop_position == stop
    for d in listed[1:]:
        assert d.stop_position % FRAME_ALIGNMENT == 0 and d.stop_position >= 0, d
    assert service.proc.poll() is None, service.describe()

    # The stream does not wait for a recording that stopped: its other subscriber (the
    # collector) keeps it going.
    try:
        await await_until(
            lambda: publication.position >= total,
            10,
            lambda: (
                f"the stream to reach {total}: it is held at {publication.position} "
                f"(limit {publication.position_limit}); the recording stopped at {stop}; "
                f"{stream_positions(aeron, STREAM)}"
            ),
        )
    finally:
        await publisher.stop()
    await collector.reach(publication.position)
    await client.close()
    await publication.close()
    await collector.close()
    await stop_archive(service)


# -- 3. the durable sync levels -----------------------------------------------------------------


async def test_sync_levels_2_record_and_replay(procs, tmp_path):
    driver_dir = procs.new_dir()
    procs.driver(driver_dir, *DRIVER_OPTIONS)
    archive_dir = tmp_path / "archive"
    async with aeronio.connect(driver_dir, driver_timeout_s=5) as aeron:
        service = await start_archive(
            procs, driver_dir, archive_dir,
            "--segment-file-length", str(SEGMENT),
            "--file-sync-level", "2",
            "--catalog-file-sync-level", "2",
        )  # fmt: skip
        client = await archive.connect(aeron, **CLIENT)
        await client.start_recording(CHANNEL, STREAM)
        collector = Collector(await aeron.add_subscription(CHANNEL, STREAM))
        publication = await aeron.add_exclusive_publication(CHANNEL, STREAM)
        count = 2000
        await Publisher(publication, pub_id=0, limit=count).finish()
        end = publication.position
        assert end > 2 * SEGMENT
        await wait_recorded(client, 0, end)
        await client.stop_recording(CHANNEL, STREAM)
        assert await client.get_stop_position(0) == end
        await collector.reach(end)
        check_recorded(archive_dir, collector, 0, end)
        expected = collector.messages(end)
        assert [data for data, _ in expected] == [make_payload(0, i) for i in range(count)]
        got = await replay_messages(client, 0, end, count, 2002)
        assert_same_messages(got, expected)
        await client.close()
        await stop_archive(service)
        verified = await archive_tool("verify", archive_dir)
        assert (verified.returncode, verified.stdout) == (0, "recordingId=0 OK\n"), describe_run(
            verified
        )
        await publication.close()
        await collector.close()


# -- idle ------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_an_idle_archive_parks_and_records_what_comes_after(procs, tmp_path):
    """An archive process with a recording and nothing to record sleeps (its conductor until a
    control message, its recorder thread until an append: no back-off ticks), and an append by
    a publisher in another process still wakes it: the recording gets it. The CPU share is a
    resource check, as in tests/processes/test_idle_cpu.py (whose control case shows the
    measurement can fail)."""
    dir = procs.new_dir()
    procs.driver(dir, *DRIVER_OPTIONS)
    arch = await start_archive(procs, dir, tmp_path / "a")
    publisher = procs.role("idle_ipc_client", stdin=True, dir=dir, stream=STREAM, side="pub")
    async with aeronio.connect(dir) as aeron, archive.connect(aeron, **CLIENT) as client:
        await client.start_recording("aeron:ipc", STREAM, archive.SourceLocation.LOCAL)
        await publisher.aexpect("ready", 30)
        await asyncio.sleep(1.0)  # past the back-off into the park
        cpu0, wall0 = cpu_seconds(arch.pid), time.monotonic()
        await asyncio.sleep(3.0)
        share = (cpu_seconds(arch.pid) - cpu0) / (time.monotonic() - wall0)
        assert share < 0.02, f"an idle archive used {share:.2%} of a core"
        publisher.send("recorded after the idle time")
        await publisher.aexpect("offered", 10)
        [recording] = await client.list_recordings()
        recorded = 0
        async with asyncio.timeout(10):  # the publisher may have gone: its recording stopped
            while recorded != FRAME_ALIGNMENT * 2:
                recorded = await client.get_recording_position(recording.recording_id)
                if recorded == archive.NULL_POSITION:
                    recorded = await client.get_stop_position(recording.recording_id)
                await asyncio.sleep(0.01)


def recorded_payloads(data: bytes) -> list[bytes]:
    """The payloads of the DATA frames in `data` (whole frames of unfragmented messages)."""
    out, offset = [], 0
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "little")
        if int.from_bytes(data[offset + 6 : offset + 8], "little") == DATA:
            out.append(data[offset + 32 : offset + length])
        offset += (length + FRAME_ALIGNMENT - 1) & ~(FRAME_ALIGNMENT - 1)
    return out


async def test_an_archive_whose_driver_stops_ends_saying_so(procs, tmp_path):
    """A standalone driver stopped (SIGTERM) under an archive process that records: the archive
    can neither record nor answer, so it exits 1 naming its driver's loss (it ran on without a
    word), its recording stopped in the catalog where its segments end."""
    dir = procs.new_dir()
    driver = procs.driver(dir, *DRIVER_OPTIONS)
    arch = await start_archive(procs, dir, tmp_path / "a")
    payloads = [i.to_bytes(4, "little") * 50 for i in range(300)]  # unfragmented
    async with aeronio.connect(dir) as aeron, archive.connect(aeron, **CLIENT) as client:
        await client.start_recording(CHANNEL, STREAM)
        publication = await aeron.add_exclusive_publication(CHANNEL, STREAM)
        for payload in payloads:
            await publication.offer(payload, timeout=10)
        end = publication.position
        await wait_recorded(client, 0, end)
        await asyncio.to_thread(driver.stop, signal.SIGTERM, 30.0)
        assert driver.proc.returncode == 0, driver.describe()
        assert await arch.await_exit(20) == 1, arch.describe()
    assert f"media driver on {dir} lost" in arch.stderr, arch.describe()
    descriptor, layout = read_catalog(tmp_path / "a")
    assert descriptor.stop_position == end
    assert recorded_payloads(recorded_bytes(tmp_path / "a", layout, 0, end)) == payloads
