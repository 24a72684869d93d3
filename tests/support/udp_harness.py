"""Pieces of the sans-IO UDP tests (test_udp_sans_io, test_multicast_sans_io, test_pcap_replay):
positions in shared memory, an in-memory network that drops, duplicates and reorders, the
messages sent through it, the image a receiver makes from a SETUP, and DATA/PAD frames handed
to it."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from aeronio import _core
from aeronio.counters import SystemCounters
from aeronio.driver.data_dispatcher import DataDispatcher
from aeronio.driver.receiver_state import ReceiverStateMachine
from aeronio.driver.sender_state import SenderStateMachine
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import HDR_TYPE_PAD, DataHeader, FrameRef, SetupFrame


class Slot:
    """A position in shared memory (the appender reads the publisher limit, the image reader
    advances the subscriber position, through atomics)."""

    def __init__(self, value: int = 0):
        self.array = np.zeros(8, dtype=np.uint8)
        self.buffer = _core.AtomicBuffer(self.array)  # what the Cython core takes, as a Counter
        self.offset = 0
        self.set(value)

    def get(self) -> int:
        return self.buffer.get_int64_volatile(0)

    def set(self, value: int) -> None:
        self.buffer.put_int64_ordered(0, value)

    def increment(self, delta: int = 1) -> int:
        return self.buffer.get_and_add_int64(0, delta)


class LossyNetwork:
    def __init__(self, rng: random.Random, loss: float, duplicate: float, reorder: float):
        self.rng, self.loss, self.duplicate, self.reorder = rng, loss, duplicate, reorder
        self.queue: list[bytes] = []
        self.dropped = 0

    def send(self, datagram) -> None:
        data = bytes(datagram)
        if self.rng.random() < self.loss:
            self.dropped += 1
            return
        self.queue.append(data)
        if self.rng.random() < self.duplicate:
            self.queue.append(data)

    def deliver(self) -> list[bytes]:
        out, self.queue = self.queue, []
        for i in range(len(out) - 1):
            if self.rng.random() < self.reorder:
                j = self.rng.randrange(i, len(out))
                out[i], out[j] = out[j], out[i]
        return out


def message(i: int) -> bytes:
    rng = random.Random(i)
    size = (
        rng.choice([0, 1, 7, 32, 100, 500, 1376, 1377, 3000, 5000]) if i % 7 else rng.randrange(64)
    )
    return i.to_bytes(4, "little") + rng.randbytes(size)


class Publisher:
    """The sending side: a publication's log (session 77, stream 10), its appender with a
    publisher limit, and the sans-IO SenderStateMachine reading it."""

    def __init__(
        self, path: Path, term_length: int, mtu: int, initial_term_id: int, system, **sender
    ):
        self.log = LogBuffers.create(
            path,
            term_length=term_length,
            initial_term_id=initial_term_id,
            session_id=77,
            stream_id=10,
            mtu=mtu,
        )
        self.pub_limit = Slot()
        self.appender = _core.LogAppender(self.log.mapped, self.pub_limit.array, 0, False)
        self.sender = SenderStateMachine(
            self.log,
            sender_position=Slot(),
            sender_limit=Slot(),
            sender_bpe=Slot(),
            system=system,
            now_ns=0,
            **sender,
        )

    def datagrams(self, now_ns: int) -> list:
        """What the driver's duty cycle sends at `now_ns`, without sockets: the new data the C
        sender may send (what the DataPath sends straight from the log), then what the
        SenderStateMachine says is due (SETUP, retransmits, heartbeat)."""
        out: list = []
        self.sender.data_sender.collect(out, now_ns)
        return out + self.sender.send(now_ns)

    def offer(self, start: int, total: int, burst: int) -> int:
        """Append message(start), ... up to `burst` of them (fewer at back-pressure, none
        past `total`); the next message's number."""
        while start < total and burst > 0:
            result = self.appender.try_offer(message(start))
            if result == _core.ADMIN_ACTION:
                continue
            if result < 0:
                break
            start += 1
            burst -= 1
        return start


def image_from_setup(
    log_path: Path,
    setup: SetupFrame,
    *,
    receiver_id: int,
    system: dict[SystemCounters, Slot],
    now_ns: int,
    reliable: bool = True,
) -> tuple[ReceiverStateMachine, _core.ImageReader, Slot]:
    """What a receiver makes of a session's SETUP: the image (its log created at `log_path`,
    joined where the SETUP says), a reader of that log and the subscriber position the reader
    advances and the image consumes from."""
    log = LogBuffers.create(
        log_path,
        term_length=setup.term_length,
        initial_term_id=setup.initial_term_id,
        session_id=setup.session_id,
        stream_id=setup.stream_id,
        mtu=setup.mtu,
        term_id=setup.active_term_id,
        term_offset=setup.term_offset,
    )
    join = d.compute_position(
        setup.active_term_id, setup.term_offset, setup.term_length, setup.initial_term_id
    )
    subscriber_position = Slot(join)
    image = ReceiverStateMachine(
        log,
        join_position=join,
        receiver_id=receiver_id,
        rebuild_position=Slot(),
        hwm_position=Slot(),
        consumption_position=subscriber_position.get,
        system=system,
        now_ns=now_ns,
        reliable=reliable,
    )
    reader = _core.ImageReader(log.mapped, subscriber_position.array, 0)
    return image, reader, subscriber_position


def feed_frame(
    image: ReceiverStateMachine, datagram: bytes, ref: FrameRef, header: DataHeader, now_ns: int
) -> bool | None:
    """Hand the DATA or PAD frame at `ref` (its header decoded) to the image: a heartbeat to
    on_heartbeat (None), anything else as its bytes on the wire (a PAD: its header) to insert,
    whose answer is returned."""
    if ref.is_heartbeat:
        image.on_heartbeat(header.term_id, header.term_offset, header.flags, now_ns)
        return None
    length = 32 if ref.type == HDR_TYPE_PAD else d.align(ref.frame_length)
    frame = datagram[ref.offset : ref.offset + length]
    return image.rebuilder.insert(frame, now_ns)


def deliver(dispatcher: DataDispatcher, datagram: bytes, source: tuple, now_ns: int) -> None:
    """What the driver's DataPath does with a datagram, without sockets: a data packet of a
    known image goes to the C router, anything else to the dispatcher."""
    if not dispatcher.router.route(datagram, now_ns):
        dispatcher.on_slow_datagrams([(memoryview(datagram), source)], now_ns)
