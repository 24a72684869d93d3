"""aeronio's archive against the reference Aeron Archive (Java 1.15.1): real processes on
loopback, each side's client against the other side's archive, and each side reading the
directories the other wrote.

- Java client -> aeronio archive: tests/interop/java/ArchiveCapture.java drives the reference
  AeronArchive client against `aeronio archive serve` and prints every request, response and
  event it saw, and what each call returned; all of it must be what the same program printed
  against the reference archive (tests/data/archive/java-exchange.txt), but for the values that
  differ from run to run (control session id, subscription ids, replay session ids, correlation
  ids, publication session and initial term id, timestamps, the source's port). Those are
  checked for consistency within the run instead.
- aeronio client -> Java ArchivingMediaDriver: record, list, replay (every message at its
  position), stop, and the reference's errors as ArchiveError.
- Java CatalogTool and the reference's own Catalog class read a directory the aeronio archive
  wrote (a recording over several segment files, one starting mid-term).
  The reference archive, run on that directory, replays it to an aeronio client.
- aeronio's Catalog, RecordingReader and `aeronio archive list|verify` read a directory the
  Java archive wrote, and the aeronio archive, run on it, replays it.
- Requests that fail (and a few that do not): the aeronio client asks the same of each archive
  and must get the same answer, error code and message.

The reference archive's default channels have fixed ports (control 8010, responses 8020,
events 8030), so these tests must not run concurrently with each other (pytest runs them one
after another).

`CatalogTool <dir> describe` is not used: in 1.15.1 it cannot pass its mark file check for any
directory. It maps archive-mark.dat first (an aeronio directory has none: `Mark file not
created: archive-mark.dat`), and on the reference archive's own directory Agrona's MarkFile
waits for a non-zero version field, which the 1.15.1 archive never writes (it signals ready with
version 0, the only version ArchiveMarkFile's own check accepts), so it ends with
`IllegalStateException: Mark file is created but not initialised`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import msgspec
import pytest

import aeronio
from aeronio import archive
from aeronio.archive import ArchiveError, Catalog, RecordingReader, SourceLocation, codecs
from tests.support.child import Child
from tests.support.java_aeron import require_aeron_java
from tests.support.reference_aeron import java_args

JAVA_SOURCES = Path(__file__).parent / "java"
REFERENCE_EXCHANGE = Path(__file__).parents[1] / "data" / "archive" / "java-exchange.txt"

CHANNEL = "aeron:udp?endpoint=localhost:40123"
STREAM_ID = 1001
REPLAY_CHANNEL = "aeron:udp?endpoint=localhost:40124"
REPLAY_STREAM_ID = 1002
EVENTS_CHANNEL = "aeron:udp?endpoint=localhost:8030"
EVENTS_STREAM_ID = 30
TERM_LENGTH = 64 * 1024
SEGMENT_LENGTH = 128 * 1024
DEFAULT_SEGMENT_LENGTH = 128 * 1024 * 1024
MTU = 1408
HEADER = 32
SOURCE_IDENTITY = re.compile(r"127\.0\.0\.1:\d+")
# A DATA or PAD frame's header: length, version, flags, type, term offset, session, stream, term.
DATA_FRAME = struct.Struct("<iBBHiiii")
HDR_TYPE_PAD, HDR_TYPE_DATA = 0, 1
UNFRAGMENTED = 0xC0
# The catalog file: a 1024-byte header record and the reference's default 8192 entries of 1024.
CATALOG_FILE_LENGTH = (8192 + 1) * 1024


def align(value: int, alignment: int = HEADER) -> int:
    return (value + alignment - 1) & -alignment


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def java_dir() -> str:
    return f"/dev/shm/aeronio-java-{uuid.uuid4().hex}"


# -- processes -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory) -> str:
    """tests/interop/java/*.java compiled against the reference jar; the classpath to run them."""
    classpath = require_aeron_java()
    if shutil.which("javac") is None:
        pytest.skip("Java interop: no `javac` on PATH (apt-get install openjdk-17-jdk-headless)")
    out = tmp_path_factory.mktemp("archive-java")
    done = subprocess.run(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(out),
         *sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"javac of tests/interop/java failed ({done.returncode}):\n{done.stderr}")
    return f"{out}{os.pathsep}{classpath}"


@contextlib.contextmanager
def running(child: Child):
    """The child until the block ends: then SIGTERM to its group, SIGKILL if it lingers."""
    try:
        yield child
    finally:
        child.stop(signal.SIGTERM, timeout=10)
        child.finish()


def stop(child: Child, timeout: float = 15.0) -> int:
    """SIGTERM and the exit status (the archive closes its catalog and files on the way out)."""
    child.send_signal(signal.SIGTERM)
    return child.wait(timeout)


def aeronio_archive(archive_dir: Path, *options: str) -> Child:
    """`aeronio archive serve` with an embedded driver on the default channels, once ready."""
    child = Child(
        [sys.executable, "-m", "aeronio.cli", "archive", "serve", "--dir", str(archive_dir),
         *options],
        "aeronio archive serve",
    )  # fmt: skip
    try:
        ready = child.expect("aeronio archive pid", timeout=30)
    except BaseException:
        child.finish()
        raise
    assert ready.startswith(f"{child.pid} on {archive_dir} ("), ready
    return child


def run_java(
    cls: str, args: tuple, class_path: str, props: dict | None = None, timeout: float = 60.0
) -> list[str]:
    """Run a Java program to its end; its stdout lines (it must exit 0)."""
    child = Child(java_args(cls, props, args, class_path), f"Java {cls}")
    try:
        status = child.wait(timeout)
        lines = child.lines()
        assert status == 0, f"{cls} exited {status}: {child.describe()}"
        return lines
    finally:
        child.finish()


def archive_capture(
    class_path: str, archive_dir: str, messages: int | None = None, props: dict | None = None
) -> list[str]:
    """ArchiveCapture's output: against an archive on the default channels ("-"), or against the
    reference archive it launches on `archive_dir`."""
    aeron_dir = java_dir()
    args = (aeron_dir, archive_dir) + (() if messages is None else (messages,))
    try:
        return run_java("ArchiveCapture", args, class_path, props)
    finally:
        shutil.rmtree(aeron_dir, ignore_errors=True)


# -- ArchiveCapture's output ---------------------------------------------------------------------


@dataclasses.dataclass
class Group:
    """What ArchiveCapture saw up to one `call` line: the call's line and the messages."""

    call: str | None = None
    requests: list = dataclasses.field(default_factory=list)
    responses: list = dataclasses.field(default_factory=list)
    events: list = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        """The call's name: what comes before ": " (an error), else its first word."""
        if self.call is None:
            return "end"
        head, colon, _ = self.call.partition(": ")
        return head if colon else self.call.split(" ")[0]


def parse_capture(lines: list[str]) -> list[Group]:
    """ArchiveCapture's lines as groups, one per call (the hex lines decoded with aeronio's
    codecs), and a last group for anything after the last call."""
    groups, current = [], Group()
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "call":
            current.call = rest
            groups.append(current)
            current = Group()
        elif kind in ("request", "response", "event"):
            getattr(current, kind + "s").append(codecs.decode(bytes.fromhex(rest)))
        else:
            raise AssertionError(f"unexpected line from ArchiveCapture: {line!r}")
    if current.requests or current.responses or current.events:
        groups.append(current)
    return groups


def calls(groups: list[Group]) -> list[str]:
    return [g.call for g in groups if g.call is not None]


def group(groups: list[Group], name: str) -> Group:
    found = [g for g in groups if g.name == name]
    assert len(found) == 1, (name, [g.name for g in groups])
    return found[0]


@dataclasses.dataclass
class RunValues:
    """The values of one run that another run need not share, each found once and checked for
    consistency within the run."""

    control_session_id: int
    session_id: int
    initial_term_id: int
    source_identity: str
    start_timestamp: int
    subscription_ids: dict[str, int]
    replay_session_ids: dict[str, int]


def check_run(groups: list[Group]) -> RunValues:
    """Within one ArchiveCapture run: every request and response of the control session carries
    its id; each response answers a request of its own call, in order; the per-run ids the calls
    returned are those the responses and later requests carry; the error lines name the failing
    request's correlation id; one publication session, initial term id and source throughout."""
    connect = group(groups, "connect")
    control_session_id = connect.responses[0].control_session_id
    assert connect.call == f"connect {control_session_id}"
    assert connect.responses[0].relevant_id == control_session_id
    assert connect.responses[0].correlation_id == connect.requests[0].correlation_id
    for g in groups:
        for message in g.requests[1:] if g is connect else g.requests:
            assert message.control_session_id == control_session_id, (g.call, message)
        for message in g.responses:
            assert message.control_session_id == control_session_id, (g.call, message)
        asked = [r.correlation_id for r in g.requests if hasattr(r, "correlation_id")]
        answered = [r.correlation_id for r in g.responses]
        # Each request is answered once (a listing with descriptors, then maybe a
        # RECORDING_UNKNOWN), in the order asked.
        assert sorted(set(answered), key=answered.index) == asked, (g.call, asked, answered)
    for name in ("stopRecording again", "getStopPosition(999)"):
        g = group(groups, name)
        (request,) = g.requests
        assert f"response for correlationId={request.correlation_id}, error: " in g.call

    subscription_ids = {}
    for name in ("startRecording", "extendRecording"):
        g = group(groups, name)
        subscription_ids[name] = g.responses[0].relevant_id
        assert g.call == f"{name} {subscription_ids[name]}"
    (stop_subscription,) = group(groups, "stopRecording(subscriptionId)").requests
    assert stop_subscription.subscription_id == subscription_ids["extendRecording"]
    replay_session_ids = {}
    for name in ("replay", "startReplay"):
        replay_session_ids[name] = group(groups, name).responses[0].relevant_id
    assert group(groups, "startReplay").call == f"startReplay {replay_session_ids['startReplay']}"
    (stop_replay,) = group(groups, "stopReplay").requests
    assert stop_replay.replay_session_id == replay_session_ids["startReplay"]

    messages = [m for g in groups for m in g.requests + g.responses + g.events]
    session_ids = {m.session_id for m in messages if hasattr(m, "session_id")}
    initial_term_ids = {m.initial_term_id for m in messages if hasattr(m, "initial_term_id")}
    sources = {m.source_identity for m in messages if hasattr(m, "source_identity")}
    start_timestamps = {m.start_timestamp for m in messages if hasattr(m, "start_timestamp")}
    assert len(session_ids) == len(initial_term_ids) == len(sources) == 1, messages
    assert len(start_timestamps) == 1, start_timestamps
    (source,) = sources
    assert SOURCE_IDENTITY.fullmatch(source), source
    return RunValues(
        control_session_id,
        session_ids.pop(),
        initial_term_ids.pop(),
        source,
        start_timestamps.pop(),
        subscription_ids,
        replay_session_ids,
    )


def normalised(message: msgspec.Struct, run: RunValues, call: str = "") -> tuple:
    """A message as (type, fields) with this run's own values replaced by their names (a
    response's relevant id by what the `call` returns)."""
    fields = msgspec.structs.asdict(message)
    per_run = {
        "control_session_id": run.control_session_id,
        "session_id": run.session_id,
        "initial_term_id": run.initial_term_id,
        "source_identity": run.source_identity,
        "start_timestamp": run.start_timestamp,
    }
    for name, value in per_run.items():
        if name in fields:
            assert fields[name] == value, (name, message)
            fields[name] = f"<{name}>"
    fields.pop("correlation_id", None)  # checked by check_run
    if "subscription_id" in fields:
        fields["subscription_id"] = "<subscription id>"  # checked by check_run
    if "replay_session_id" in fields:
        fields["replay_session_id"] = replay_session(fields["replay_session_id"])
    if isinstance(message, codecs.ControlResponse) and message.code == 0:
        if call == "connect":
            assert message.relevant_id == run.control_session_id
            fields["relevant_id"] = "<control_session_id>"
        elif call in run.subscription_ids:
            fields["relevant_id"] = "<subscription id>"
        elif call in run.replay_session_ids:
            fields["relevant_id"] = replay_session(message.relevant_id)
    return type(message).__name__, fields


def replay_session(replay_session_id: int) -> str:
    """The reference's replay session id: a count of replays in the high 32 bits (kept), the
    replay publication's session id in the low."""
    return f"<replay {replay_session_id >> 32} session id>"


def normalised_call(group: Group, run: RunValues) -> str:
    text = group.call
    if group.name == "connect":
        text = "connect <control_session_id>"
    elif group.name in run.subscription_ids:
        text = f"{group.name} <subscription id>"
    elif group.name == "startReplay":
        text = f"startReplay {replay_session(run.replay_session_ids['startReplay'])}"
    return re.sub(r"correlationId=\d+", "correlationId=<correlation id>", text)


def exchange(groups: list[Group], run: RunValues) -> list[tuple]:
    """Per call, its normalised line, requests and responses. `getRecordingPosition` is asked
    until the recording caught up (as often as that takes): only the last ask is kept, after
    checking the earlier answers were positions on the way."""
    result = []
    for g in groups:
        requests, responses = g.requests, g.responses
        if g.name == "getRecordingPosition":
            assert len(requests) == len(responses) >= 2, g
            final = responses[-1].relevant_id
            assert all(
                isinstance(r, codecs.ControlResponse) and r.code == 0 and 0 <= r.relevant_id
                for r in responses
            ), responses
            assert [r.relevant_id for r in responses] == sorted(r.relevant_id for r in responses)
            assert responses[-2].relevant_id == final, responses  # the loop's last ask
            requests, responses = requests[-1:], responses[-1:]
        result.append(
            (
                None if g.call is None else normalised_call(g, run),
                [normalised(m, run, g.name) for m in requests],
                [normalised(m, run, g.name) for m in responses],
            )
        )
    return result


def events(groups: list[Group], run: RunValues) -> list[tuple]:
    """Every recording event in order, a run of RecordingProgress counted as its last (the
    archive reports progress as often as its duty cycles see the recording move)."""
    flat = [e for g in groups for e in g.events]
    kept = [
        e
        for e, after in zip(flat, flat[1:] + [None], strict=True)
        if not (isinstance(e, codecs.RecordingProgress) and isinstance(after, type(e)))
    ]
    return [normalised(e, run) for e in kept]


def reference_capture() -> list[Group]:
    return parse_capture(REFERENCE_EXCHANGE.read_text().splitlines())


# -- 1. Java client -> aeronio archive -----------------------------------------------------------


def test_java_client_against_aeronio_archive(java_classes, tmp_path):
    reference = reference_capture()
    reference_run = check_run(reference)
    archive_dir = tmp_path / "archive"
    started = now_ms()
    with running(aeronio_archive(archive_dir)) as server:
        lines = archive_capture(java_classes, "-")
        assert server.proc.poll() is None, server.describe()
        assert stop(server) == 0, server.describe()
    ended = now_ms()
    assert "aeronio archive stopped" in server.stderr, server.describe()

    ours = parse_capture(lines)
    # What the calls returned: the reference's, to the value, but for the per-run ids.
    assert calls(ours) == [
        "connect " + str(ours[0].responses[0].control_session_id),
        "startRecording " + str(ours[1].responses[0].relevant_id),
        "findLastMatchingRecording 0",
        "getRecordingPosition 480",
        f"listRecordings 1 [0 0 -1 {CHANNEL} {CHANNEL}]",
        f"listRecordingsForUri 1 [0 0 -1 {CHANNEL} {CHANNEL}]",
        f"listRecording 1 [0 0 -1 {CHANNEL} {CHANNEL}]",
        "listRecording(999) 0",
        "replay 3",
        "stopRecording",
        "getStopPosition 480",
        "stopRecording again: response for correlationId="
        f"{group(ours, 'stopRecording again').requests[0].correlation_id}, error: "
        f"no recording found for streamId=1001 channel={CHANNEL}",
        "getStopPosition(999): response for correlationId="
        f"{group(ours, 'getStopPosition(999)').requests[0].correlation_id}, error: "
        "unknown recording 999",
        f"startReplay {group(ours, 'startReplay').responses[0].relevant_id}",
        "stopReplay",
        f"extendRecording {group(ours, 'extendRecording').responses[0].relevant_id}",
        "stopRecording(subscriptionId)",
        "truncateRecording 320",
        "close",
    ]
    run = check_run(ours)
    assert [normalised_call(g, run) for g in ours if g.call] == [
        normalised_call(g, reference_run) for g in reference if g.call
    ]
    # Every request, response and event, decoded: the reference's, in the same order.
    assert exchange(ours, run) == exchange(reference, reference_run)
    assert events(ours, run) == events(reference, reference_run)
    assert [name for name, _ in events(ours, run)] == [
        "RecordingStarted", "RecordingProgress", "RecordingStopped",
        "RecordingStarted", "RecordingStopped",
    ]  # fmt: skip
    assert started <= run.start_timestamp <= ended
    assert run.replay_session_ids["replay"] >> 32 == 1
    assert run.replay_session_ids["startReplay"] >> 32 == 2

    # The directory it left: one recording, truncated to its first two messages.
    with Catalog(archive_dir, readonly=True) as catalog:
        (descriptor,) = list(catalog)
        assert len(catalog) == 1
        assert started <= descriptor.stop_timestamp <= ended
        assert descriptor.stop_timestamp >= descriptor.start_timestamp
        # the extension's request is noted in the catalog, as the reference does
        (extend,) = group(ours, "extendRecording").requests
        assert descriptor == codecs.RecordingDescriptor(
            control_session_id=run.control_session_id,
            correlation_id=extend.correlation_id,
            recording_id=0,
            start_timestamp=run.start_timestamp,
            stop_timestamp=descriptor.stop_timestamp,
            start_position=0,
            stop_position=320,
            initial_term_id=run.initial_term_id,
            segment_file_length=DEFAULT_SEGMENT_LENGTH,
            term_buffer_length=TERM_LENGTH,
            mtu_length=MTU,
            session_id=run.session_id,
            stream_id=STREAM_ID,
            stripped_channel=CHANNEL,
            original_channel=CHANNEL,
            source_identity=run.source_identity,
        )
        frames = read_frames(archive_dir, catalog, 0)
    assert frames == [
        (position, 132, UNFRAGMENTED, HDR_TYPE_DATA, position, run.session_id, STREAM_ID,
         run.initial_term_id, struct.pack("<i", i) + bytes(96))
        for i, position in enumerate((0, 160))
    ]  # fmt: skip
    assert sorted(p.name for p in archive_dir.iterdir()) == ["0-0.rec", "archive.catalog"]
    assert (archive_dir / "archive.catalog").stat().st_size == CATALOG_FILE_LENGTH


def read_frames(archive_dir: Path, catalog: Catalog, recording_id: int) -> list[tuple]:
    """(position, frame length, flags, type, term offset, session id, stream id, term id,
    payload) of every frame RecordingReader gives from the recording's start to its stop; the
    blocks must be contiguous and reach the stop position."""
    descriptor = catalog.descriptor(recording_id)
    frames = []
    with RecordingReader(
        archive_dir,
        catalog.layout(recording_id),
        descriptor.start_position,
        descriptor.stop_position,
    ) as reader:
        position = descriptor.start_position
        for block in reader.blocks():
            assert block.position == position, (block.position, position)
            data = bytes(block.data)
            offset = 0
            while offset < len(data):
                length, _version, flags, kind, term_offset, session, stream, term_id = (
                    DATA_FRAME.unpack_from(data, offset)
                )
                payload = data[offset + HEADER : offset + length] if kind == HDR_TYPE_DATA else b""
                frames.append(
                    (position + offset, length, flags, kind, term_offset, session, stream,
                     term_id, payload)
                )  # fmt: skip
                offset += align(length)
            position += len(data)
    assert position == descriptor.stop_position
    return frames


# -- 2. aeronio client -> Java ArchivingMediaDriver ----------------------------------------------


def message(i: int) -> bytes:
    """Message `i`: sizes from empty to fragmented (the MTU's payload is 1376 bytes)."""
    size = (0, 1, 100, 1376, 1377, 3000, 8000, 33)[i % 8]
    return bytes((i * 7 + k) % 251 for k in range(size))


async def wait_until(predicate, timeout: float, what: str):
    """The first true value of `predicate()` (awaited if it is a coroutine), polled without
    blocking the loop; AssertionError saying `what` was not so after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        await asyncio.sleep(0.01)


async def receive(subscription, count: int, timeout: float = 20.0) -> list:
    received = []
    async with asyncio.timeout(timeout):
        while len(received) < count:
            received.append(await subscription.receive())
    return received


def java_archiving_driver(aeron_dir: str, archive_dir: Path) -> Child:
    return Child(
        java_args(
            "io.aeron.archive.ArchivingMediaDriver",
            {
                "aeron.dir": aeron_dir,
                "aeron.dir.delete.on.start": "true",
                "aeron.threading.mode": "SHARED",
                "aeron.term.buffer.sparse.file": "true",
                "aeron.archive.dir": archive_dir,
                "aeron.archive.threading.mode": "SHARED",
            },
        ),
        "Java ArchivingMediaDriver",
    )


def wait_for_file(path: Path, child: Child, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if child.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {path} within {timeout} s: {child.describe()}")
        time.sleep(0.02)


async def test_aeronio_client_against_java_archive(tmp_path):
    require_aeron_java()
    aeron_dir, archive_dir = java_dir(), tmp_path / "java-archive"
    count = 200
    try:
        with running(java_archiving_driver(aeron_dir, archive_dir)) as java:
            wait_for_file(archive_dir / "archive.catalog", java)
            async with aeronio.connect() as aeron:
                await against_java_archive(aeron, count)
            assert java.proc.poll() is None, java.describe()
    finally:
        shutil.rmtree(aeron_dir, ignore_errors=True)


async def against_java_archive(aeron, count: int) -> None:
    events_subscription = await aeron.add_subscription(EVENTS_CHANNEL, EVENTS_STREAM_ID)
    async with archive.connect(aeron, message_timeout_s=20) as client:
        assert client.control_session_id != -1
        await wait_until(lambda: events_subscription.is_connected, 20, "no events image")
        started = now_ms()
        subscription_id = await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)
        assert subscription_id >= 0
        publication = await aeron.add_exclusive_publication(f"{CHANNEL}|term-length=64k", STREAM_ID)
        await wait_until(lambda: publication.is_connected, 20, "publication not connected")
        positions = [await publication.offer(message(i), timeout=10) for i in range(count)]
        end = publication.position
        assert end == positions[-1] > 5 * TERM_LENGTH  # several terms: PAD frames recorded too

        async def found():
            recording_id = await client.find_last_matching_recording(
                0, "endpoint=localhost:40123", STREAM_ID, publication.session_id
            )
            return recording_id + 1  # -1 until the recording started

        assert await wait_until(found, 20, "no recording found") - 1 == 0

        async def caught_up():
            return await client.get_recording_position(0) == end

        await wait_until(caught_up, 20, f"recording position not at {end}")
        assert await client.get_recording_position(0) == end

        descriptor = codecs.RecordingDescriptor(
            control_session_id=client.control_session_id,
            correlation_id=0,
            recording_id=0,
            start_timestamp=0,
            stop_timestamp=-1,
            start_position=0,
            stop_position=-1,
            initial_term_id=publication.initial_term_id,
            segment_file_length=DEFAULT_SEGMENT_LENGTH,
            term_buffer_length=TERM_LENGTH,
            mtu_length=MTU,
            session_id=publication.session_id,
            stream_id=STREAM_ID,
            stripped_channel=CHANNEL,
            original_channel=CHANNEL,
            source_identity="",
        )
        (got,) = await client.list_recordings()
        assert started <= got.start_timestamp <= now_ms()
        assert SOURCE_IDENTITY.fullmatch(got.source_identity), got
        descriptor = msgspec.structs.replace(
            descriptor,
            start_timestamp=got.start_timestamp,
            source_identity=got.source_identity,
        )
        assert without_correlation(got) == descriptor
        for also in (
            await client.list_recordings_for_uri("localhost:40123", STREAM_ID),
            [await client.list_recording(0)],
            await client.list_recordings(0, 1),
        ):
            assert [without_correlation(d) for d in also] == [descriptor]
        assert await client.list_recordings_for_uri("localhost:40123", STREAM_ID + 1) == []
        assert await client.list_recordings(1) == []
        assert await client.list_recording(999) is None

        # A replay of everything, then one from a message in the middle of a term.
        messages = [(message(i), positions[i]) for i in range(count)]
        assert await replayed(aeron, client, 0, 0, end, count) == messages
        first = count // 2 + 1
        start = positions[first - 1]
        assert start % TERM_LENGTH != 0
        from_middle = await replayed(aeron, client, 0, start, end - start, count - first)
        assert from_middle == messages[first:]

        await client.stop_recording(CHANNEL, STREAM_ID)
        assert await client.get_stop_position(0) == end
        (stopped,) = await client.list_recordings()
        assert started <= stopped.stop_timestamp <= now_ms()
        assert without_correlation(stopped) == msgspec.structs.replace(
            descriptor, stop_position=end, stop_timestamp=stopped.stop_timestamp
        )

        with pytest.raises(ArchiveError) as unknown:
            await client.get_stop_position(999)
        assert (unknown.value.error_code, str(unknown.value)) == (5, "unknown recording 999")
        with pytest.raises(ArchiveError) as again:
            await client.stop_recording(CHANNEL, STREAM_ID)
        assert (again.value.error_code, str(again.value)) == (
            4,
            f"no recording found for streamId={STREAM_ID} channel={CHANNEL}",
        )
        with pytest.raises(ArchiveError) as no_replay:
            await client.stop_replay(12345)
        assert (no_replay.value.error_code, str(no_replay.value)) == (
            6,
            "replay session not known for 12345",
        )

    # What the events channel said: started, progress up to the end, stopped.
    received = []
    async with asyncio.timeout(20):
        while not any(isinstance(e, codecs.RecordingStopped) for e in received):
            received.append(codecs.decode((await events_subscription.receive()).data))
    await events_subscription.close()
    progress = [e for e in received if isinstance(e, codecs.RecordingProgress)]
    assert progress and progress[-1] == codecs.RecordingProgress(0, 0, end)
    assert [e for e in received if not isinstance(e, codecs.RecordingProgress)] == [
        codecs.RecordingStarted(
            0, 0, publication.session_id, STREAM_ID, CHANNEL, descriptor.source_identity
        ),
        codecs.RecordingStopped(0, 0, end),
    ]


def without_correlation(descriptor: codecs.RecordingDescriptor) -> codecs.RecordingDescriptor:
    return msgspec.structs.replace(descriptor, correlation_id=0)


def without_session(descriptor: codecs.RecordingDescriptor) -> codecs.RecordingDescriptor:
    """A listed descriptor as a catalog holds it (control session and correlation ids 0)."""
    return msgspec.structs.replace(descriptor, control_session_id=0, correlation_id=0)


async def replayed(aeron, client, recording_id: int, position: int, length: int, count: int):
    """(data, position) of the first `count` messages of a replay to an aeronio subscription,
    which all come from the replay's session."""
    async with await aeron.add_subscription(REPLAY_CHANNEL, REPLAY_STREAM_ID) as subscription:
        replay_session_id = await client.start_replay(
            recording_id, position, length, REPLAY_CHANNEL, REPLAY_STREAM_ID
        )
        got = await receive(subscription, count)
    assert {m.header.session_id & 0xFFFFFFFF for m in got} == {replay_session_id & 0xFFFFFFFF}
    assert {m.header.stream_id for m in got} == {REPLAY_STREAM_ID}
    return [(m.data, m.position) for m in got]


# -- 3. the reference's CatalogTool and Catalog read an aeronio archive directory ----------------


async def record_with_aeronio(archive_dir: Path) -> dict:
    """Into the aeronio archive on the default channels: recording 0 from position 0 over four
    segment files, recording 1 of the same publication from where recording 0 stopped (in the
    middle of a term). Returns what was sent."""
    async with aeronio.connect() as aeron:
        async with archive.connect(aeron, message_timeout_s=20) as client:
            await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)
            publication = await aeron.add_exclusive_publication(
                f"{CHANNEL}|term-length=64k", STREAM_ID
            )
            await wait_until(lambda: publication.is_connected, 20, "not connected")
            sent = {
                "session_id": publication.session_id,
                "initial_term_id": publication.initial_term_id,
                "ends": [],
                "positions": [],
            }
            payloads = [bytes([i % 256]) * (1000 + i % 7) for i in range(480)]
            for recording_id, batch in ((0, payloads[:450]), (1, payloads[450:])):
                if recording_id == 1:
                    await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)

                    async def started():
                        try:  # an error until recording 1 is in the catalog, as the reference
                            return 1 + await client.find_last_matching_recording(
                                1, "localhost:40123", STREAM_ID, publication.session_id
                            )
                        except archive.ArchiveError:
                            return False

                    await wait_until(started, 20, "recording 1 not started")
                for payload in batch:
                    sent["positions"].append(await publication.offer(payload, timeout=10))
                end = publication.position

                async def caught_up(recording_id=recording_id, end=end):
                    return await client.get_recording_position(recording_id) == end

                await wait_until(caught_up, 20, f"recording {recording_id} not at {end}")
                await client.stop_recording(CHANNEL, STREAM_ID)
                assert await client.get_stop_position(recording_id) == end
                sent["ends"].append(end)
            sent["payloads"] = payloads
    return sent


async def test_java_catalog_tools_read_aeronio_archive(java_classes, tmp_path):
    archive_dir = tmp_path / "archive"
    with running(
        aeronio_archive(archive_dir, "--segment-file-length", str(SEGMENT_LENGTH))
    ) as server:
        sent = await record_with_aeronio(archive_dir)
        assert await asyncio.to_thread(stop, server) == 0, server.describe()

    end0, end1 = sent["ends"]
    assert end0 > 3 * SEGMENT_LENGTH and end0 % TERM_LENGTH != 0, end0
    # Recording 1 starts where recording 0 stopped, mid-term, and stays in its first segment.
    assert (end1 - (end0 - end0 % TERM_LENGTH)) < SEGMENT_LENGTH
    assert sorted(p.name for p in archive_dir.iterdir()) == [
        "0-0.rec", "0-1.rec", "0-2.rec", "0-3.rec", "1-0.rec", "archive.catalog",
    ]  # fmt: skip

    with Catalog(archive_dir, readonly=True) as catalog:
        ours = list(catalog)
        assert [(d.recording_id, d.start_position, d.stop_position) for d in ours] == [
            (0, 0, end0),
            (1, end0, end1),
        ]
        for d in ours:
            assert (d.session_id, d.initial_term_id, d.stream_id) == (
                sent["session_id"], sent["initial_term_id"], STREAM_ID,
            )  # fmt: skip
            assert (d.segment_file_length, d.term_buffer_length, d.mtu_length) == (
                SEGMENT_LENGTH, TERM_LENGTH, MTU,
            )  # fmt: skip
        payloads = [
            frame[-1]
            for recording_id in (0, 1)
            for frame in read_frames(archive_dir, catalog, recording_id)
            if frame[3] == HDR_TYPE_DATA
        ]
        assert payloads == sent["payloads"]

    # The reference's Catalog class reads every field as aeronio wrote it.
    assert java_catalog(archive_dir, java_classes) == ([as_java(d) for d in ours], 2)

    # CatalogTool: every recording's segment files check out; the count of entries.
    verify = run_java("io.aeron.archive.CatalogTool", (archive_dir, "verify"), java_classes)
    assert verify == ["(recordingId=0) OK", "(recordingId=1) OK"]
    count = run_java("io.aeron.archive.CatalogTool", (archive_dir, "count-entries"), java_classes)
    assert count == ["2"]
    # verify changed nothing (it rewrites the valid flag and, for a recording it had to
    # recover, the stop position).
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == ours

    # The reference archive, run on the directory, lists both and replays every message at its
    # position: across the four segment files, and from the middle of a term.
    messages = list(zip(sent["payloads"], sent["positions"], strict=True))
    aeron_dir = java_dir()
    try:
        with running(java_archiving_driver(aeron_dir, archive_dir)) as java:
            wait_for_file(archive_dir / "archive-mark.dat", java)
            async with aeronio.connect() as aeron:
                async with archive.connect(aeron, message_timeout_s=20) as client:
                    listed = await client.list_recordings()
                    assert [without_session(d) for d in listed] == ours
                    assert await replayed(aeron, client, 0, 0, end0, 450) == messages[:450]
                    second = await replayed(aeron, client, 1, end0, end1 - end0, 30)
                    assert second == messages[450:]
                    middle = sent["positions"][99]
                    assert middle % TERM_LENGTH != 0
                    from_middle = await replayed(aeron, client, 0, middle, end0 - middle, 350)
                    assert from_middle == messages[100:450]
            assert await asyncio.to_thread(stop, java) == 0, java.describe()
    finally:
        shutil.rmtree(aeron_dir, ignore_errors=True)
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == ours


def java_catalog(archive_dir: Path, class_path: str) -> tuple[list[dict[str, str]], int]:
    """What the reference's Catalog class reads from a directory (CatalogDump): every
    descriptor's fields by their Java names, and its countEntries()."""
    lines = run_java("io.aeron.archive.CatalogDump", (archive_dir,), class_path)
    *descriptors, count = lines
    assert count.startswith("count "), lines
    assert all(line.startswith("descriptor\t") for line in descriptors), lines
    fields = [dict(f.split("=", 1) for f in line.split("\t")[1:]) for line in descriptors]
    return fields, int(count.removeprefix("count "))


def as_java(descriptor: codecs.RecordingDescriptor) -> dict[str, str]:
    """A descriptor as CatalogDump prints it: its header (length of the descriptor, valid) and
    every field under its Java name."""
    fields = msgspec.structs.asdict(descriptor)
    return {"length": str(len(descriptor.encode_block())), "valid": "1"} | {
        _java_name(name): str(value) for name, value in fields.items()
    }


def _java_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# -- 4. aeronio reads a directory the reference archive wrote ------------------------------------


async def test_aeronio_reads_java_archive_directory(java_classes, tmp_path):
    archive_dir = tmp_path / "java-archive"
    count = 2000
    started = now_ms()
    lines = archive_capture(
        java_classes,
        str(archive_dir),
        count,
        {"aeron.archive.segment.file.length": SEGMENT_LENGTH},
    )
    ended = now_ms()
    groups = parse_capture(lines)
    run = check_run(groups)

    # 100-byte messages in 160-byte frames, 409 to a 64 KiB term and a 96-byte PAD at its end.
    positions, frames, position = [], [], 0
    for i in range(count):
        if position % TERM_LENGTH + 160 > TERM_LENGTH:
            frames.append((position, TERM_LENGTH - position % TERM_LENGTH, None))
            position += TERM_LENGTH - position % TERM_LENGTH
        frames.append((position, 132, i))
        position += 160
        positions.append(position)
    end = position
    stop_position = end - 160  # ArchiveCapture truncates the last message
    assert [g.call for g in groups if g.name in ("getRecordingPosition", "replay")] == [
        f"getRecordingPosition {end}",
        f"replay {count}",
    ]
    assert group(groups, "getStopPosition").call == f"getStopPosition {end}"
    assert group(groups, "truncateRecording").call == f"truncateRecording {stop_position}"
    (listed, _unknown) = group(groups, "listRecordings").responses
    (extend,) = group(groups, "extendRecording").requests

    assert sorted(p.name for p in archive_dir.iterdir()) == [
        "0-0.rec", "0-1.rec", "0-2.rec", "archive-mark.dat", "archive.catalog",
    ]  # fmt: skip
    with Catalog(archive_dir, readonly=True) as catalog:
        (descriptor,) = list(catalog)
        assert started <= descriptor.stop_timestamp <= ended
        # As listed while it recorded, now stopped; the reference's catalog keeps the ids of
        # the request that last extended the recording.
        assert descriptor == msgspec.structs.replace(
            listed,
            control_session_id=extend.control_session_id,
            correlation_id=extend.correlation_id,
            stop_position=stop_position,
            stop_timestamp=descriptor.stop_timestamp,
        )
        assert (descriptor.segment_file_length, descriptor.session_id) == (
            SEGMENT_LENGTH,
            run.session_id,
        )
        got = read_frames(archive_dir, catalog, 0)
    initial = run.initial_term_id
    assert got == [
        (p, length, UNFRAGMENTED, HDR_TYPE_PAD if i is None else HDR_TYPE_DATA,
         p % TERM_LENGTH, run.session_id,
         STREAM_ID, initial + p // TERM_LENGTH,
         b"" if i is None else struct.pack("<i", i) + bytes(96))
        for p, length, i in frames
        if p < stop_position
    ]  # fmt: skip
    assert sum(1 for f in got if f[3] == HDR_TYPE_DATA) == count - 1

    # The reference's Catalog class reads the same descriptor.
    assert java_catalog(archive_dir, java_classes) == ([as_java(descriptor)], 1)

    listing = aeronio_cli("list", archive_dir)
    assert listing.stdout.splitlines() == [
        f"recordingId=0 startPosition=0 stopPosition={stop_position} "
        f"startTimestamp={listed.start_timestamp} stopTimestamp={descriptor.stop_timestamp} "
        f"initialTermId={initial} segmentFileLength={SEGMENT_LENGTH} "
        f"termBufferLength={TERM_LENGTH} mtuLength={MTU} sessionId={run.session_id} "
        f"streamId={STREAM_ID} strippedChannel={CHANNEL} originalChannel={CHANNEL} "
        f"sourceIdentity={run.source_identity}"
    ]
    verify = aeronio_cli("verify", archive_dir)
    assert verify.stdout.splitlines() == ["recordingId=0 OK"]
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == [descriptor]

    # The aeronio archive, run on the directory, lists it and replays every message at its
    # position: across the three segment files, and from the middle of a term.
    messages = [(struct.pack("<i", i) + bytes(96), positions[i]) for i in range(count - 1)]
    with running(aeronio_archive(archive_dir)) as server:
        async with aeronio.connect() as aeron:
            async with archive.connect(aeron, message_timeout_s=20) as client:
                (listed_now,) = await client.list_recordings()
                assert without_session(listed_now) == msgspec.structs.replace(
                    descriptor, control_session_id=0, correlation_id=0
                )
                assert await client.get_stop_position(0) == stop_position
                assert await replayed(aeron, client, 0, 0, stop_position, count - 1) == messages
                middle = positions[999]
                assert middle % TERM_LENGTH != 0 and middle > SEGMENT_LENGTH
                from_middle = await replayed(
                    aeron, client, 0, middle, stop_position - middle, count - 1001
                )
                assert from_middle == messages[1000:]
        assert await asyncio.to_thread(stop, server) == 0, server.describe()
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == [descriptor]


def aeronio_cli(action: str, archive_dir: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "archive", action, "--dir", str(archive_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), done
    return done


# -- 5. the answers to requests that fail: the reference's, code and message ----------------------

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
            0, "aeron:udp?endpoint=localhost:40125", STREAM_ID, SourceLocation.REMOTE
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
        await wait_until(lambda: publication.is_connected, 20, "publication not connected")
        for i in range(20):
            await publication.offer(message(i), timeout=10)
        end = publication.position

        async def caught_up():
            return await client.get_recording_position(0) == end

        await wait_until(caught_up, 20, f"recording position not at {end}")
        for name, request in ERROR_CASES["active"].items():
            outcomes[name] = await outcome(request(client, end))
        await client.stop_recording_subscription(subscription_id)
        for name, request in ERROR_CASES["stopped"].items():
            outcomes[name] = await outcome(request(client, end))
        replay_session_id = await client.start_replay(
            0, 0, end, "aeron:udp?endpoint=localhost:40126", 1003
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
