"""What the archive interop tests (tests/interop/test_archive_*.py) share: the channels and
lengths of their archives, the processes (an `aeronio archive serve`, the reference
ArchivingMediaDriver, Java programs run to their end), the messages they send and the frames a
recording holds, what the reference's Catalog class reads.

The reference archive's default channels have fixed ports (control 8010, responses 8020,
events 8030), so these tests must not run concurrently with each other: a module of
tests/interop holds the run's lock on them while it runs (`reference_ports`,
tests/interop/conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import shutil
import signal
import struct
import sys
import time
import uuid
from pathlib import Path

import msgspec

from aeronio.archive import Catalog, RecordingReader, codecs
from tests.support.child import Child
from tests.support.reference_aeron import java_args

REFERENCE_EXCHANGE = Path(__file__).parents[1] / "data" / "archive" / "java-exchange.txt"

CHANNEL = "aeron:udp?endpoint=localhost:14123"
STREAM_ID = 1001
REPLAY_CHANNEL = "aeron:udp?endpoint=localhost:14124"
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


def message(i: int) -> bytes:
    """Message `i`: sizes from empty to fragmented (the MTU's payload is 1376 bytes)."""
    size = (0, 1, 100, 1376, 1377, 3000, 8000, 33)[i % 8]
    return bytes((i * 7 + k) % 251 for k in range(size))


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
