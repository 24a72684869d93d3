"""The archive on a full disk (a small tmpfs the test mounts, root needed): a new catalog entry
with no room is refused with an error, never a SIGBUS; a truncation allocates nothing, so it is
done whole however full the disk. (A recording that fills the disk: test_archive_processes.)"""

import errno
import os
from pathlib import Path

import pytest

from aeronio import archive
from aeronio.archive import segments
from aeronio.archive.catalog import RECORD_LENGTH, Catalog, CatalogError
from tests.driver import test_archive
from tests.driver.test_archive import IPC, SEGMENT, STREAM, messages, publish, replay_all
from tests.support.procs import wait_recorded
from tests.support.tmpfs import mounted

aeron = test_archive.aeron  # its fixture
PAGE = os.sysconf("SC_PAGE_SIZE")


def fill(path: Path) -> None:
    """Take every byte the file system has left."""
    with open(path, "wb", buffering=0) as f:
        with pytest.raises(OSError) as full:
            while True:
                f.write(bytes(64 * 1024))
    assert full.value.errno == errno.ENOSPC


def recording(catalog: Catalog, stream_id: int) -> int:
    return catalog.add_recording(
        start_position=0, start_timestamp=1, initial_term_id=7, segment_file_length=SEGMENT,
        term_buffer_length=64 * 1024, mtu_length=1408, session_id=5, stream_id=stream_id,
        stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="aeron:ipc",
    )  # fmt: skip


def test_a_catalog_entry_with_no_room_is_refused_not_a_sigbus(tmp_path):
    """The catalog is sparse: the entries of its first page were written with its header, the
    next one's page has to be allocated. On a full disk that entry is a CatalogError saying so,
    and once there is room it is made. Before: the write through the mapping was a SIGBUS,
    the archive's process (its driver and clients with it) gone."""
    with mounted(tmp_path / "disk", "1m") as disk:
        with Catalog(disk / "archive") as catalog:
            per_page = PAGE // RECORD_LENGTH - 1  # record 0 is the header
            assert [recording(catalog, s) for s in range(per_page)] == list(range(per_page))
            fill(disk / "filler")
            with pytest.raises(CatalogError, match=r"no room for a new entry: .*No space left"):
                recording(catalog, 100)
            assert len(catalog) == per_page
            (disk / "filler").unlink()
            assert recording(catalog, 100) == per_page
            assert [d.stream_id for d in catalog] == [*range(per_page), 100]


async def test_a_truncation_on_a_full_disk_is_done_whole(aeron, tmp_path):
    """Truncating zeroes the rest of the segment holding the cut: its pages are punched out,
    which takes no room. Before, zeros were written over it: on a full disk the write failed
    part way, the request got an error and the catalog kept the old stop over bytes zeroed."""
    with mounted(tmp_path / "disk", "4m") as disk:
        async with archive.Archive.launch(
            aeron, archive_dir=disk / "archive", segment_file_length=SEGMENT,
            **archive.LOCAL_ARCHIVE,
        ) as arch:  # fmt: skip
            async with archive.connect(aeron, **archive.LOCAL) as client:
                await client.start_recording(IPC, STREAM)
                publication = await aeron.add_exclusive_publication(IPC, STREAM)
                payloads = messages(200, seed=21)
                end = await publish(publication, payloads)
                await wait_recorded(client, 0, end)
                await client.stop_recording(IPC, STREAM)
                await publication.close()
                got = await replay_all(client, 0, 0, -1, len(payloads))
                assert [data for data, _ in got] == payloads
                layout = arch.catalog.layout(0)
                keep = layout.segment_index(end)
                cut = got[-10][1]  # in the last segment, whose end is a hole yet
                assert layout.segment_index(cut) == keep
                assert layout.segment_offset(end) < SEGMENT - 64 * 1024
                fill(disk / "filler")
                await client.truncate_recording(0, cut)
                assert await client.get_stop_position(0) == cut
                again = await replay_all(client, 0, 0, -1, len(got) - 9, stream_id=2003)
                assert again == got[:-9]
                with open(disk / "archive" / layout.file_name(keep), "rb") as f:
                    rest = f.read()[layout.segment_offset(cut) :]
                assert rest == bytes(len(rest))
                assert segments.recover_stop_position(arch.ctx.archive_dir, layout) == cut
                (disk / "filler").unlink()
