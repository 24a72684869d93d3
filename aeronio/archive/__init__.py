"""The Aeron Archive for Python: records streams into segment files, lists them from a catalog
and replays them, speaking the reference 1.15.1 archive's control protocol.

    from aeronio import archive
    async with archive.Archive.launch(aeron, archive_dir="rec", **archive.LOCAL_ARCHIVE):
        async with archive.connect(aeron, **archive.LOCAL) as client:
            await client.start_recording("aeron:ipc", 1001)

Reading what was recorded needs no archive process: `Catalog`, `RecordingReader`, and
`RecordingPos` for the positions of active recordings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from aeronio import _lazy

# The public names: type checkers see these imports, the run time imports each from the table
# below on first use (tests/unit/test_package.py keeps the imports, the table and __all__ equal).
if TYPE_CHECKING:
    from aeronio.archive.archive import Archive
    from aeronio.archive.catalog import Catalog, CatalogError
    from aeronio.archive.client import NULL_LENGTH, NULL_POSITION, ArchiveClient, connect
    from aeronio.archive.codecs import (
        ControlResponseCode,
        ErrorCode,
        RecordingDescriptor,
        RecordingProgress,
        RecordingStarted,
        RecordingStopped,
        SourceLocation,
    )
    from aeronio.archive.context import ArchiveContext
    from aeronio.archive.errors import ArchiveError, ArchiveTimeoutError
    from aeronio.archive.recording_pos import RecordingPos
    from aeronio.archive.segments import RecordingLayout, RecordingReader

# An archive and its clients on one driver, over IPC only (no UDP port taken): the archive's
# options (`Archive.launch(aeron, **LOCAL_ARCHIVE, ...)`) and its clients' (`connect`).
LOCAL_ARCHIVE = {"control_channel": "aeron:ipc", "recording_events_channel": "aeron:ipc"}


class _LocalClient(TypedDict):
    """`LOCAL`'s keys, typed as `connect` takes them."""

    control_channel: str
    control_stream_id: int
    response_channel: str
    response_stream_id: int
    recording_events_channel: str


LOCAL: _LocalClient = {
    "control_channel": "aeron:ipc",
    "control_stream_id": 11,
    "response_channel": "aeron:ipc",
    "response_stream_id": 21,
    "recording_events_channel": "aeron:ipc",
}

__all__ = [
    "LOCAL",
    "LOCAL_ARCHIVE",
    "NULL_LENGTH",
    "NULL_POSITION",
    "Archive",
    "ArchiveClient",
    "ArchiveContext",
    "ArchiveError",
    "ArchiveTimeoutError",
    "Catalog",
    "CatalogError",
    "ControlResponseCode",
    "ErrorCode",
    "RecordingDescriptor",
    "RecordingLayout",
    "RecordingPos",
    "RecordingProgress",
    "RecordingReader",
    "RecordingStarted",
    "RecordingStopped",
    "SourceLocation",
    "connect",
]

if not TYPE_CHECKING:  # a type checker sees the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = _lazy.exports(
        __name__,
        {
            "aeronio.archive.archive": ("Archive",),
            "aeronio.archive.catalog": ("Catalog", "CatalogError"),
            "aeronio.archive.client": ("NULL_LENGTH", "NULL_POSITION", "ArchiveClient", "connect"),
            "aeronio.archive.codecs": (
                "ControlResponseCode",
                "ErrorCode",
                "RecordingDescriptor",
                "RecordingProgress",
                "RecordingStarted",
                "RecordingStopped",
                "SourceLocation",
            ),
            "aeronio.archive.context": ("ArchiveContext",),
            "aeronio.archive.errors": ("ArchiveError", "ArchiveTimeoutError"),
            "aeronio.archive.recording_pos": ("RecordingPos",),
            "aeronio.archive.segments": ("RecordingLayout", "RecordingReader"),
        },
    )
