"""A remote archive (option archive_control): its recordings listed over its control channel,
and each partition's range replayed over UDP into an embedded driver of the task.

Where partitions begin and end
------------------------------
The planner cannot scan a remote recording's frames, so a replay always starts where a message
is known to begin: a term boundary or the recording's start (`Recording.known_boundary`;
messages never cross a term). The replay publication has the recording's initial term id, term
length and positions, so each frame's position is its recorded position, and the frames are
found and assembled as in segment files: fragments before the first BEGIN frame (a recording
that began mid-message) are skipped, and a partition whose end is not a term boundary reads on
past it to the end of the message begun before it (then stops the replay). A message is the row
of the one partition where its first frame is: never split, never twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import numpy as np

import aeronio
from aeronio import archive
from aeronio.errors import AeronError, DriverError
from aeronio.idle import BackoffIdleStrategy
from aeronio.protocol.channel import ChannelUri
from aeronio.spark import frames as fr
from aeronio.spark import reader as rd
from aeronio.spark.recordings import (
    DataLossError,
    Recording,
    Selection,
    SourceError,
    from_descriptor,
)

if TYPE_CHECKING:
    from aeronio.archive.client import ArchiveClient
    from aeronio.client.aeron import Aeron
    from aeronio.client.subscription import Subscription
    from aeronio.spark.decode import Decoder
    from aeronio.spark.reader import Part

log = logging.getLogger("aeronio.spark")
# What the replay thread hands the reading thread: (position, bytes), its error, or None (done).
_Chunk: TypeAlias = tuple[int, np.ndarray] | BaseException | None

CHUNK_BYTES = 8 << 20  # bytes of whole terms decoded at a time (one Arrow batch)
RESPONSE_STREAM_ID = 20  # the reference client's
REPLAY_STREAM_ID = 21  # the replay, on the task's response endpoint
BLOCK_BYTES = 1 << 20  # at most this much per block_poll
PORT_ATTEMPTS = 5  # a free port taken by someone else meanwhile: try another


class Remote(NamedTuple):
    control_channel: str
    control_stream_id: int
    timeout: float  # seconds the archive may take to answer, or a replay to move on

    def where(self) -> str:
        return f"archive control channel {self.control_channel!r} stream {self.control_stream_id}"


def local_address(remote: Remote) -> str:
    """This host's address on the route to the archive's control endpoint (where the archive
    sends its responses and replays)."""
    host, port = ChannelUri.parse(remote.control_channel).address("endpoint")
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(address)
            return s.getsockname()[0]
    except OSError as e:
        raise SourceError(f"{remote.where()}: no route to {host}:{port}: {e}") from None


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _channel(host: str, port: int) -> str:
    return f"aeron:udp?endpoint={f'[{host}]' if ':' in host else host}:{port}"


@contextlib.asynccontextmanager
async def session(remote: Remote) -> AsyncIterator[tuple[Aeron, ArchiveClient, str]]:
    """(aeron, archive client, response channel): an embedded driver and a client of the remote
    archive whose responses come to a free UDP port of this host."""
    host = local_address(remote)
    async with aeronio.connect() as aeron:
        client = None
        for attempt in range(PORT_ATTEMPTS):
            channel = _channel(host, _free_port(host))
            try:
                client = await archive.connect(
                    aeron,
                    control_channel=remote.control_channel,
                    control_stream_id=remote.control_stream_id,
                    response_channel=channel,
                    response_stream_id=RESPONSE_STREAM_ID,
                    message_timeout_s=remote.timeout,
                )
                break
            except DriverError:
                if attempt == PORT_ATTEMPTS - 1:
                    raise
            except TimeoutError as e:
                raise SourceError(
                    f"no archive answers on {remote.where()} (option archive_control) within "
                    f"{remote.timeout} s: {e}"
                ) from None
            except archive.ArchiveError as e:
                raise SourceError(f"{remote.where()}: connecting to the archive: {e}") from None
        assert client is not None  # else the last attempt raised
        try:
            yield aeron, client, channel
        finally:
            await client.close()


# -- planning ---------------------------------------------------------------------------------


def list_recordings(remote: Remote, selection: Selection) -> tuple[list[Recording], dict]:
    """The recordings the selection admits, in id order, and {recording id: position recorded
    so far} of the active ones. A recording id the selection names must exist."""
    return asyncio.run(_list(remote, selection))


async def _list(remote: Remote, selection: Selection) -> tuple[list[Recording], dict]:
    async with session(remote) as (_, client, _):
        try:
            if selection.recording_ids is not None:
                descriptors = []
                for rid in sorted(selection.recording_ids):
                    d = await client.list_recording(rid)
                    if d is None:
                        raise SourceError(
                            f"option recording_ids: recording {rid} is not in the archive on "
                            f"{remote.where()}"
                        )
                    descriptors.append(d)
            else:
                descriptors = await client.list_recordings()
            found = [from_descriptor(d, remote.where()) for d in descriptors]
            found = [r for r in found if selection(r)]
            positions = {}
            for r in found:
                if r.active:
                    position = await client.get_recording_position(r.recording_id)
                    if position < 0:  # stopped since it was listed
                        position = await client.get_stop_position(r.recording_id)
                    positions[r.recording_id] = position
        except archive.ArchiveError as e:
            raise SourceError(f"{remote.where()}: {e}") from None
    return found, positions


# -- reading ----------------------------------------------------------------------------------


def read_part(
    remote: Remote,
    part: Part,
    decoder: Decoder,
    fail_on_data_loss: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator:
    """Record batches of the part's messages (`reader.Part`), replayed by the remote archive:
    a thread runs the embedded driver and the replay, and hands over whole terms (or the
    replay's last bytes) at a time; they are decoded here, as segment bytes are."""
    r: Recording = part.recording
    chunks: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def run() -> None:
        try:
            asyncio.run(_replay(remote, part, chunk_bytes, chunks, stop, fail_on_data_loss))
        except BaseException as e:  # handed to the reading thread
            _hand(chunks, stop, e)
        else:
            _hand(chunks, stop, None)

    thread = threading.Thread(target=run, name=f"aeronio-replay-{r.recording_id}", daemon=True)
    thread.start()
    first = True  # a replay from a recording's start, mid-term, may start mid-message
    try:
        while (item := chunks.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            position, buffer = item
            frames = fr.scan(buffer, position, r.term_length, r.initial_term_id)
            if frames.end != len(buffer):
                raise SourceError(
                    f"recording {r.recording_id}: the replay from {remote.where()} has no "
                    f"whole frame at position {position + frames.end}"
                )
            messages = fr.assemble(frames)
            at = messages.offset + position
            last = frames.offset[messages.last] + position  # a message never crosses a term
            in_term = last - (at - (at & (r.term_length - 1))) < r.term_length
            keep = (at >= part.emit_from) & (at < part.emit_to) & in_term
            if not keep.all():
                messages = messages.take(keep)
            lead = first and (position & (r.term_length - 1)) != 0
            for damaged in fr.broken(frames, position, r.term_length, lead, True) + position:
                if part.emit_from <= damaged < part.emit_to:
                    where = f"the replay from {remote.where()}"
                    rd.broken(part, where, int(damaged), fail_on_data_loss)
            first = False
            if len(messages):
                yield decoder.batch(r, buffer, position, frames, messages)
    finally:
        stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                chunks.get_nowait()
        thread.join()


def _hand(chunks: queue.Queue, stop: threading.Event, item: _Chunk) -> bool:
    """Put an item for the reading thread (False when it has stopped reading)."""
    while not stop.is_set():
        try:
            chunks.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


async def _hand_async(chunks: queue.Queue, stop: threading.Event, item: _Chunk) -> bool:
    """`_hand` without blocking the loop (the embedded driver runs on it)."""
    while not stop.is_set():
        try:
            chunks.put_nowait(item)
            return True
        except queue.Full:
            await asyncio.sleep(0.001)
    return False


def _ends_message(block: np.ndarray, position: int, r: Recording) -> bool:
    """Whether no message is in progress at the end of a block of whole frames."""
    if (position + len(block)) % r.term_length == 0:
        return True
    frames = fr.scan(block, position, r.term_length, r.initial_term_id)
    return len(frames) > 0 and int(fr.boundaries(frames, 0)[-1]) == len(block)


async def _replay(
    remote: Remote,
    part: Part,
    chunk_bytes: int,
    chunks: queue.Queue,
    stop: threading.Event,
    fail_on_data_loss: bool,
) -> None:
    r: Recording = part.recording
    start = r.known_boundary(min(part.scan_from, part.emit_from))
    end = part.read_limit
    if end <= start or part.emit_to <= part.emit_from:
        return
    what = f"recording {r.recording_id} on {remote.where()}"
    async with session(remote) as (aeron, client, channel):
        subscription = await aeron.add_subscription(channel, REPLAY_STREAM_ID)
        try:
            try:
                replay_id = await client.start_replay(
                    r.recording_id, start, end - start, channel, REPLAY_STREAM_ID
                )
            except archive.ArchiveError as e:
                raise SourceError(
                    f"{what}: the archive refused a replay of positions {start} to {end}: {e}"
                ) from None
            position, finished = await _receive(
                remote, part, start, end, subscription, replay_id, chunk_bytes, chunks, stop
            )
            if position < end:  # the archive need not go on (if it still is)
                with contextlib.suppress(AeronError, TimeoutError):
                    await client.stop_replay(replay_id)
            if not finished and not stop.is_set():
                problem = (
                    f"{what}: the replay ended at position {position}, before {end}: the "
                    "recording was truncated under the query, or the archive stopped the replay"
                )
                if fail_on_data_loss:
                    raise DataLossError(f"{problem} (option fail_on_data_loss false skips it)")
                log.warning("%s; skipping the rest of this partition", problem)
        finally:
            await subscription.close()


async def _receive(
    remote: Remote,
    part: Part,
    start: int,
    end: int,
    subscription: Subscription,
    replay_id: int,
    chunk_bytes: int,
    chunks: queue.Queue,
    stop: threading.Event,
) -> tuple[int, bool]:
    """Take the replay's frames into chunks for the reading thread, up to `end`, or only to the
    first message boundary past the part's end; (the position reached, whether that was all
    the part needs). Returns early when the reader stopped."""
    r: Recording = part.recording
    session_id = (replay_id & 0xFFFFFFFF) - ((replay_id & 0x80000000) << 1)  # its low 32 bits
    what = f"recording {r.recording_id} on {remote.where()}"
    idle = BackoffIdleStrategy()
    deadline = time.monotonic() + remote.timeout
    attempt = 0
    while (image := subscription.image_by_session_id(session_id)) is None:
        if stop.is_set():
            return start, False
        if time.monotonic() > deadline:
            raise SourceError(
                f"{what}: no replay arrived within {remote.timeout} s on {subscription.channel} "
                "(can the archive reach this host?)"
            )
        await idle.idle(attempt, asyncio.sleep)
        attempt += 1
    if (image.join_position, image.term_length, image.initial_term_id) != (
        start, r.term_length, r.initial_term_id
    ):  # fmt: skip
        raise SourceError(
            f"{what}: the replay from {start} came at position {image.join_position}, term "
            f"length {image.term_length}, initial term id {image.initial_term_id}, not the "
            f"recording's ({r.term_length}, {r.initial_term_id})"
        )
    state: dict[str, Any] = {"buffer": None, "filled": 0, "from": start, "finished": False}
    capacity = chunk_bytes + r.term_length

    def on_block(block: memoryview, session_id: int, term_id: int) -> None:
        position = image.position
        if state["buffer"] is None:
            state["buffer"] = np.empty(min(capacity, end - position), np.uint8)
            state["from"], state["filled"] = position, 0
        data = np.frombuffer(block, np.uint8)
        filled = state["filled"]
        state["buffer"][filled : filled + len(data)] = data
        state["filled"] = filled + len(data)
        after = position + len(data)
        if after >= end or (after >= part.emit_to and _ends_message(data, position, r)):
            state["finished"] = True

    attempt = 0
    last_move = time.monotonic()
    while True:
        if stop.is_set():
            return image.position, False
        room = end - image.position
        if state["buffer"] is not None:
            room = min(room, len(state["buffer"]) - state["filled"])
        got = image.block_poll(on_block, min(BLOCK_BYTES, room)) if room > 0 else 0
        position = image.position
        full = state["buffer"] is not None and (
            state["finished"]
            or (position % r.term_length == 0 and state["filled"] >= chunk_bytes)
            or state["filled"] == len(state["buffer"])
        )
        if full:
            buffer, state["buffer"] = state["buffer"][: state["filled"]], None
            if not await _hand_async(chunks, stop, (state["from"], buffer)):
                return position, False
        if state["finished"]:
            return position, True
        if got:
            attempt, last_move = 0, time.monotonic()
            continue
        if image.is_closed or image.is_end_of_stream:
            if state["buffer"] is not None:
                buffer, state["buffer"] = state["buffer"][: state["filled"]], None
                await _hand_async(chunks, stop, (state["from"], buffer))
            return position, False
        if time.monotonic() - last_move > remote.timeout:
            raise SourceError(
                f"{what}: the replay stalled at position {position} for {remote.timeout} s "
                f"(it reads to {end})"
            )
        await idle.idle(attempt, asyncio.sleep)
        attempt += 1
