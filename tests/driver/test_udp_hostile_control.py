"""What a publication's driver does with the control frames of a broken or hostile receiver,
forged on a real UDP socket: counted and dropped, never a failed duty cycle, and the NAKs that
make sense still answered."""

import socket
import struct

import aeronio
from aeronio.counters import SystemCounters
from aeronio.protocol import control as p
from aeronio.protocol.frames import (
    HDR_TYPE_DATA,
    HDR_TYPE_SETUP,
    DataHeader,
    SetupFrame,
    error_frame,
    iter_frames,
    nak_frame,
    status_message,
)
from tests.support.procs import await_until

STREAM = 9
MESSAGE = 100  # a 100-byte message takes a 160-byte frame


def counter(aeron, descriptor: SystemCounters) -> int:
    return next(c.value for c in aeron.counters.for_each() if c.label == descriptor.label)


class ForgedReceiver:
    """A receiver forged on a UDP socket: it hears a publication's datagrams and answers with
    the status messages and NAKs a test makes."""

    def __init__(self):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.setblocking(False)
        self.port = self.socket.getsockname()[1]
        self.publication: tuple[str, int] | None = None  # where its control frames go
        self.setup: SetupFrame | None = None
        self.frames: list[tuple[DataHeader, bytes]] = []  # DATA frames heard, with their bytes

    def close(self) -> None:
        self.socket.close()

    def hear(self) -> bool:
        """Read what arrived; True if anything did."""
        heard = False
        while True:
            try:
                datagram, self.publication = self.socket.recvfrom(65536)
            except BlockingIOError:
                return heard
            heard = True
            for ref in iter_frames(datagram):
                if ref.type == HDR_TYPE_SETUP:
                    self.setup = SetupFrame.decode(datagram, ref.offset)
                elif ref.type == HDR_TYPE_DATA and ref.frame_length:
                    frame = datagram[ref.offset : ref.offset + ref.frame_length]
                    self.frames.append((DataHeader.decode(frame), frame))

    def heard(self, count: int) -> bool:
        """Read what arrived; True once `count` DATA frames were heard."""
        self.hear()
        return len(self.frames) >= count

    def send(self, frame: bytes) -> None:
        assert self.publication is not None
        self.socket.sendto(frame, self.publication)

    async def connect(self) -> SetupFrame:
        """Wait for the publication's SETUP and answer it with a status message."""
        await await_until(lambda: self.hear() and self.setup, 10, "the publication's SETUP")
        setup = self.setup
        self.send(
            status_message(
                session_id=setup.session_id,
                stream_id=STREAM,
                consumption_term_id=setup.active_term_id,
                consumption_term_offset=0,
                receiver_window=32 * 1024,
                receiver_id=1,
            ).encode()
        )
        return setup

    def nak(self, term_id: int, term_offset: int, length: int) -> None:
        self.send(
            nak_frame(
                session_id=self.setup.session_id,
                stream_id=STREAM,
                term_id=term_id,
                term_offset=term_offset,
                length=length,
            ).encode()
        )


async def test_naks_not_at_a_frame_boundary_are_invalid_and_a_good_one_is_still_answered():
    receiver = ForgedReceiver()
    channel = f"aeron:udp?endpoint=127.0.0.1:{receiver.port}|term-length=64k"
    try:
        async with aeronio.connect() as aeron:
            publication = await aeron.add_publication(channel, STREAM)
            setup = await receiver.connect()
            await publication.wait_connected(timeout=10)
            messages = [bytes([i]) * MESSAGE for i in range(4)]
            for message in messages:
                await publication.offer(message, timeout=10)
            await await_until(lambda: receiver.heard(4), 10, "the messages")
            sent = {header.term_offset: frame for header, frame in receiver.frames}
            receiver.frames.clear()
            errors = counter(aeron, SystemCounters.ERRORS)
            invalid = counter(aeron, SystemCounters.INVALID_PACKETS)
            term_id = setup.active_term_id
            receiver.nak(term_id, 8, 160)  # inside the first frame
            receiver.nak(term_id, -32, 160)  # before the term
            receiver.nak(term_id + 1, -65536 + 160, 160)  # the second frame, named from the next
            receiver.nak(term_id, 160, 160)  # the second frame: resent
            await await_until(lambda: receiver.heard(1), 10, "the second frame resent")
            assert [(h.term_offset, frame) for h, frame in receiver.frames] == [(160, sent[160])]
            assert counter(aeron, SystemCounters.INVALID_PACKETS) == invalid + 3
            assert counter(aeron, SystemCounters.ERRORS) == errors
    finally:
        receiver.close()


async def test_a_receivers_err_frame_is_told_to_the_publications_clients_once():
    """A receiver's ERR frame (Aeron 1.53's, its image rejected): the publication's clients are
    told (ON_PUBLICATION_ERROR: the receiver's id, address, error code and message), once; an
    ERR frame of a receiver not heard tells nobody, and malformed ones (the message past the
    frame, or over 1023 bytes) are counted invalid and dropped. Every ERR frame used to be an
    invalid packet: the publisher was never told."""
    receiver = ForgedReceiver()
    channel = f"aeron:udp?endpoint=127.0.0.1:{receiver.port}|term-length=64k"
    told: list[p.PublicationError] = []
    try:
        async with aeronio.connect(publication_error_handler=told.append) as aeron:
            publication = await aeron.add_publication(channel, STREAM)
            setup = await receiver.connect()  # receiver id 1
            await publication.wait_connected(timeout=10)
            invalid = counter(aeron, SystemCounters.INVALID_PACKETS)

            def err(receiver_id: int, message: bytes) -> bytes:
                return error_frame(
                    session_id=setup.session_id, stream_id=STREAM, receiver_id=receiver_id,
                    group_tag=3, error_code=p.IMAGE_REJECTED, error_length=len(message),
                    error_message=message,
                ).encode()  # fmt: skip

            past_its_frame = bytearray(err(1, b"bad"))
            struct.pack_into("<i", past_its_frame, 36, 4)
            over_1023 = bytearray(err(1, bytes(1024)))
            receiver.send(err(2, b"not heard"))
            receiver.send(bytes(past_its_frame))
            receiver.send(bytes(over_1023))
            receiver.send(err(1, b"image rejected"))
            receiver.send(err(1, b"again"))
            receiver.send(bytes(past_its_frame))  # the last: all before it were read then
            await await_until(
                lambda: counter(aeron, SystemCounters.INVALID_PACKETS) == invalid + 3,
                10,
                "the malformed ERR frames counted",
            )
            assert told == [
                p.PublicationError(
                    registration_id=publication.registration_id,
                    destination_registration_id=p.NULL_VALUE,
                    session_id=setup.session_id,
                    stream_id=STREAM,
                    receiver_id=1,
                    group_tag=3,
                    source_address="127.0.0.1",
                    source_port=receiver.port,
                    error_code=p.IMAGE_REJECTED,
                    error_message="image rejected",
                )
            ]
            assert counter(aeron, SystemCounters.ERRORS) == 0
    finally:
        receiver.close()
