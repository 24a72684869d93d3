"""Hostile datagrams against a driver's receive path: fuzzed DATA/PAD/SETUP/SM/NAK/RTTM frames
(random, and mutated valid ones) sent over loopback to an embedded driver's subscription port
while a real stream goes through it, then the stream checked: every message once, in order.

    python -m bench.hostile.fuzz_datagrams [--datagrams 200000] [--messages 20000] [--seed 1]

Prints the datagrams sent, the invalid packets the driver counted and the stream's result; exits
non-zero if the stream lost, duplicated or reordered a message. The fuzzed frames of the stream's
own session all carry a frame length no writer writes (below a header, past the term, wrapping
when aligned in 32 bits): a driver that took one would break the stream (Aeron's frames are not
authenticated, so a well-formed forged frame would be taken: the probe does not send those). Other
sessions' frames (a few sessions, so a few images at most) are anything.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import struct
import sys
import time

import aeronio
from aeronio.counters import SystemCounters
from tests.support.procs import system_counters

STREAM = 1001
TERM = 64 * 1024
DATA = struct.Struct("<iBBHiiiiq")  # DATA and PAD
SETUP = struct.Struct("<iBBHiiiiiiii")
SM = struct.Struct("<iBBHiiiiiq")
NAK = struct.Struct("<iBBHiiiii")
RTTM = struct.Struct("<iBBHiiqqq")
BAD_LENGTHS = [1, 31, -1, -32, -(2**31), TERM + 32, 1 << 30, 0x7FFFFFE0, 0x7FFFFFF0, 0x7FFFFFFF]


class Fuzzer:
    """Datagrams to send: random bytes, frames of every type, and mutations of them."""

    def __init__(self, rng: random.Random, session_id: int):
        self.rng = rng
        self.session_id = session_id
        self.fakes = [rng.randrange(-(2**31), 2**31) for _ in range(4)]

    def int32(self) -> int:
        rng = self.rng
        return rng.choice([0, 1, -1, 32, TERM, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)])

    def offset(self) -> int:
        return self.rng.choice(
            [0, 32, TERM - 32, TERM, -32, 8, self.rng.randrange(TERM // 32) * 32]
        )

    def data(self, session_id: int, frame_type: int = 1) -> bytes:
        rng = self.rng
        body = rng.randbytes(rng.choice([0, 8, 33, 100, 1376]))
        length = 32 + len(body)
        term_id = rng.choice([0, 1, self.int32()])
        header = DATA.pack(
            length, 0, 0xC0, frame_type, self.offset(), session_id, STREAM, term_id, 0
        )
        frame = header + body
        return frame + bytes(-len(frame) % 32) if rng.random() < 0.5 else frame

    def frame(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(7)
        session = rng.choice(self.fakes)
        stream = rng.choice([STREAM, STREAM, self.int32()])
        if kind == 0:
            return self.data(session)
        if kind == 1:
            return self.data(session, frame_type=0)  # a PAD (its header, or with a body)
        if kind == 2:
            return SETUP.pack(
                40,
                0,
                0,
                5,
                self.offset(),
                session,
                stream,
                0,
                rng.choice([0, 1]),
                rng.choice([TERM, TERM, self.int32()]),
                rng.choice([1408, self.int32()]),
                0,
            )
        if kind == 3:
            return SM.pack(
                36,
                0,
                rng.choice([0, 0x80]),
                3,
                session,
                stream,
                0,
                self.offset(),
                self.int32(),
                rng.getrandbits(63),
            )
        if kind == 4:
            return NAK.pack(28, 0, 0, 2, session, stream, 0, self.offset(), self.int32())
        if kind == 5:
            return RTTM.pack(
                40,
                0,
                rng.choice([0, 0x80]),
                6,
                session,
                stream,
                rng.getrandbits(62),
                0,
                rng.getrandbits(62),
            )
        return DATA.pack(0, 0, rng.choice([0xC0, 0xE0]), 1, self.offset(), session, stream, 0, 0)

    def own_session_frame(self) -> bytes:
        """A DATA or PAD frame of the real stream's session with a frame length no writer writes,
        alone or after a valid-looking frame."""
        rng = self.rng
        frame = bytearray(self.data(self.session_id, frame_type=rng.choice([0, 1])))
        struct.pack_into("<i", frame, 0, rng.choice(BAD_LENGTHS))
        if rng.random() < 0.3:
            first = self.data(self.session_id)
            offset = struct.unpack_from("<i", first, 8)[0] + len(first)
            struct.pack_into("<i", frame, 8, offset)
            return first + bytes(frame)
        return bytes(frame)

    def mutate(self, datagram: bytes) -> bytes:
        rng = self.rng
        data = bytearray(datagram)
        for _ in range(rng.randrange(1, 4)):
            choice = rng.randrange(4)
            if choice == 0 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif choice == 1 and len(data) >= 4:
                struct.pack_into("<i", data, 0, rng.choice([*BAD_LENGTHS, self.int32()]))
            elif choice == 2:
                del data[rng.randrange(len(data) + 1) :]
            else:
                data += rng.randbytes(rng.randrange(64))
        return bytes(data)

    def datagram(self) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            return rng.randbytes(rng.randrange(80))
        if roll < 0.3:
            return self.own_session_frame()
        frame = self.frame()
        if roll < 0.7:
            frame = self.mutate(frame)
            # a mutation may have turned it into the real session's frame: keep those bad
            if struct.unpack_from("<i", frame.ljust(16), 12)[0] == self.session_id:
                return self.own_session_frame()
        return frame


async def run(datagrams: int, messages: int, seed: int) -> int:
    rng = random.Random(seed)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=64k"
    async with aeronio.connect() as aeron:
        subscription = await aeron.add_subscription(channel, STREAM)
        publication = await aeron.add_exclusive_publication(channel, STREAM)
        await asyncio.wait_for(publication.wait_connected(), 30)
        session_id = publication.session_id
        received: list[int] = []
        foreign = 0

        async def subscribe() -> None:
            nonlocal foreign
            async for message in subscription:
                if message.session_id != session_id:
                    foreign += 1
                    continue
                received.append(struct.unpack_from("<q", message.data)[0])
                if len(received) == messages:
                    return

        async def publish() -> None:
            for seq in range(messages):
                size = rng.choice([8, 100, 1400, 3000])
                await publication.offer(struct.pack("<q", seq) + bytes(size - 8), timeout=60)
                if seq % 16 == 0:
                    await asyncio.sleep(0)

        fuzzer = Fuzzer(random.Random(seed + 1), session_id)
        reader = asyncio.create_task(subscribe())
        writer = asyncio.create_task(publish())
        started = time.monotonic()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            for i in range(datagrams):
                sender.sendto(fuzzer.datagram(), ("127.0.0.1", port))
                if i % 32 == 31:
                    await asyncio.sleep(0)  # the driver runs on this loop: let it read
        sent_seconds = time.monotonic() - started
        await asyncio.wait_for(writer, 120)
        try:
            await asyncio.wait_for(reader, 120)
        except TimeoutError:
            pass
        counters = system_counters(aeron.driver_dir)
        in_order = received == list(range(messages))
        print(f"datagrams sent: {datagrams:,} in {sent_seconds:.1f} s (seed {seed})")
        print(
            f"invalid packets counted by the driver: {counters[SystemCounters.INVALID_PACKETS]:,}"
        )
        print(f"errors counted by the driver: {counters[SystemCounters.ERRORS]:,}")
        print(
            f"stream: {len(received):,} of {messages:,} messages received, "
            f"{'in order, each once' if in_order else 'LOST, DUPLICATED OR REORDERED'}; "
            f"{foreign:,} messages of the fuzzed sessions' images"
        )
        return 0 if in_order else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datagrams", type=int, default=200_000)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    opts = parser.parse_args()
    sys.exit(asyncio.run(run(opts.datagrams, opts.messages, opts.seed)))


if __name__ == "__main__":
    main()
