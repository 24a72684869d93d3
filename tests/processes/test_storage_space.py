"""Storage checked before a log is made (driver/storage.py), on a 64 MiB tmpfs the test mounts
(never the machine's /dev/shm): a log that does not fit is refused with StorageSpaceError naming
the directory, the bytes needed and the bytes left; the driver serves the next stream that fits
at once; a log that leaves less than the low-storage threshold is counted. A sparse log's pages
taken by others after it was made hold its writers where its pages end (said in the error log),
never a SIGBUS, and they go on, nothing lost, once there is room again."""

from __future__ import annotations

import asyncio
import errno
import os
import re
import subprocess
import sys

import pytest

import aeronio
from aeronio.counters import SystemCounters
from aeronio.logbuffer.descriptor import compute_log_length
from tests.support.child import child_env
from tests.support.ports import free_port
from tests.support.procs import procs_fixture
from tests.support.tmpfs import mounted

procs = pytest.fixture(procs_fixture, name="procs")
MIB = 1024 * 1024
LOG_16M = compute_log_length(16 * MIB, 4096)  # 48 MiB and a page


@pytest.fixture
def tmpfs(tmp_path):
    with mounted(tmp_path / "tmpfs", "64m") as point:
        yield point


def run_child(script: str, *args: str) -> list[str]:
    """Run `script` in a child Python (a SIGBUS there fails the test, not pytest); its stdout
    lines, once it exited 0."""
    run = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=child_env(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode == 0, f"exit {run.returncode}: {run.stdout}{run.stderr[-3000:]}"
    return run.stdout.splitlines()


def low_storage_warnings(aeron) -> int:
    return aeron.counters.get_counter_value(SystemCounters.LOW_STORAGE_WARNINGS)


@pytest.mark.parametrize("sparse", ["false", "true"])
async def test_a_log_that_does_not_fit_is_refused_and_the_next_one_served(tmpfs, sparse):
    """Sparse logs count for what they will take as they fill, not what they take now."""
    dir = str(tmpfs / "driver")
    async with aeronio.connect(dir=dir, ipc_term_length=64 * 1024) as aeron:
        first = await aeron.add_publication(f"aeron:ipc?term-length=16m|sparse={sparse}", 1)
        assert low_storage_warnings(aeron) == 1  # 16 MiB left < 160 MiB: warned, made
        with pytest.raises(aeronio.StorageSpaceError) as refused:
            await aeron.add_publication(f"aeron:ipc?term-length=16m|sparse={sparse}", 2)
        assert isinstance(refused.value, aeronio.DriverError) and refused.value.code == 12
        text = str(refused.value)
        assert text.startswith(
            f"insufficient usable storage for a new log of {LOG_16M:,} bytes in {dir}/"
        )
        left = int(text.rsplit(": ", 1)[1].split()[0].replace(",", ""))
        assert 0 < left < LOG_16M
        assert sorted(os.listdir(os.path.join(dir, "publications"))) == [
            os.path.basename(first.log_file)
        ]  # nothing made for the refused one

        small = await aeron.add_publication("aeron:ipc", 3)  # 64 KiB terms: fits
        sub = await aeron.add_subscription("aeron:ipc", 3)
        await small.wait_connected(timeout=5)
        await small.offer(b"served right after")
        assert (await asyncio.wait_for(sub.receive(), 5)).data == b"served right after"


async def test_a_standalone_driver_refuses_a_client_in_another_process(tmpfs, procs):
    dir = str(tmpfs / "standalone")
    procs.driver(dir)
    async with aeronio.connect(dir) as aeron:
        with pytest.raises(aeronio.StorageSpaceError, match="insufficient usable storage"):
            await aeron.add_publication("aeron:ipc", 1)  # the default 64 MiB terms
        fits = await aeron.add_publication("aeron:ipc?term-length=1m", 1)
        assert fits.term_length == MIB


async def test_the_checks_can_be_turned_off(tmpfs):
    """perform_storage_checks=False (Aeron's aeron.perform.storage.checks): no refusal; the
    sparse log is made on the tmpfs though it could not be filled."""
    dir = str(tmpfs / "unchecked")
    async with aeronio.connect(dir=dir, perform_storage_checks=False) as aeron:
        await aeron.add_publication("aeron:ipc?term-length=16m|sparse=true", 1)
        await aeron.add_publication("aeron:ipc?term-length=16m|sparse=true", 2)
        assert low_storage_warnings(aeron) == 0


# What both child scripts below begin with.
FILL = r"""
def fill(filler):  # another file takes every page left; prints why it stopped
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(bytes(65536))
                f.flush()
        except OSError as e:
            print("filled:", e.strerror)
"""

HELD = r"""
import asyncio, os, struct, sys
import aeronio
from aeronio.cnc import CncFile
from aeronio.concurrent.error_log import read_error_log

dir, filler, pub_channel, sub_channel, sparse_images = sys.argv[1:]
COUNT = 3 * 1024  # 3 MiB of messages: every page of the 1 MiB terms


def message(i):
    return struct.pack("<i", i) + bytes([i % 251]) * 996


def no_room():
    cnc = CncFile.map(dir)
    try:
        texts = [o.text for o in read_error_log(cnc.error_log_buffer)]
    finally:
        cnc.close()
    return [t for t in texts if t.startswith("no room for the pages of ")]


async def main():
    async with aeronio.connect(
        dir=dir, ipc_term_length=1 << 20, term_buffer_sparse_file=sparse_images == "true"
    ) as aeron:
        pub = await aeron.add_publication(pub_channel, 1)
        sub = await aeron.add_subscription(sub_channel, 1)
        await pub.wait_connected(timeout=10)
        await sub.wait_connected(timeout=10)
        fill(filler)
        got = []
        take = lambda buffer, header: got.append(bytes(buffer))
        sent = 0
        while not no_room():  # offer and take until the driver holds the stream
            assert sent < COUNT, "all offered, nothing held"
            if pub.try_offer(message(sent)) > 0:
                sent += 1
            sub.poll(take, 100)
            await asyncio.sleep(0)  # the embedded driver's turn
        (text,) = no_room()
        print("held:", text)
        os.unlink(filler)

        async def receive_rest():
            while len(got) < COUNT:
                got.append(bytes((await sub.receive()).data))

        receiving = asyncio.create_task(receive_rest())
        while sent < COUNT:
            await pub.offer(message(sent), timeout=30)
            sent += 1
        await asyncio.wait_for(receiving, 30)
        assert got == [message(i) for i in range(COUNT)], "lost or out of order"
        print("received", len(got), "in order")


asyncio.run(main())
"""


UDP = "aeron:udp?endpoint=127.0.0.1:{port}|term-length=1m"


@pytest.mark.parametrize(
    ("kind", "pub_channel", "sub_channel", "sparse_images"),
    [
        ("publications", "aeron:ipc?sparse=true", "aeron:ipc", "false"),
        ("publications", UDP + "|sparse=true", UDP, "false"),
        ("images", UDP + "|sparse=false", UDP, "true"),
    ],
)
def test_a_sparse_log_whose_pages_others_took_holds_its_writers(
    tmp_path, kind, pub_channel, sub_channel, sparse_images
):
    """Its storage checked, the log made, then another file takes the rest of the tmpfs: the
    writers of its pages (publishers; an image's receiver, whose log the embedded driver makes
    sparse) are held where its pages end, the error log says so, and once the file goes every
    message arrives, in order. Before: the process died of SIGBUS."""
    port = free_port()
    with mounted(tmp_path / "tmpfs", "16m") as point:
        dir = str(point / "driver")
        lines = run_child(
            FILL + HELD, dir, str(point / "filler"), pub_channel.format(port=port),
            sub_channel.format(port=port), sparse_images,
        )  # fmt: skip
    assert lines[0] == "filled: No space left on device"
    held = re.fullmatch(
        rf"held: no room for the pages of {dir}/{kind}/\d+\.logbuffer up to position ([\d,]+): "
        r"No space left on device; its writers are held at position ([\d,]+) until there is",
        lines[1],
    )
    assert held, lines[1]
    wanted, at = (int(g.replace(",", "")) for g in held.groups())
    assert 0 < at < wanted and at % 4096 == 0
    assert lines[2:] == ["received 3072 in order"]


UNCHECKED = r"""
import asyncio, os, sys
import aeronio

dir, filler = sys.argv[1:]


async def main():
    async with aeronio.connect(dir=dir, perform_storage_checks=False) as aeron:
        fill(filler)
        for sparse in ("true", "false"):
            try:
                await aeron.add_publication(f"aeron:ipc?term-length=1m|sparse={sparse}", 1)
            except aeronio.StorageSpaceError as e:
                print(f"sparse={sparse}:", e.code, e)
        os.unlink(filler)
        pub = await aeron.add_publication("aeron:ipc?term-length=1m|sparse=true", 1)
        sub = await aeron.add_subscription("aeron:ipc", 1)
        await pub.wait_connected(timeout=10)
        await pub.offer(b"served")
        print("then:", (await asyncio.wait_for(sub.receive(), 10)).data)


asyncio.run(main())
"""


def test_without_the_checks_a_log_with_no_room_is_refused_not_a_sigbus(tmp_path):
    """perform_storage_checks=False on a full tmpfs: the log (allocated, or sparse: its metadata
    is allocated first) is refused with StorageSpaceError, code STORAGE_SPACE, naming it, and
    nothing is left of it; the driver serves the next one once there is room. Before: the
    sparse one's metadata, written, was a SIGBUS."""
    with mounted(tmp_path / "tmpfs", "16m") as point:
        dir = str(point / "driver")
        lines = run_child(FILL + UNCHECKED, dir, str(point / "filler"))
    assert lines[0] == "filled: No space left on device"
    for line, sparse in zip(lines[1:3], ("true", "false"), strict=True):
        assert re.fullmatch(
            rf"sparse={sparse}: 12 no room for the new log {dir}/publications/\d+\.logbuffer: "
            r"No space left on device",
            line,
        ), line
    assert lines[3:] == ["then: b'served'"]


def test_a_driver_with_no_room_for_its_files_does_not_start(tmp_path):
    """cnc.dat and loss-report.dat are allocated as they are made (as Aeron's driver fills them
    with zeros): a tmpfs too small is ENOSPC at the start. Before: the driver started on
    sparse files (to die of SIGBUS writing to them later), or a failed start said
    `list.remove(x): x not in list`."""
    with mounted(tmp_path / "tmpfs", "1m") as point:
        with pytest.raises(OSError) as refused:
            asyncio.run(aeronio.MediaDriver.launch(dir=str(point / "driver")).start())
        assert refused.value.errno == errno.ENOSPC
