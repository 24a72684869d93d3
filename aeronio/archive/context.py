"""The archive's settings, with the reference 1.15.1 defaults (`Archive.Configuration`,
`AeronArchive.Configuration`): channels and stream ids a Java client finds without being told.
"""

from __future__ import annotations

import dataclasses
import os

from aeronio.archive.catalog import DEFAULT_MAX_ENTRIES
from aeronio.errors import ConfigurationError
from aeronio.protocol import limits

CONTROL_CHANNEL = "aeron:udp?endpoint=localhost:8010"
CONTROL_STREAM_ID = 10
LOCAL_CONTROL_CHANNEL = "aeron:ipc"
LOCAL_CONTROL_STREAM_ID = 11
CONTROL_RESPONSE_CHANNEL = "aeron:udp?endpoint=localhost:8020"
CONTROL_RESPONSE_STREAM_ID = 20
RECORDING_EVENTS_CHANNEL = "aeron:udp?endpoint=localhost:8030"
RECORDING_EVENTS_STREAM_ID = 30
SEGMENT_FILE_LENGTH = 128 * 1024 * 1024
MAX_CONCURRENT_RECORDINGS = 128
MAX_CONCURRENT_REPLAYS = 128
MESSAGE_TIMEOUT_NS = 5_000_000_000
REPLAY_LINGER_TIMEOUT_NS = 5_000_000_000
# The largest block a recording writes or a replay sends at once (the reference's).
MAX_BLOCK_LENGTH = 2 * 1024 * 1024
# A control session whose responses waiting for its response publication pass this is closed
# (as one that can send none for MESSAGE_TIMEOUT_NS): a client that never reads its answers
# costs the archive this much memory at most.
MAX_PENDING_RESPONSE_BYTES = 1024 * 1024


@dataclasses.dataclass
class ArchiveContext:
    """Where the archive keeps its files and where it listens (see the module's defaults)."""

    archive_dir: str = "aeron-archive"
    control_channel: str = CONTROL_CHANNEL
    control_stream_id: int = CONTROL_STREAM_ID
    local_control_channel: str = LOCAL_CONTROL_CHANNEL
    local_control_stream_id: int = LOCAL_CONTROL_STREAM_ID
    recording_events_channel: str = RECORDING_EVENTS_CHANNEL
    recording_events_stream_id: int = RECORDING_EVENTS_STREAM_ID
    segment_file_length: int = SEGMENT_FILE_LENGTH
    file_sync_level: int = 0
    catalog_file_sync_level: int = 0
    max_concurrent_recordings: int = MAX_CONCURRENT_RECORDINGS
    max_concurrent_replays: int = MAX_CONCURRENT_REPLAYS
    max_catalog_entries: int = DEFAULT_MAX_ENTRIES
    replay_linger_timeout_ns: int = REPLAY_LINGER_TIMEOUT_NS
    max_pending_response_bytes: int = MAX_PENDING_RESPONSE_BYTES

    def __post_init__(self) -> None:
        self.archive_dir = os.fspath(self.archive_dir)
        for name in ("file_sync_level", "catalog_file_sync_level"):
            if getattr(self, name) not in (0, 1, 2):
                raise ConfigurationError(f"{name} must be 0, 1 or 2, got {getattr(self, name)}")
        limits.check_segment_length(self.segment_file_length, name="segment_file_length")
        for name in (
            "max_concurrent_recordings",
            "max_concurrent_replays",
            "max_catalog_entries",
            "max_pending_response_bytes",
        ):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)}")
        if self.replay_linger_timeout_ns < 0:
            raise ConfigurationError("replay_linger_timeout_ns must be >= 0")
