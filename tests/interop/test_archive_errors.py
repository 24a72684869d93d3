"""Requests that fail (and a few that do not): aeronio's client asks the same of the reference
archive (Java 1.15.1) and of aeronio's, and must get the same answer, error code and message.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import aeronio
from aeronio import archive
from aeronio.archive import ArchiveError, SourceLocation, codecs
from tests.support.archive_interop import (
    CHANNEL,
    REPLAY_CHANNEL,
    REPLAY_STREAM_ID,
    STREAM_ID,
    aeronio_archive,
    java_archiving_driver,
    java_dir,
    message,
    running,
    wait_for_file,
)
from tests.support.java_aeron import require_aeron_java
from tests.support.procs import await_until

pytestmark = pytest.mark.usefixtures("reference_ports")  # tests/interop/conftest.py

# What an archive answers to each request of this scenario (the aeronio client asking): ERROR
# responses as ArchiveError (the reference's error code, its message), OK ones as their value.
# Recording 0 is active for the first part (its publication has sent everything and it is all
# recorded, at position `S`), stopped for the second, and replayed (to a channel nobody
# subscribes to, so the replay is waiting for a connection) for the third.
ERROR_CASES = {
    "active": {
        "startRecording of a channel being recorded": lambda c, s: c.start_recording(
            CHANNEL, STREAM_ID, SourceLocation.REMOTE
        ),
        "getRecordingPosition of an active recording": lambda c, s: c.get_recording_position(0),
        "truncateRecording of an active recording": lambda c, s: c.truncate_recording(0, 0),
        "extendRecording of an active recording": lambda c, s: c.extend_recording(
            0, "aeron:udp?endpoint=localhost:14125", STREAM_ID, SourceLocation.REMOTE
        ),
        "startReplay from past the live position": lambda c, s: c.start_replay(
            0, s + 32, 100, REPLAY_CHANNEL, REPLAY_STREAM_ID
        ),
        "findLastMatchingRecording from past the last id": (
            lambda c, s: c.find_last_matching_recording(1000, "localhost", STREAM_ID, 0)
        ),
        "findLastMatchingRecording from a negative id": (
            lambda c, s: c.find_last_matching_recording(-5, "localhost", STREAM_ID, 0)
        ),
    },
    "stopped": {
        "getStopPosition of an unknown recording": lambda c, s: c.get_stop_position(999),
        "getRecordingPosition of a stopped recording": lambda c, s: c.get_recording_position(0),
        "getRecordingPosition of an unknown recording": (
            lambda c, s: c.get_recording_position(999)
        ),
        "startReplay of an unknown recording": lambda c, s: c.start_replay(
            999, 0, 10, REPLAY_CHANNEL, REPLAY_STREAM_ID
        ),
        "startReplay from an unaligned position": lambda c, s: c.start_replay(
            0, 16, 10, REPLAY_CHANNEL, REPLAY_STREAM_ID
        ),
        "startReplay from past the stop position": lambda c, s: c.start_replay(
            0, s + 32, 10, REPLAY_CHANNEL, REPLAY_STREAM_ID
        ),
        "extendRecording of an unknown recording": lambda c, s: c.extend_recording(
            999, CHANNEL, STREAM_ID, SourceLocation.REMOTE
        ),
        "truncateRecording of an unknown recording": lambda c, s: c.truncate_recording(999, 0),
        "truncateRecording to an unaligned position": lambda c, s: c.truncate_recording(0, 33),
        "truncateRecording past the stop position": lambda c, s: c.truncate_recording(0, s + 32),
        "stopRecording of a channel not recorded": lambda c, s: c.stop_recording(
            "aeron:udp?endpoint=localhost:40999", 5
        ),
        "stopRecordingSubscription of an unknown subscription": (
            lambda c, s: c.stop_recording_subscription(5)
        ),
        "stopReplay of an unknown replay": lambda c, s: c.stop_replay(12345),
        "listRecording of an unknown recording": lambda c, s: c.list_recording(999),
        "listRecordings from past the last id": lambda c, s: c.list_recordings(999, 5),
        "listRecordings from a negative id": lambda c, s: c.list_recordings(-1, 5),
    },
    "replayed": {
        "truncateRecording of a recording being replayed": (
            lambda c, s: c.truncate_recording(0, 0)
        ),
    },
}
ERROR_CASE_IDS = [name for cases in ERROR_CASES.values() for name in cases]


async def outcome(request) -> tuple:
    try:
        value = await request
    except ArchiveError as e:
        return "ERROR", e.error_code, str(e)
    if isinstance(value, list):
        value = [d.recording_id for d in value]
    elif isinstance(value, codecs.RecordingDescriptor):
        value = value.recording_id
    return "OK", value


async def error_scenario(aeron) -> dict[str, tuple]:
    outcomes = {}
    async with archive.connect(aeron, message_timeout_s=20) as client:
        subscription_id = await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)
        publication = await aeron.add_exclusive_publication(f"{CHANNEL}|term-length=64k", STREAM_ID)
        await await_until(lambda: publication.is_connected, 20, "the publication to connect")
        for i in range(20):
            await publication.offer(message(i), timeout=10)
        end = publication.position

        async def caught_up():
            return await client.get_recording_position(0) == end

        await await_until(caught_up, 20, f"the recording position {end}")
        for name, request in ERROR_CASES["active"].items():
            outcomes[name] = await outcome(request(client, end))
        await client.stop_recording_subscription(subscription_id)
        for name, request in ERROR_CASES["stopped"].items():
            outcomes[name] = await outcome(request(client, end))
        replay_session_id = await client.start_replay(
            0, 0, end, "aeron:udp?endpoint=localhost:14126", 1003
        )
        for name, request in ERROR_CASES["replayed"].items():
            outcomes[name] = await outcome(request(client, end))
        await client.stop_replay(replay_session_id)
        outcomes["recording position"] = end
        await publication.close()
    return outcomes


async def error_outcomes_of(archive_process: str, archive_dir: Path) -> dict[str, tuple]:
    if archive_process == "java":
        aeron_dir = java_dir()
        try:
            with running(java_archiving_driver(aeron_dir, archive_dir)) as java:
                wait_for_file(archive_dir / "archive.catalog", java)
                async with aeronio.connect() as aeron:
                    return await error_scenario(aeron)
        finally:
            shutil.rmtree(aeron_dir, ignore_errors=True)
    with running(aeronio_archive(archive_dir)):
        async with aeronio.connect() as aeron:
            return await error_scenario(aeron)


@pytest.fixture(scope="module")
def error_outcomes(tmp_path_factory) -> dict[str, dict[str, tuple]]:
    """The scenario's outcomes against the reference archive and against aeronio's (each run
    once for the module, one after the other)."""
    require_aeron_java()
    return {
        name: asyncio.run(error_outcomes_of(name, tmp_path_factory.mktemp(f"{name}-archive")))
        for name in ("java", "aeronio")
    }


@pytest.mark.parametrize("case", ERROR_CASE_IDS)
def test_failing_requests_are_answered_as_the_reference_does(error_outcomes, case):
    java, ours = error_outcomes["java"], error_outcomes["aeronio"]
    assert ours["recording position"] == java["recording position"]
    assert ours[case] == java[case]
