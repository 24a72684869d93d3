"""Concurrent publications under real contention: threads and processes appending to one log.

Every message carries (writer id, sequence, payload length, crc32) and a payload that is a pure
function of (writer, sequence), so the consumer can rebuild the exact expected bytes: a torn,
lost, duplicated, reordered or interleaved message fails the check.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import struct
import subprocess
import sys
import threading
import time
import zlib

import pytest

import aeronio
from aeronio import _core
from aeronio.counters import (
    PUBLISHER_LIMIT_TYPE_ID,
    SUBSCRIBER_POSITION_TYPE_ID,
    CountersReader,
    SystemCounters,
)
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.support.procs import await_until, wait_for_image

MTU = 1408
MAX_PAYLOAD = MTU - 32
MSG_HEADER = struct.Struct("<IIII")  # writer, sequence, payload length, crc32(payload)
BASE = random.Random(20240601).randbytes(1 << 17)
B_FLAG, E_FLAG = 0x80, 0x40


def payload_length(writer: int, seq: int) -> int:
    """Mostly small, some straddling one frame's payload (mtu - 32), some spanning many frames."""
    r = (writer * 1_000_003 + seq * 7_919) & 0xFFFF
    if seq % 97 == 13:
        return 3_000 + r % 9_000  # 3..9 fragments
    if seq % 11 == 5:
        # whole message length (header + payload) of MAX_PAYLOAD - 2 .. MAX_PAYLOAD + 2
        return MAX_PAYLOAD - MSG_HEADER.size - 2 + r % 5
    return r % 200


def make_message(writer: int, seq: int) -> bytes:
    length = payload_length(writer, seq)
    start = (writer * 131 + seq * 17) % (len(BASE) - length)
    payload = BASE[start : start + length]
    return MSG_HEADER.pack(writer, seq, length, zlib.crc32(payload)) + payload


class Checker:
    """A poll handler: checks fragment flags (no interleaving), reassembles, checks each message
    is byte-identical to what its writer sent and arrives in its writer's order, exactly once."""

    def __init__(self, writers: int, session_id: int):
        self.next_seq = [0] * writers
        self.received = 0
        self.fragmented = 0
        self.switches = 0  # consecutive messages from different writers: real interleaving
        self._last_writer = -1
        self.session_id = session_id
        self.errors: list[str] = []
        self._in_message = False
        self._assembler = aeronio.FragmentAssembler(self._on_message)

    def __call__(self, buffer, header) -> None:
        flags = header.flags & (B_FLAG | E_FLAG)
        if header.session_id != self.session_id:
            self.errors.append(f"fragment of session {header.session_id}")
        if flags & B_FLAG:
            if self._in_message:
                self.errors.append(f"B fragment inside an unfinished message at {header.position}")
            self._in_message = not flags & E_FLAG
        elif not self._in_message:
            self.errors.append(f"continuation fragment with no message begun at {header.position}")
        elif flags & E_FLAG:
            self._in_message = False
        self._assembler(buffer, header)

    def _on_message(self, buffer, header) -> None:
        data = bytes(buffer)
        if len(data) < MSG_HEADER.size:
            self.errors.append(f"short message of {len(data)} bytes")
            return
        writer, seq, length, _crc = MSG_HEADER.unpack_from(data)
        if writer >= len(self.next_seq):
            self.errors.append(f"unknown writer {writer}")
            return
        if data != make_message(writer, seq):
            self.errors.append(f"torn message writer={writer} seq={seq} len={len(data)}")
        expected = self.next_seq[writer]
        if seq != expected:
            self.errors.append(f"writer {writer}: got seq {seq}, expected {expected}")
        self.next_seq[writer] = seq + 1
        if writer != self._last_writer:
            self.switches += 1
            self._last_writer = writer
        if length + MSG_HEADER.size > MAX_PAYLOAD:
            self.fragmented += 1
        self.received += 1

    def assert_ok(self, counts: list[int]) -> None:
        assert not self.errors, self.errors[:10]
        assert self.next_seq == counts
        assert self.received == sum(counts)
        assert not self._in_message


async def consume(sub, checker: Checker, total: int, alive=lambda: True) -> None:
    """Poll until `total` messages arrived (or fail fast on an error / dead writers)."""
    idle_since = None
    while checker.received < total:
        if checker.errors:
            break
        if sub.poll(checker, 256) == 0:
            if not alive():
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 2.0:
                    break  # writers are gone and nothing more arrives
            await asyncio.sleep(0.0002)
        else:
            idle_since = None
            await asyncio.sleep(0)


