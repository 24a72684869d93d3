"""Storage checked before a log is made (driver/storage.py), on a 64 MiB tmpfs the test mounts
(never the machine's /dev/shm): a log that does not fit is refused with StorageSpaceError naming
the directory, the bytes needed and the bytes left; the driver serves the next stream that fits
at once; a log that leaves less than the low-storage threshold is counted."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

import aeronio
from aeronio.counters import SystemCounters
from aeronio.logbuffer.descriptor import compute_log_length
from tests.support.procs import procs_fixture

procs = pytest.fixture(procs_fixture, name="procs")
MIB = 1024 * 1024
LOG_16M = compute_log_length(16 * MIB, 4096)  # 48 MiB and a page


@contextlib.contextmanager
def mounted(tmp_path, size: str) -> Iterator[pathlib.Path]:
    """A tmpfs of `size` mounted for the test (root only), unmounted after."""
    point = tmp_path / "tmpfs"
    point.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], capture_output=True
    )
    assert mount.returncode == 0, f"mounting a tmpfs needs root: {mount.stderr!r}"
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)


@pytest.fixture
def tmpfs(tmp_path):
    with mounted(tmp_path, "64m") as point:
        yield point


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


def test_a_driver_with_no_room_for_its_files_does_not_start(tmp_path):
    """cnc.dat and loss-report.dat are allocated as they are made (as Aeron's driver fills them
    with zeros): a tmpfs too small is ENOSPC at the start. Before: the driver started on
    sparse files (to die of SIGBUS writing to them later), or a failed start said
    `list.remove(x): x not in list`."""
    with mounted(tmp_path, "1m") as point:
        with pytest.raises(OSError) as refused:
            asyncio.run(aeronio.MediaDriver.launch(dir=str(point / "driver")).start())
        assert refused.value.errno == errno.ENOSPC
