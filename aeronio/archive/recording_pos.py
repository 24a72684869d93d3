"""The recording position counter, `rec-pos` (Aeron's io.aeron.archive.status.RecordingPos):
how far an active recording is written, in the driver's counters (cnc.dat).

The archive allocates one per recorded image (`RecordingPos.allocate`); a reader of the
archive's files finds active recordings' positions through `RecordingPos.positions`. The key
(Aeron 1.15.1's layout, read by its tools):

======  ======  ====================================================
offset  type    field
======  ======  ====================================================
0       i64     recording id
8       i32     session id
12      i32     source identity length (its whole UTF-8 length)
16      bytes   source identity, UTF-8, cut to the key's 96 bytes left
======  ======  ====================================================

The label is `rec-pos: <recording id> <session id> <stream id> <stripped channel>`.
"""

from __future__ import annotations

import struct

from aeronio.client.aeron import Aeron
from aeronio.client.counter import ClientCounter
from aeronio.counters import MAX_KEY_LENGTH, CountersReader

RECORDING_POSITION_TYPE_ID = 100  # AeronCounters.ARCHIVE_RECORDING_POSITION_TYPE_ID
_KEY = struct.Struct("<qii")  # recording id, session id, source identity length
SOURCE_IDENTITY_OFFSET = _KEY.size
MAX_SOURCE_IDENTITY_LENGTH = MAX_KEY_LENGTH - SOURCE_IDENTITY_OFFSET


class RecordingPos:
    """Allocates the `rec-pos` counter of a recording and finds and decodes it."""

    @staticmethod
    def key(recording_id: int, session_id: int, source_identity: str) -> bytes:
        """The counter's key: recording id, session id, source identity (see the module)."""
        identity = source_identity.encode()
        return (
            _KEY.pack(recording_id, session_id, len(identity))
            + identity[:MAX_SOURCE_IDENTITY_LENGTH]
        )

    @staticmethod
    def label(recording_id: int, session_id: int, stream_id: int, stripped_channel: str) -> str:
        """The label, as Aeron's: ``rec-pos: <recording> <session> <stream> <channel>``."""
        return f"rec-pos: {recording_id} {session_id} {stream_id} {stripped_channel}"

    @classmethod
    async def allocate(
        cls,
        aeron: Aeron,
        recording_id: int,
        session_id: int,
        stream_id: int,
        stripped_channel: str,
        source_identity: str,
    ) -> ClientCounter:
        """The counter of a recording being made, owned by the archive's client."""
        return await aeron.add_counter(
            RECORDING_POSITION_TYPE_ID,
            cls.label(recording_id, session_id, stream_id, stripped_channel),
            cls.key(recording_id, session_id, source_identity),
        )

    @staticmethod
    def recording_id(key: bytes) -> int:
        """The recording id a `rec-pos` counter's key holds."""
        return int(_KEY.unpack_from(key)[0])

    @classmethod
    def positions(cls, reader: CountersReader) -> dict[int, int]:
        """Recording id -> position recorded so far, of every `rec-pos` counter (the active
        recordings)."""
        return {
            cls.recording_id(info.key): info.value
            for info in reader.for_each()
            if info.type_id == RECORDING_POSITION_TYPE_ID
        }