# -- threads ------------------------------------------------------------------------------


def test_message_pattern_self_check():
    """The checker rejects a torn or reordered message (so the concurrent tests can fail)."""
    checker = Checker(1, 7)
    good = make_message(0, 0)
    torn = bytearray(make_message(0, 1))
    torn[-1] ^= 0xFF
    header = aeronio.Header.decode(
        bytes([0, 0, 0, 0, 0, 0xC0, 1, 0]) + bytes(4) + (7).to_bytes(4, "little") + bytes(16)
    )
    checker(good, header)
    checker(bytes(torn), header)
    checker(make_message(0, 5), header)
    assert len(checker.errors) == 2
    begin = bytearray(header.to_bytes())
    begin[5] = B_FLAG
    checker(b"x", aeronio.Header.decode(bytes(begin)))
    checker(b"y", aeronio.Header.decode(bytes(begin)))  # a second B before the E: interleaved
    assert len(checker.errors) == 3
    assert sum(payload_length(w, s) + 16 > MAX_PAYLOAD for w in range(4) for s in range(200)) > 20


async def test_threads_offer_to_one_concurrent_publication():
    writers, per_writer = 4, 20_000
    async with aeronio.connect() as aeron:
        sub = await aeron.add_subscription("aeron:ipc", 1001)
        pub = await aeron.add_publication(f"aeron:ipc?term-length=256k|mtu={MTU}", 1001)
        await wait_for_image(sub)
        checker = Checker(writers, pub.session_id)
        stop = threading.Event()
        barrier = threading.Barrier(writers)
        failures: list[BaseException] = []
        retries = [0] * writers

        def write(writer: int) -> None:
            try:
                barrier.wait(5)
                for seq in range(per_writer):
                    message = make_message(writer, seq)
                    while True:
                        result = pub.try_offer(message)
                        if result > 0:
                            break
                        if result not in (aeronio.BACK_PRESSURED, aeronio.ADMIN_ACTION):
                            raise AssertionError(f"writer {writer} seq {seq}: result {result}")
                        if stop.is_set():
                            return
                        retries[writer] += 1
                        if result == aeronio.BACK_PRESSURED:
                            time.sleep(0.0001)
            except BaseException as e:  # reported by the test thread
                failures.append(e)

        threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(writers)]
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)  # make the threads interleave between appends
        for t in threads:
            t.start()
        try:
            await asyncio.wait_for(
                consume(
                    sub,
                    checker,
                    writers * per_writer,
                    alive=lambda: any(t.is_alive() for t in threads),
                ),
                30,
            )
        finally:
            stop.set()
            for t in threads:
                t.join(5)
            sys.setswitchinterval(switch_interval)
        assert not failures, failures
        checker.assert_ok([per_writer] * writers)
        assert checker.fragmented > 0
        assert checker.switches > writers  # the writers really interleaved
        assert sum(retries) > 0  # the writers did meet back-pressure / term rotations
        assert pub.position == sub.images[0].position
        # Many rotations of a 256 KiB term happened under contention.
        assert pub.position > 8 * pub.term_length


# -- processes ----------------------------------------------------------------------------

CHILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_aeronio_concurrency_child", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.child_main(sys.argv[2:])
"""


def spawn(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, os.path.abspath(__file__), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def child_main(argv: list[str]) -> None:
    """Entry point of the child processes (run through CHILD)."""
    mode, *rest = argv
    if mode == "writer":
        _child_writer(*rest)
    elif mode == "reader":
        _child_reader(*rest)
    elif mode == "crash":
        _child_crash(*rest)
    else:
        raise SystemExit(f"unknown mode {mode}")


def _child_writer(log_file, counters_file, counter_id, writer, count, ready_file, go_file):
    writer, count, counter_id = int(writer), int(count), int(counter_id)
    log = LogBuffers.open(log_file)
    counters = CountersReader.open(counters_file)
    appender = _core.LogAppender(
        log.mapped, counters.buffer.owner, counters.value_offset(counter_id), False
    )
    open(ready_file, "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.001)
    retries = 0
    for seq in range(count):
        message = make_message(writer, seq)
        while True:
            result = appender.try_offer(message)
            if result > 0:
                break
            if result not in (_core.BACK_PRESSURED, _core.ADMIN_ACTION):
                raise SystemExit(f"writer {writer} seq {seq}: result {result}")
            if time.monotonic() > deadline:
                raise SystemExit(f"writer {writer} stuck at seq {seq}")
            retries += 1
            if result == _core.BACK_PRESSURED:
                time.sleep(0.0002)
    print(f"done {writer} {count} {retries}", flush=True)


def _child_reader(log_file, counters_file, counter_id, count):
    """Consume `count` messages through an ImageReader on the given subscriber position."""
    count, counter_id = int(count), int(counter_id)
    log = LogBuffers.open(log_file)
    counters = CountersReader.open(counters_file)
    reader = _core.ImageReader(log.mapped, counters.buffer.owner, counters.value_offset(counter_id))
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < count:
        if reader.poll(lambda buffer, header: got.append(bytes(buffer)), count - len(got)) == 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"reader got only {len(got)} of {count}")
            time.sleep(0.001)
    values = [int.from_bytes(m[:8], "little") for m in got]
    print(f"read {len(got)} {values[0]} {values[-1]} {reader.position}", flush=True)


def _child_crash(log_file, counters_file, counter_id, kind):
    """Die in the middle of an append: after a claim (negative frame length in the log) or
    after reserving space on the tail without writing any header (zeroed frame)."""
    log = LogBuffers.open(log_file)
    if kind == "claim":
        counters = CountersReader.open(counters_file)
        appender = _core.LogAppender(
            log.mapped, counters.buffer.owner, counters.value_offset(int(counter_id)), False
        )
        claim = appender.try_claim(500)
        claim.buffer[:5] = b"DYING"
    else:
        index = log.active_term_count % 3
        log.metadata.get_and_add_int64(8 * index, 512)
    os._exit(3)


def find_counter(reader: CountersReader, type_id: int, registration_id: int) -> int:
    ids = [
        c.id
        for c in reader.for_each()
        if c.type_id == type_id and c.registration_id == registration_id
    ]
    assert len(ids) == 1, ids
    return ids[0]


async def wait_process(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"child timed out: {out} {err}")
        await asyncio.sleep(0.005)
    return proc.communicate()


async def test_processes_offer_to_one_concurrent_publication(tmp_path):
    writers, per_writer = 3, 20_000
    async with aeronio.connect() as aeron:
        sub = await aeron.add_subscription("aeron:ipc", 1002)
        pub = await aeron.add_publication(f"aeron:ipc?term-length=128k|mtu={MTU}", 1002)
        image = await wait_for_image(sub)
        counters_file = os.path.join(aeron.driver_dir, "cnc.dat")
        limit_id = find_counter(aeron.counters, PUBLISHER_LIMIT_TYPE_ID, pub.registration_id)
        assert aeron.counters.get_counter_value(limit_id) == pub.position_limit
        checker = Checker(writers, pub.session_id)
        go_file = tmp_path / "go"
        procs = [
            spawn(
                "writer",
                pub.log_file,
                counters_file,
                limit_id,
                w,
                per_writer,
                tmp_path / f"ready{w}",
                go_file,
            )
            for w in range(writers)
        ]
        try:
            deadline = time.monotonic() + 20
            while not all((tmp_path / f"ready{w}").exists() for w in range(writers)):
                assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
                assert time.monotonic() < deadline, "children did not start"
                await asyncio.sleep(0.005)
            go_file.touch()
            await asyncio.wait_for(
                consume(
                    sub,
                    checker,
                    writers * per_writer,
                    alive=lambda: any(p.poll() is None for p in procs),
                ),
                40,
            )
            outputs = [await wait_process(p, 10) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
        for p, (out, err) in zip(procs, outputs, strict=True):
            assert p.returncode == 0, err
            assert out.startswith("done"), (out, err)
        checker.assert_ok([per_writer] * writers)
        assert checker.fragmented > 0
        assert checker.switches > writers  # the writers really interleaved
        assert image.position == pub.position
        assert pub.position > 8 * pub.term_length


async def test_subscriber_position_moved_by_another_process_moves_publisher_limit():
    async with aeronio.connect() as aeron:
        sub = await aeron.add_subscription("aeron:ipc", 1003)
        pub = await aeron.add_publication("aeron:ipc?term-length=64k", 1003)
        image = await wait_for_image(sub)
        window = pub.term_length // 2
        await await_until(
            lambda: pub.position_limit == image.position + window,
            10,
            "the publisher limit a term window past the subscriber",
        )
        limit = pub.position_limit

        # Fill the window: offers stop with BACK_PRESSURED at the limit.
        sent = 0
        while True:
            result = pub.try_offer(sent.to_bytes(8, "little") + bytes(992))
            if result == aeronio.ADMIN_ACTION:
                continue
            if result < 0:
                break
            sent += 1
        assert result == aeronio.BACK_PRESSURED
        assert pub.position >= limit
        await asyncio.sleep(0.02)
        assert pub.position_limit == limit  # nobody consumed: the limit stays

        sub_pos_id = find_counter(aeron.counters, SUBSCRIBER_POSITION_TYPE_ID, sub.registration_id)
        counters_file = os.path.join(aeron.driver_dir, "cnc.dat")
        proc = spawn("reader", pub.log_file, counters_file, sub_pos_id, sent)
        out, err = await wait_process(proc, 20)
        assert proc.returncode == 0, err
        _, count, first, last, position = out.split()
        assert (int(count), int(first), int(last)) == (sent, 0, sent - 1)
        assert int(position) == pub.position
        # This process sees the other process's consumption through the shared counter...
        assert image.position == pub.position
        assert aeron.counters.get_counter_value(sub_pos_id) == pub.position

        # ...and so does the driver, which moves the publisher limit.
        async def limit_moves():
            while pub.position_limit != pub.position + pub.term_length // 2:
                await asyncio.sleep(0.001)

        await asyncio.wait_for(limit_moves(), 5)
        assert pub.position_limit > limit
        assert pub.try_offer(b"after") > 0


def test_child_module_imports_standalone():
    """The child entry point loads this file as a module (no pytest state needed)."""
    spec = importlib.util.spec_from_file_location("_probe", os.path.abspath(__file__))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.make_message(1, 2) == make_message(1, 2)


@pytest.mark.parametrize("kind", ["claim", "reserve"])
async def test_process_dying_mid_append_is_unblocked(kind):
    async with aeronio.connect(publication_unblock_timeout_ns=200_000_000) as aeron:
        sub = await aeron.add_subscription("aeron:ipc", 1004)
        pub = await aeron.add_publication("aeron:ipc?term-length=64k", 1004)
        image = await wait_for_image(sub)
        assert await pub.offer(b"before") > 0
        limit_id = find_counter(aeron.counters, PUBLISHER_LIMIT_TYPE_ID, pub.registration_id)
        counters_file = os.path.join(aeron.driver_dir, "cnc.dat")
        proc = spawn("crash", pub.log_file, counters_file, limit_id, kind)
        _, err = await wait_process(proc, 20)
        assert proc.returncode == 3, err
        hole = 544 if kind == "claim" else 512  # align(500 + 32) or the raw reservation
        assert pub.position == 64 + hole
        after = [b"after-%d" % i for i in range(5)]
        for message in after:
            assert pub.try_offer(message) > 0
        got: list[bytes] = []

        async def receive():
            while len(got) < 6:
                if not sub.poll(lambda buffer, header: got.append(bytes(buffer)), 10):
                    await asyncio.sleep(0.001)

        await asyncio.wait_for(receive(), 10)
        assert got == [b"before", *after]
        assert aeron.counters.get_counter_value(SystemCounters.UNBLOCKED_PUBLICATIONS) == 1
        assert image.position == pub.position
        assert await pub.offer(b"still works") > 0


@pytest.mark.loops
async def test_threads_offer_while_async_for_waits_on_the_doorbell():
    """Writers in other threads ring the subscriber's doorbell across threads."""
    writers, per_writer = 2, 5_000
    async with aeronio.connect() as aeron:
        sub = await aeron.add_subscription("aeron:ipc", 1005)
        pub = await aeron.add_publication(f"aeron:ipc?term-length=128k|mtu={MTU}", 1005)
        await wait_for_image(sub)
        checker = Checker(writers, pub.session_id)
        stop = threading.Event()
        failures: list[BaseException] = []

        def write(writer: int) -> None:
            try:
                for seq in range(per_writer):
                    message = make_message(writer, seq)
                    while (result := pub.try_offer(message)) < 0:
                        if result not in (aeronio.BACK_PRESSURED, aeronio.ADMIN_ACTION):
                            raise AssertionError(f"writer {writer} seq {seq}: result {result}")
                        if stop.is_set():
                            return
                        time.sleep(0.0001)
                    if seq % 500 == 0:
                        time.sleep(0.002)  # let the reader run dry and park now and then
            except BaseException as e:
                failures.append(e)

        async def read():
            async for message in sub:
                checker._on_message(message.data, message.header)
                if checker.received == writers * per_writer or checker.errors:
                    return

        threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(writers)]
        for t in threads:
            t.start()
        try:
            await asyncio.wait_for(read(), 30)
        finally:
            stop.set()
            for t in threads:
                t.join(5)
        assert not failures, failures
        checker.assert_ok([per_writer] * writers)
