#!/usr/bin/env python
"""Cross-process IPC: aeronio through a standalone driver vs pyzmq ipc:// vs the reference Aeron.

Every aeronio run starts `python -m aeronio.cli driver --dir /dev/shm/<unique>` as its own
process, then a publisher (or ping) process and a subscriber (or pong) process that attach to it
with `aeronio.connect(DIR)`. pyzmq runs the same pattern between two processes over ipc://.
The reference Aeron (Java 1.15.1, via /work/shared/aeron-java/aeron-java) runs its own samples
in the same run: EmbeddedIpcThroughput and EmbeddedPingPong (threads in one JVM, its own
embedded driver) - skipped with a reason, never failing the run, when Java is missing.

Throughput (payload MB/s, MB = 10**6 B), timed in the receiving process from the end of the
warmup to the last message; every message carries a u64 sequence number in its first 8 bytes
that the receiver checks, and the count and the last message's length are checked. A second
rate, e2e, runs from the sender's first timed send to the receiver's last message (one
CLOCK_MONOTONIC for all processes). Each run prints where the CPU went (receiver, sender,
driver) on stderr.

  a  try_offer loop          -> poll(handler, limit) loop       (spin; sleep(0) every 1000 idle)
  b  await pub.offer(msg)    -> async for message in sub        (default NotifyingIdleStrategy)
  c  try_offer_batch(2-D u8) -> batch_poll + batch.records(dtype) numpy views
  z  pyzmq PUSH.send         -> PULL.recv over ipc://
  j  Aeron Java EmbeddedIpcThroughput: median of its 1-second samples (first ones dropped)

Round-trip latency (32 B by default, >= 100,000 round trips after a warmup), measured per round
trip with perf_counter_ns in the ping process; median, p99, p99.9 in microseconds:

  spin     ping/pong spin on try_offer and poll (BusySpinIdleStrategy semantics)
  default  ping: await pub.offer + await sub.receive(); pong: async for + await pub.offer;
           the default NotifyingIdleStrategy (yield twice, then park until woken)
  spin-api the same calls with BusySpinIdleStrategy (what the awaitable API costs)
  zmq      pyzmq PAIR send/recv over ipc://
  java     Aeron Java EmbeddedPingPong (aeron:ipc, its HdrHistogram)

    python bench/ipc_processes.py --quick
    python bench/ipc_processes.py --markdown --out ipc_processes.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field

import common
import numpy as np
import zmq
from common import BenchError, check, fmt

import aeronio
from aeronio import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED
from aeronio.idle import BusySpinIdleStrategy

CHANNEL = "aeron:ipc"
STREAM_ID = 1001
PING_STREAM_ID = 1002
PONG_STREAM_ID = 1003
SEQ = struct.Struct("<Q")
YIELD_EVERY = 1000  # idle spins between `await asyncio.sleep(0)` in the spinning loops
AERON_JAVA = "/work/shared/aeron-java/aeron-java"
WORKER = os.path.abspath(__file__)

TPUT_MODES: dict[str, str] = {
    "a": "aeronio (a) try_offer -> poll",
    "b": "aeronio (b) await offer -> async for",
    "c": "aeronio (c) offer_batch -> batch_poll",
    "z": "pyzmq PUSH/PULL ipc://",
    "j": "Aeron Java EmbeddedIpcThroughput",
}
RTT_MODES: dict[str, str] = {
    "spin": "aeronio busy-spin poll/try_offer",
    "default": "aeronio default idle: await offer/receive",
    "spin-api": "aeronio BusySpin idle: await offer/receive",
    "zmq": "pyzmq PAIR ipc://",
    "java": "Aeron Java EmbeddedPingPong",
}


class Skipped(Exception):
    """A row that cannot run here (reported as `skipped: reason`, not as a failure)."""


# =========================================================================================
# Worker side: `python bench/ipc_processes.py --worker '{"role": ...}'`
# Protocol on stdout: "READY" once set up, then "RESULT {json}"; errors go to stderr with a
# non-zero exit. A worker that must outlive its peer waits for its stdin to close ("release").
# =========================================================================================


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Released:
    """Set when the parent closes this worker's stdin."""

    def __init__(self) -> None:
        self.event = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        with contextlib.suppress(Exception):
            sys.stdin.read()
        self.event.set()

    async def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.event.is_set():
            if time.monotonic() > deadline:
                raise BenchError("not released by the parent in time")
            await asyncio.sleep(0.005)

    def wait_blocking(self, timeout: float) -> None:
        if not self.event.wait(timeout):
            raise BenchError("not released by the parent in time")


def offer_failed(result: int, where: str) -> None:
    raise BenchError(f"{where}: offer returned {result}")


async def back_off(result: int, spins: int, where: str) -> int:
    """After an offer that took nothing: the spin count, yielding to the loop every YIELD_EVERY
    spins through back-pressure (or not connected, or an admin action); BenchError when the
    offer failed for good."""
    if result != BACK_PRESSURED and result != NOT_CONNECTED and result != ADMIN_ACTION:
        offer_failed(result, where)
    spins += 1
    if spins >= YIELD_EVERY:
        await asyncio.sleep(0)
        return 0
    return spins


async def idled(idle: int, deadline: float, count: int, total: int) -> int:
    """After a poll that found nothing: the idle count, checking the deadline and yielding to
    the loop every YIELD_EVERY idle polls."""
    idle += 1
    if idle < YIELD_EVERY:
        return idle
    check(time.monotonic() < deadline, f"stalled at {count}/{total}")
    await asyncio.sleep(0)
    return 0


async def wait_connected(*things, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(t.is_connected for t in things):
        check(time.monotonic() < deadline, "not connected within 10 s")
        await asyncio.sleep(0.001)


# -- aeronio throughput: publisher -------------------------------------------------------


async def aeron_pub(spec: dict, released: Released) -> dict:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    async with aeronio.connect(spec["dir"]) as client:
        pub = await client.add_publication(CHANNEL, spec["stream"])
        await wait_connected(pub)
        emit("READY")
        if spec["mode"] == "a":
            run = pub_spin
        elif spec["mode"] == "b":
            run = pub_await
        else:
            rows = spec["batch_rows"]

            async def run(pub, size: int, start: int, stop: int) -> None:
                await pub_batch(pub, size, start, stop, rows)

        await run(pub, size, 0, warmup)
        t0, cpu0 = time.perf_counter(), time.process_time()
        await run(pub, size, warmup, total)
        t1, cpu1 = time.perf_counter(), time.process_time()
        emit("SENT")
        await released.wait(spec["timeout"])
        return {"sent": total, "t_first": t0, "elapsed": t1 - t0, "cpu_s": cpu1 - cpu0}


async def pub_spin(pub, size: int, start: int, stop: int) -> None:
    """Messages start..stop-1 (each carrying its number), spinning through back-pressure."""
    msg = bytearray(size)
    stamp = SEQ.pack_into
    try_offer = pub.try_offer
    spins = 0
    for i in range(start, stop):
        stamp(msg, 0, i)
        while True:
            result = try_offer(msg)
            if result > 0:
                break
            spins = await back_off(result, spins, "(a) try_offer")


async def pub_await(pub, size: int, start: int, stop: int) -> None:
    msg = bytearray(size)
    stamp = SEQ.pack_into
    offer = pub.offer
    for i in range(start, stop):
        stamp(msg, 0, i)
        await offer(msg)


async def pub_batch(pub, size: int, start: int, stop: int, rows: int) -> None:
    """Records start..stop-1 as 2-D uint8 arrays of up to `rows` records per offer."""
    records = np.full((rows, size), 0xC3, dtype=np.uint8)
    seq_column = records[:, :8].view("<u8").reshape(rows)
    ramp = np.arange(rows, dtype=np.uint64)
    offer_batch = pub.try_offer_batch
    sent = start
    spins = 0
    while sent < stop:
        k = min(rows, stop - sent)
        seq_column[:k] = ramp[:k] + sent
        chunk = records[:k]
        done = 0
        while done < k:
            result = offer_batch(chunk, done)
            if result > 0:
                done += result
                continue
            spins = await back_off(result, spins, "(c) try_offer_batch")
        sent += k


# -- aeronio throughput: subscriber ------------------------------------------------------


class Window:
    """The timed window of a receiver: wall clock (CLOCK_MONOTONIC, shared by the processes),
    this process's CPU and, when known, the driver process's CPU."""

    def __init__(self, driver_pid: int | None = None):
        self.driver_pid = driver_pid
        self.t0 = self.t1 = 0.0
        self.cpu0 = self.cpu1 = 0.0
        self.d0: float | None = None
        self.d1: float | None = None

    def start(self) -> None:
        self.d0 = proc_cpu_s(self.driver_pid) if self.driver_pid else None
        self.cpu0 = time.process_time()
        self.t0 = time.perf_counter()

    def stop(self) -> None:
        self.t1 = time.perf_counter()
        self.cpu1 = time.process_time()
        self.d1 = proc_cpu_s(self.driver_pid) if self.driver_pid else None

    def result(self) -> dict:
        driver = None if self.d0 is None or self.d1 is None else self.d1 - self.d0
        return {
            "t0": self.t0,
            "t_last": self.t1,
            "elapsed": self.t1 - self.t0,
            "cpu_s": self.cpu1 - self.cpu0,
            "driver_cpu_s": driver,
        }


def check_received(spec: dict, count: int, bad: str | None, last_length: int) -> None:
    total = spec["warmup"] + spec["count"]
    check(bad is None, f"sequence check failed: {bad}")
    check(count == total, f"received {count} messages, expected {total}")
    check(last_length == spec["size"], f"last message {last_length} B, expected {spec['size']}")


async def aeron_sub(spec: dict, released: Released) -> dict:
    async with aeronio.connect(spec["dir"]) as client:
        sub = await client.add_subscription(CHANNEL, spec["stream"])
        emit("READY")
        await wait_connected(sub, timeout=spec["timeout"])
        run = {"a": sub_poll, "b": sub_async_for, "c": sub_batch}[spec["mode"]]
        window = Window(client.driver_pid)
        count, bad, last_length = await run(sub, spec, window)
        check_received(spec, count, bad, last_length)
        return {"count": spec["count"], **window.result()}


async def sub_poll(sub, spec: dict, window: Window) -> tuple[int, str | None, int]:
    """poll(handler, limit) in a spinning loop; the handler checks each message's number."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    limit = spec["fragment_limit"]
    unpack = SEQ.unpack_from
    count = 0
    errors = 0
    last_length = 0

    def handler(buffer, header) -> None:
        nonlocal count, errors
        if unpack(buffer)[0] != count:
            errors += 1
        count += 1

    def last_handler(buffer, header) -> None:
        nonlocal last_length
        last_length = len(buffer)
        handler(buffer, header)

    poll = sub.poll
    deadline = time.monotonic() + spec["timeout"]

    async def drain(upto: int) -> None:
        idle = 0
        while count < upto:
            if poll(handler, min(limit, upto - count)) == 0:
                idle = await idled(idle, deadline, count, total)

    await drain(warmup)
    window.start()
    await drain(total - 1)
    while count < total:  # the last message, through a handler that also notes its length
        if poll(last_handler, 1) == 0:
            check(time.monotonic() < deadline, f"stalled at {count}/{total}")
            await asyncio.sleep(0)
    window.stop()
    bad = f"{errors} messages out of sequence" if errors else None
    return count, bad, last_length


async def sub_async_for(sub, spec: dict, window: Window) -> tuple[int, str | None, int]:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    unpack = SEQ.unpack_from
    count = errors = 0
    data = b""
    if warmup == 0:
        window.start()
    async for message in sub:
        data = message.data
        if unpack(data)[0] != count:
            errors += 1
        count += 1
        if count == warmup:
            window.start()
        elif count == total:
            break
    window.stop()
    bad = f"{errors} messages out of sequence" if errors else None
    return count, bad, len(data)


async def sub_batch(sub, spec: dict, window: Window) -> tuple[int, str | None, int]:
    """batch_poll with batch.records(dtype): numpy views; checks each batch's numbers."""
    warmup, total, size = spec["warmup"], spec["warmup"] + spec["count"], spec["size"]
    limit = spec["fragment_limit"]
    dtype = common.record_dtype(size)
    count = 0
    bad: str | None = None
    last_length = 0

    def handler(batch) -> None:
        nonlocal count, bad, last_length
        recs = batch.records(dtype)
        k = len(recs)
        if not k:
            return
        seq = recs["seq"]
        first, last = int(seq[0]), int(seq[-1])
        if bad is None and (
            first != count
            or last != count + k - 1
            or int(seq.sum()) != k * count + k * (k - 1) // 2
        ):
            bad = f"batch at message {count}: sequence {first}..{last} over {k} records"
        if int(batch.lengths[-1]) != recs.itemsize:
            bad = bad or f"record of {int(batch.lengths[-1])} B in a batch of {recs.itemsize} B"
        count += k
        last_length = recs.itemsize

    batch_poll = sub.batch_poll
    deadline = time.monotonic() + spec["timeout"]

    async def drain(upto: int) -> None:
        idle = 0
        while count < upto:
            if batch_poll(handler, min(limit, upto - count)) == 0:
                idle = await idled(idle, deadline, count, total)

    await drain(warmup)
    window.start()
    await drain(total)
    window.stop()
    return count, bad, last_length


# -- pyzmq throughput -----------------------------------------------------------------------


@contextlib.contextmanager
def zmq_socket(spec: dict, kind: int, bind: bool, recv_timeout: bool = True):
    """A socket of `kind` bound or connected to spec["address"] (READY said once it is), with
    a receive timeout of spec["timeout"]; closed, and its context terminated, on the way out."""
    ctx = zmq.Context()
    sock = ctx.socket(kind)
    if recv_timeout:
        sock.setsockopt(zmq.RCVTIMEO, int(spec["timeout"] * 1000))
    try:
        if bind:
            sock.bind(spec["address"])
        else:
            sock.connect(spec["address"])
        emit("READY")
        yield sock
    finally:
        sock.close(linger=0)
        ctx.term()


def zmq_push(spec: dict, released: Released) -> dict:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    with zmq_socket(spec, zmq.PUSH, bind=False, recv_timeout=False) as push:
        msg = bytearray(size)
        stamp = SEQ.pack_into
        send = push.send
        for i in range(warmup):
            stamp(msg, 0, i)
            send(msg)
        t0, cpu0 = time.perf_counter(), time.process_time()
        for i in range(warmup, total):
            stamp(msg, 0, i)
            send(msg)
        t1, cpu1 = time.perf_counter(), time.process_time()
        emit("SENT")
        released.wait_blocking(spec["timeout"])
        return {"sent": total, "t_first": t0, "elapsed": t1 - t0, "cpu_s": cpu1 - cpu0}


def zmq_pull(spec: dict, released: Released) -> dict:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    with zmq_socket(spec, zmq.PULL, bind=True) as pull:
        recv = pull.recv
        unpack = SEQ.unpack_from
        window = Window()
        errors = 0
        data = b""
        i = 0
        try:
            for i in range(warmup):
                data = recv()
                if unpack(data)[0] != i:
                    errors += 1
            window.start()
            for i in range(warmup, total):
                data = recv()
                if unpack(data)[0] != i:
                    errors += 1
            window.stop()
        except zmq.Again:
            raise BenchError(f"pyzmq PULL stalled at {i}/{total}") from None
        bad = f"{errors} messages out of sequence" if errors else None
        check_received(spec, total, bad, len(data))
        return {"count": spec["count"], **window.result()}


# -- aeronio ping-pong ----------------------------------------------------------------------


def rtt_stats(rtts_ns: list[int]) -> dict:
    a = np.asarray(rtts_ns, dtype=np.int64) / 1000.0
    p50, p99, p999 = np.percentile(a, [50, 99, 99.9])
    return {
        "n": len(a),
        "median": float(p50),
        "p99": float(p99),
        "p999": float(p999),
        "mean": float(a.mean()),
        "min": float(a.min()),
        "max": float(a.max()),
    }


def ping_pong_client(spec: dict):
    idle = BusySpinIdleStrategy() if spec["mode"] == "spin-api" else None
    if idle is None:
        return aeronio.connect(spec["dir"])
    return aeronio.connect(spec["dir"], idle_strategy=idle)


async def aeron_ping(spec: dict, released: Released) -> dict:
    async with ping_pong_client(spec) as client:
        sub = await client.add_subscription(CHANNEL, PONG_STREAM_ID)
        pub = await client.add_publication(CHANNEL, PING_STREAM_ID)
        await wait_connected(pub, sub)
        emit("READY")
        run = ping_spin if spec["mode"] == "spin" else ping_await
        window = Window(client.driver_pid)
        window.start()
        rtts = await run(pub, sub, spec)
        window.stop()
        return {**rtt_stats(rtts), **window.result()}


async def ping_spin(pub, sub, spec: dict) -> list[int]:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    msg = bytearray(size)
    stamp, unpack = SEQ.pack_into, SEQ.unpack_from
    try_offer, poll = pub.try_offer, sub.poll
    clock = time.perf_counter_ns
    got = [-1]

    def handler(buffer, header) -> None:
        got[0] = unpack(buffer)[0]

    rtts: list[int] = []
    append = rtts.append
    deadline = time.monotonic() + spec["timeout"]
    spins = 0
    for i in range(total):
        stamp(msg, 0, i)
        t0 = clock()
        while True:
            result = try_offer(msg)
            if result > 0:
                break
            spins = await back_off(result, spins, "ping try_offer")
        while poll(handler, 1) == 0:
            spins += 1
            if spins >= YIELD_EVERY:
                spins = 0
                check(time.monotonic() < deadline, f"ping stalled at round trip {i}")
                await asyncio.sleep(0)
        t1 = clock()
        check(got[0] == i, f"pong {got[0]} answered ping {i}")
        if i >= warmup:
            append(t1 - t0)
    return rtts


async def ping_await(pub, sub, spec: dict) -> list[int]:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    msg = bytearray(size)
    stamp, unpack = SEQ.pack_into, SEQ.unpack_from
    offer, receive = pub.offer, sub.receive
    clock = time.perf_counter_ns
    rtts: list[int] = []
    append = rtts.append
    for i in range(total):
        stamp(msg, 0, i)
        t0 = clock()
        await offer(msg)
        message = await receive()
        t1 = clock()
        seq = unpack(message.data)[0]
        check(seq == i, f"pong {seq} answered ping {i}")
        if i >= warmup:
            append(t1 - t0)
    return rtts


async def aeron_pong(spec: dict, released: Released) -> dict:
    total = spec["warmup"] + spec["count"]
    async with ping_pong_client(spec) as client:
        sub = await client.add_subscription(CHANNEL, PING_STREAM_ID)
        pub = await client.add_publication(CHANNEL, PONG_STREAM_ID)
        emit("READY")
        await wait_connected(sub, timeout=spec["timeout"])
        cpu0 = time.process_time()
        if spec["mode"] == "spin":
            count = await pong_spin(pub, sub, total, spec["timeout"])
        else:
            count = 0
            offer = pub.offer
            async for message in sub:
                await offer(message.data)
                count += 1
                if count == total:
                    break
        cpu = time.process_time() - cpu0
        check(count == total, f"pong answered {count}, expected {total}")
        await released.wait(spec["timeout"])
        return {"count": count, "cpu_s": cpu}


async def pong_spin(pub, sub, total: int, timeout: float) -> int:
    try_offer, poll = pub.try_offer, sub.poll
    count = [0]

    def handler(buffer, header) -> None:
        while True:  # echo at once, spinning through back-pressure like Aeron's Pong
            result = try_offer(buffer)
            if result > 0:
                count[0] += 1
                return
            if result != BACK_PRESSURED and result != NOT_CONNECTED and result != ADMIN_ACTION:
                offer_failed(result, "pong try_offer")

    deadline = time.monotonic() + timeout
    idle = 0
    while count[0] < total:
        if poll(handler, 1) == 0:
            idle += 1
            if idle >= YIELD_EVERY:
                idle = 0
                check(time.monotonic() < deadline, f"pong stalled at {count[0]}/{total}")
                await asyncio.sleep(0)
    return count[0]


# -- pyzmq ping-pong ------------------------------------------------------------------------


def zmq_ping(spec: dict, released: Released) -> dict:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    with zmq_socket(spec, zmq.PAIR, bind=False) as sock:
        msg = bytearray(size)
        stamp, unpack = SEQ.pack_into, SEQ.unpack_from
        send, recv = sock.send, sock.recv
        clock = time.perf_counter_ns
        rtts: list[int] = []
        append = rtts.append
        window = Window()
        window.start()
        i = 0
        try:
            for i in range(total):
                stamp(msg, 0, i)
                t0 = clock()
                send(msg)
                data = recv()
                t1 = clock()
                seq = unpack(data)[0]
                check(seq == i, f"pong {seq} answered ping {i}")
                if i >= warmup:
                    append(t1 - t0)
        except zmq.Again:
            raise BenchError(f"pyzmq ping stalled at round trip {i}") from None
        window.stop()
        return {**rtt_stats(rtts), **window.result()}


def zmq_pong(spec: dict, released: Released) -> dict:
    total = spec["warmup"] + spec["count"]
    with zmq_socket(spec, zmq.PAIR, bind=True) as sock:
        send, recv = sock.send, sock.recv
        cpu0 = time.process_time()
        count = 0
        try:
            while count < total:
                send(recv())
                count += 1
        except zmq.Again:
            raise BenchError(f"pyzmq pong stalled at {count}/{total}") from None
        cpu = time.process_time() - cpu0
        released.wait_blocking(spec["timeout"])
        return {"count": count, "cpu_s": cpu}


ASYNC_ROLES = {
    "aeron-pub": aeron_pub,
    "aeron-sub": aeron_sub,
    "aeron-ping": aeron_ping,
    "aeron-pong": aeron_pong,
}
SYNC_ROLES = {
    "zmq-push": zmq_push,
    "zmq-pull": zmq_pull,
    "zmq-ping": zmq_ping,
    "zmq-pong": zmq_pong,
}


def worker_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    role = spec["role"]
    released = Released()
    try:
        if role in ASYNC_ROLES:

            async def bounded() -> dict:
                return await asyncio.wait_for(ASYNC_ROLES[role](spec, released), spec["timeout"])

            result = asyncio.run(bounded())
        else:
            result = SYNC_ROLES[role](spec, released)
    except TimeoutError:
        print(f"{role}: did not finish within {spec['timeout']} s", file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    emit("RESULT " + json.dumps(result))
    return 0


# =========================================================================================
# Parent side: child processes, drivers, runs
# =========================================================================================


class Child:
    """A child process (in its own process group) whose stdout lines are read by a thread and
    whose stderr goes to a temporary file shown when it fails."""

    def __init__(self, name: str, argv: list[str], stdin_text: str | None = None):
        self.name = name
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self.eof = False
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        if stdin_text is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write(stdin_text)
                self.proc.stdin.flush()
        threading.Thread(target=self._read, daemon=True, name=f"read-{name}").start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def next_line(self, timeout: float) -> str | None:
        """The next stdout line, None at EOF; raises queue.Empty after `timeout`."""
        if self.eof:
            return None
        line = self.lines.get(timeout=max(0.0, timeout))
        if line is None:
            self.eof = True
        else:
            self.output.append(line)
        return line

    def expect(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.next_line(deadline - time.monotonic())
            except queue.Empty:
                raise BenchError(
                    f"{self.name}: no {prefix.strip()!r} within {timeout:g} s{self.tail()}"
                ) from None
            if line is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
                raise BenchError(
                    f"{self.name} exited with status {self.proc.poll()} before "
                    f"{prefix.strip()!r}{self.tail()}"
                )
            if line.startswith(prefix):
                return line

    def result(self, timeout: float) -> dict:
        return json.loads(self.expect("RESULT ", timeout)[len("RESULT ") :])

    def release(self) -> None:
        """Close the child's stdin: a worker waiting to outlive its peer may now finish."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(
                f"{self.name} did not exit within {timeout:g} s{self.tail()}"
            ) from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Signal the child's process group, then SIGKILL it if it outlives `timeout`."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
        self.release()
        with contextlib.suppress(Exception):
            self.proc.stdout.close()

    def tail(self, lines: int = 12) -> str:
        try:
            self.stderr.seek(0)
            text = self.stderr.read().strip().splitlines()[-lines:]
        except (OSError, ValueError):
            return ""
        return ("\n  " + "\n  ".join(text)) if text else ""

    def close(self) -> None:
        self.stop()
        with contextlib.suppress(Exception):
            self.stderr.close()


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def shm_base() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def unique_name(kind: str) -> str:
    return f"aeronio-bench-{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass
class Options:
    term_length: int
    sparse: bool
    fragment_limit: int
    batch_rows: int
    timeout: float
    java: str | None  # the aeron-java script, None when Java rows are disabled
    java_seconds: float


class Scope:
    """Everything a run starts, torn down in reverse order in `close()` whatever happened."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.paths: list[str] = []

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def child(self, name: str, argv: list[str], stdin_text: str | None = None) -> Child:
        c = Child(name, argv, stdin_text)
        self.children.append(c)
        return c

    def worker(self, name: str, spec: dict) -> Child:
        return self.child(name, [sys.executable, WORKER, "--worker", json.dumps(spec)])

    def driver(self, opts: Options) -> tuple[Child, str]:
        """A standalone aeronio driver on a fresh /dev/shm directory, once it is up."""
        dir = os.path.join(shm_base(), unique_name("driver"))
        self.paths.append(dir)
        argv = [
            sys.executable,
            "-m",
            "aeronio.cli",
            "driver",
            "--dir",
            dir,
            "--ipc-term-length",
            str(opts.term_length),
        ]
        if opts.sparse:
            argv += ["--term-buffer-sparse-file", "true"]
        driver = self.child("aeronio driver", argv)
        driver.expect("aeronio driver pid", 30.0)
        return driver, dir

    def zmq_address(self) -> str:
        dir = tempfile.mkdtemp(prefix="aeronio-bench-zmq-")
        self.paths.append(dir)
        return f"ipc://{dir}/sock"

    def java_dir(self) -> str:
        """A fresh /dev/shm directory for an Aeron Java sample's embedded driver."""
        dir = os.path.join(shm_base(), unique_name("java"))
        self.paths.append(dir)
        return dir

    def close(self) -> None:
        for c in reversed(self.children):
            with contextlib.suppress(Exception):
                c.close()
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- throughput runs ------------------------------------------------------------------------


def pct(part: float | None, whole: float) -> str:
    return "?" if part is None or whole <= 0 else f"{100 * part / whole:.0f}%"


def report_throughput(received: dict, sent: dict, names: tuple[str, str]) -> dict[str, float]:
    """Rates of one run: `rate` timed in the receiver (end of warmup to last message) and `e2e`
    from the sender's first timed send to the receiver's last message (CLOCK_MONOTONIC is one
    clock for all processes). Prints where the CPU went."""
    n, wall = received["count"], received["elapsed"]
    rate = n / wall
    e2e = n / (received["t_last"] - sent["t_first"])
    parts = [
        f"{names[0]} {pct(received['cpu_s'], wall)} of {wall * 1e3:.1f} ms",
        f"{names[1]} {pct(sent['cpu_s'], sent['elapsed'])} of {sent['elapsed'] * 1e3:.1f} ms "
        f"({n / sent['elapsed']:,.0f} msgs/s sent)",
    ]
    if received.get("driver_cpu_s") is not None:  # /proc ticks: 10 ms resolution
        parts.append(f"driver {received['driver_cpu_s'] * 1e3:.0f} ms")
    progress(f"    {rate:>14,.0f} msgs/s (e2e {e2e:,.0f})   cpu: " + ", ".join(parts))
    return {"rate": rate, "e2e": e2e}


def run_spec(size: int, count: int, warmup: int, opts: Options, **spec) -> dict:
    """The workers' spec of one run: `spec` and what every run has."""
    return {**spec, "size": size, "count": count, "warmup": warmup, "timeout": opts.timeout}


def throughput_run(
    scope: Scope, spec: dict, opts: Options, receiver: tuple[str, str], sender: tuple[str, str]
) -> dict[str, float]:
    """The receiver worker, then the sender, each given as (name, role); the receiver's result
    once it has every message, then the sender's once released. The run's rates (the CPU report
    names each worker by its role without the prefix: sub, pub, pull, push)."""
    rx = scope.worker(receiver[0], {**spec, "role": receiver[1]})
    rx.expect("READY", 30.0)
    tx = scope.worker(sender[0], {**spec, "role": sender[1]})
    received = rx.result(opts.timeout + 30.0)
    tx.expect("SENT", 30.0)
    tx.release()
    sent = tx.result(30.0)
    rx.wait(30.0)
    tx.wait(30.0)
    names = (receiver[1].partition("-")[2], sender[1].partition("-")[2])
    return report_throughput(received, sent, names)


def aeron_throughput(
    mode: str, size: int, count: int, warmup: int, opts: Options
) -> dict[str, float]:
    """One run: driver, subscriber, publisher processes."""
    with Scope() as scope:
        driver, dir = scope.driver(opts)
        spec = run_spec(
            size,
            count,
            warmup,
            opts,
            mode=mode,
            dir=dir,
            stream=STREAM_ID,
            fragment_limit=opts.fragment_limit,
            batch_rows=opts.batch_rows,
        )
        return throughput_run(
            scope,
            spec,
            opts,
            ("aeronio subscriber", "aeron-sub"),
            ("aeronio publisher", "aeron-pub"),
        )


def zmq_throughput(size: int, count: int, warmup: int, opts: Options) -> dict[str, float]:
    with Scope() as scope:
        spec = run_spec(size, count, warmup, opts, address=scope.zmq_address())
        return throughput_run(
            scope, spec, opts, ("pyzmq PULL", "zmq-pull"), ("pyzmq PUSH", "zmq-push")
        )


JAVA_RATE = re.compile(r"Duration (\d+)ms - ([\d,]+) messages - ([\d,]+) payload bytes")


def java_available(opts: Options) -> None:
    if opts.java is None:
        raise Skipped("disabled (--no-java)")
    if shutil.which("java") is None:
        raise Skipped("no java")
    if not os.access(opts.java, os.X_OK):
        raise Skipped(f"no {opts.java}")


def java_argv(opts: Options, dir: str, props: dict[str, object], cls: str) -> list[str]:
    return [opts.java, f"-Daeron.dir={dir}", *(f"-D{k}={v}" for k, v in props.items()), cls]


def java_throughput(size: int, opts: Options) -> tuple[list[float], str]:
    """Aeron's EmbeddedIpcThroughput for --java-seconds; its per-second rates (msgs/s) after
    dropping the first two (JIT warmup) and any printed once shutdown began."""
    java_available(opts)
    with Scope() as scope:
        dir = scope.java_dir()
        props = {"aeron.sample.messageLength": size}
        java = scope.child(
            "Aeron Java", java_argv(opts, dir, props, "io.aeron.samples.EmbeddedIpcThroughput")
        )
        rates: list[float] = []
        deadline = time.monotonic() + opts.java_seconds + 60.0  # first run may fetch the jar
        stop_at: float | None = None
        while True:
            now = time.monotonic()
            if stop_at is not None and now >= stop_at:
                break
            if now >= deadline:
                break
            wait_until = stop_at if stop_at is not None else deadline
            try:
                line = java.next_line(min(0.5, wait_until - now))
            except queue.Empty:
                continue
            if line is None:
                break
            m = JAVA_RATE.search(line)
            if m:
                if stop_at is None:  # time the run from the first sample
                    stop_at = time.monotonic() + opts.java_seconds
                ms, msgs = int(m.group(1)), int(m.group(2).replace(",", ""))
                if ms > 0:
                    rates.append(msgs * 1000.0 / ms)
        java.stop(signal.SIGINT, 15.0)  # it registers SIGINT for an orderly shutdown
        if not rates:
            status = java.proc.poll()
            raise Skipped(f"no throughput lines from Aeron Java (status {status}){java.tail(3)}")
        kept = rates[2:] if len(rates) >= 4 else rates
        return kept, f"{len(kept)} 1-s samples (of {len(rates)})"


# -- latency runs ---------------------------------------------------------------------------


def latency_run(scope: Scope, spec: dict, opts: Options, name: str, kind: str) -> dict:
    """The pong worker `{name} pong` (role `{kind}-pong`), then the ping; the ping's statistics
    once it is done, after the pong's answer count once released."""
    pong = scope.worker(f"{name} pong", {**spec, "role": f"{kind}-pong"})
    pong.expect("READY", 30.0)
    ping = scope.worker(f"{name} ping", {**spec, "role": f"{kind}-ping"})
    stats = ping.result(opts.timeout + 30.0)
    pong.release()
    answered = pong.result(30.0)
    ping.wait(30.0)
    pong.wait(30.0)
    report_latency(stats, answered)
    return stats


def aeron_latency(mode: str, size: int, count: int, warmup: int, opts: Options) -> dict:
    with Scope() as scope:
        driver, dir = scope.driver(opts)
        spec = run_spec(size, count, warmup, opts, mode=mode, dir=dir)
        return latency_run(scope, spec, opts, "aeronio", "aeron")


def zmq_latency(size: int, count: int, warmup: int, opts: Options) -> dict:
    with Scope() as scope:
        spec = run_spec(size, count, warmup, opts, address=scope.zmq_address())
        return latency_run(scope, spec, opts, "pyzmq", "zmq")


def report_latency(stats: dict, answered: dict) -> None:
    wall = stats["elapsed"]
    parts = [
        f"ping {pct(stats['cpu_s'], wall)}",
        f"pong {pct(answered['cpu_s'], wall)}",
    ]
    if stats.get("driver_cpu_s") is not None:
        parts.append(f"driver {pct(stats['driver_cpu_s'], wall)}")
    progress(
        f"    median {stats['median']:.2f} us, p99 {stats['p99']:.2f} us, "
        f"p99.9 {stats['p999']:.2f} us   cpu over {wall:.2f} s: " + ", ".join(parts)
    )


HDR_ROW = re.compile(r"^\s*([\d.]+)\s+([01]\.\d+)\s+(\d+)(?:\s+[\d.]+)?\s*$")
HDR_MEAN = re.compile(r"Mean\s*=\s*([\d.]+)")
HDR_MAX = re.compile(r"Max\s*=\s*([\d.]+)")
HDR_COUNT = re.compile(r"Total count\s*=\s*(\d+)")


def parse_hdr(lines: list[str]) -> dict:
    """Median, p99, p99.9 (first value at or above each percentile), mean and max from an
    HdrHistogram percentile distribution in microseconds; {'raw': ...} if it does not parse."""
    rows = []
    for line in lines:
        m = HDR_ROW.match(line)
        if m:
            rows.append((float(m.group(2)), float(m.group(1))))
    summary = [line.strip() for line in lines if line.startswith("#[")]
    mean = next((float(m.group(1)) for x in summary if (m := HDR_MEAN.search(x))), None)
    top = next((float(m.group(1)) for x in summary if (m := HDR_MAX.search(x))), None)
    n = next((int(m.group(1)) for x in summary if (m := HDR_COUNT.search(x))), None)
    if not rows:
        return {"raw": " ".join(summary) or "no histogram in the output"}

    def at(p: float) -> float:
        return next((v for q, v in rows if q >= p), rows[-1][1])

    return {
        "n": n,
        "median": at(0.5),
        "p99": at(0.99),
        "p999": at(0.999),
        "mean": mean,
        "min": rows[0][1],
        "max": top if top is not None else rows[-1][1],
    }


def java_latency(size: int, count: int, warmup: int, opts: Options) -> dict:
    java_available(opts)
    with Scope() as scope:
        dir = scope.java_dir()
        props = {
            "aeron.sample.messageLength": size,
            "aeron.sample.ping.channel": CHANNEL,
            "aeron.sample.pong.channel": CHANNEL,
            "aeron.sample.ping.streamId": PING_STREAM_ID,
            "aeron.sample.pong.streamId": PONG_STREAM_ID,
            "aeron.sample.messages": count,
            "aeron.sample.warmup.messages": max(warmup, 1),
            "aeron.sample.warmup.iterations": 1,
        }
        java = scope.child(
            "Aeron Java",
            java_argv(opts, dir, props, "io.aeron.samples.EmbeddedPingPong"),
            stdin_text="n\n",  # its "Execute again? (y/n)" prompt
        )
        lines: list[str] = []
        deadline = time.monotonic() + opts.timeout + 60.0
        while True:
            try:
                line = java.next_line(deadline - time.monotonic())
            except queue.Empty:
                break
            if line is None:
                break
            lines.append(line)
            if line.startswith("#[Buckets"):
                break
        java.stop(signal.SIGINT, 15.0)
        stats = parse_hdr(lines)
        if not lines:
            raise Skipped(f"no output from Aeron Java{java.tail(3)}")
        return stats


# =========================================================================================
# Report
# =========================================================================================


@dataclass
class TputCell:
    mode: str
    size: int
    count: int
    rates: list[float] = field(default_factory=list)
    e2e_rates: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def rate(self) -> float | None:
        return common.median_or_none(self.rates)

    @property
    def e2e(self) -> float | None:
        return common.median_or_none(self.e2e_rates)

    @property
    def mb(self) -> float | None:
        r = self.rate
        return None if r is None else r * self.size / 1e6

    @property
    def spread(self) -> str:
        return common.span(self.rates)


@dataclass
class RttCell:
    mode: str
    size: int
    count: int
    stats: dict | None = None
    note: str = ""


def fmt_x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def tput_rows(cells: list[TputCell]) -> list[list[str]]:
    zmq_rate = {c.size: c.rate for c in cells if c.mode == "z"}
    java_rate = {c.size: c.rate for c in cells if c.mode == "j"}
    rows = []
    for c in cells:
        vs_zmq = vs_java = ""
        if c.mode in "abc" and c.rate:
            if zmq_rate.get(c.size):
                vs_zmq = f"{c.rate / zmq_rate[c.size]:.2f}x"
            if java_rate.get(c.size):
                vs_java = f"{c.rate / java_rate[c.size]:.2f}x"
        note = c.note or c.spread
        rows.append(
            [
                TPUT_MODES[c.mode],
                str(c.size),
                "-" if c.mode == "j" else f"{c.count:,}",
                fmt(c.rate, ",.0f"),
                fmt(c.mb, ",.1f"),
                "-" if c.mode == "j" else fmt(c.e2e, ",.0f"),
                vs_zmq,
                vs_java,
                note,
            ]
        )
    return rows


TPUT_HEADERS = [
    "path",
    "size B",
    "N",
    "msgs/s",
    "MB/s",
    "e2e msgs/s",
    "vs pyzmq",
    "vs Aeron",
    "min..max msgs/s / note",
]
TPUT_RIGHT = {1, 2, 3, 4, 5, 6, 7}


def rtt_rows(cells: list[RttCell]) -> list[list[str]]:
    zmq_median = {c.size: c.stats["median"] for c in cells if c.mode == "zmq" and c.stats}
    rows = []
    for c in cells:
        s = c.stats or {}
        if "raw" in s:
            rows.append([RTT_MODES[c.mode], str(c.size), f"{c.count:,}"] + [""] * 6 + [s["raw"]])
            continue
        ratio = ""
        if c.mode != "zmq" and s.get("median") and zmq_median.get(c.size):
            ratio = f"{zmq_median[c.size] / s['median']:.2f}x"
        rows.append(
            [
                RTT_MODES[c.mode],
                str(c.size),
                f"{c.count:,}",
                fmt(s.get("median"), ",.2f"),
                fmt(s.get("p99"), ",.2f"),
                fmt(s.get("p999"), ",.2f"),
                fmt(s.get("mean"), ",.2f"),
                fmt(s.get("max"), ",.0f"),
                ratio,
                c.note,
            ]
        )
    return rows


RTT_HEADERS = [
    "path",
    "size B",
    "round trips",
    "median us",
    "p99 us",
    "p99.9 us",
    "mean us",
    "max us",
    "vs pyzmq",
    "note",
]
RTT_RIGHT = {1, 2, 3, 4, 5, 6, 7, 8}


def targets(tput: list[TputCell], rtt: list[RttCell]) -> list[str]:
    """The issue's targets, met or not, from what this run measured."""

    def t(mode: str, size: int = 32) -> float | None:
        return next((c.rate for c in tput if c.mode == mode and c.size == size), None)

    def r(mode: str) -> float | None:
        cell = next((c for c in rtt if c.mode == mode), None)
        return None if cell is None or not cell.stats else cell.stats.get("median")

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT met")

    out = []
    a, z = t("a"), t("z")
    ratio = a / z if a and z else None
    out.append(
        f"32 B try_offer/poll >= 3x pyzmq: {fmt_x(ratio)} -> "
        f"{verdict(None if ratio is None else ratio >= 3)}"
    )
    c, j = t("c"), t("j")
    ratio = c / j if c and j else None
    out.append(
        f"32 B batch path >= Aeron Java IPC rate: {fmt_x(ratio)} -> "
        f"{verdict(None if ratio is None else ratio >= 1)}"
    )
    spin = r("spin")
    out.append(
        f"busy-spin RTT median <= 10 us: {fmt(spin, '.2f')} us -> "
        f"{verdict(None if spin is None else spin <= 10)}"
    )
    default, zmq_rtt = r("default"), r("zmq")
    ok = None if default is None or zmq_rtt is None else default <= zmq_rtt
    out.append(
        f"default idle RTT median <= pyzmq: {fmt(default, '.2f')} vs "
        f"{fmt(zmq_rtt, '.2f')} us -> {verdict(ok)}"
    )
    return out


NOTES = [
    "Throughput: msgs/s timed in the receiving process from the end of the warmup to the last "
    "message, median of the repeats (min..max shown); MB = 10^6 payload bytes. e2e msgs/s: "
    "from the sender's first timed send to the receiver's last message (CLOCK_MONOTONIC, one "
    "clock for all processes); below msgs/s when the sender was ahead of the receiver when "
    "the warmup ended.",
    "aeronio rows: three processes (standalone driver, publisher, subscriber), a fresh driver "
    "per run; pyzmq rows: two processes over ipc://.",
    "Aeron Java rows: the reference Aeron 1.15.1 samples, publisher/subscriber (ping/pong) "
    "threads and an embedded driver in one JVM - not cross-process; throughput = median of its "
    "1-second samples.",
    "Latency: per round trip in the ping process after the warmup, numpy percentiles. The "
    "default idle strategy yields to the loop about 50 times before parking, so a reply that "
    "comes within tens of microseconds is caught without a wake-up; a slower one costs a "
    "cross-process wake-up (compare the mean and p99 as well as the median).",
    "vs pyzmq: throughput aeronio / pyzmq; latency pyzmq median / this median (higher is "
    "better for both). vs Aeron: aeronio / Aeron Java msgs/s.",
]


def text_report(info, tput, rtt, repeats, warmups) -> str:
    out = [f"{k:>14}: {v}" for k, v in info.items()]
    out.append(f"{'repeats':>14}: {repeats} (throughput; median shown)")
    out.append(f"{'warmup':>14}: {warmups}")
    if tput:
        out += ["", "Throughput (cross-process IPC)", ""]
        out += common.text_table(TPUT_HEADERS, tput_rows(tput), TPUT_RIGHT)
    if rtt:
        out += ["", "Round-trip latency (ping-pong over IPC)", ""]
        out += common.text_table(RTT_HEADERS, rtt_rows(rtt), RTT_RIGHT)
    out += ["", "Targets:"] + [f"  {x}" for x in targets(tput, rtt)]
    out += [""] + [f"* {x}" for x in NOTES]
    return "\n".join(out)


def markdown_report(info, tput, rtt, repeats, warmups, command) -> str:
    out = ["## Cross-process IPC: aeronio vs pyzmq vs Aeron (Java)", ""]
    out.extend(f"- **{k}**: {v}" for k, v in info.items())
    out.append(f"- **repeats**: {repeats} (throughput; median shown)")
    out.append(f"- **warmup**: {warmups}")
    out.append(f"- **command**: `{command}`")
    if tput:
        out += ["", "### Throughput", ""]
        out += common.md_table(TPUT_HEADERS, tput_rows(tput), TPUT_RIGHT)
    if rtt:
        out += ["", "### Round-trip latency", ""]
        out += common.md_table(RTT_HEADERS, rtt_rows(rtt), RTT_RIGHT)
    out += ["", "### Targets", ""] + [f"- {x}" for x in targets(tput, rtt)]
    out += [""] + [f"- {x}" for x in NOTES]
    return "\n".join(out) + "\n"


def java_version() -> str:
    if shutil.which("java") is None:
        return "not found"
    try:
        done = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


# =========================================================================================
# Main
# =========================================================================================


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Cross-process IPC throughput and ping-pong latency: aeronio through a "
        "standalone driver vs pyzmq over ipc:// vs the reference Aeron (Java), in one run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="32,1024", help="throughput message sizes (>= 8)")
    parser.add_argument(
        "--count",
        default=None,
        help="messages per throughput run: one number, or one per size "
        "(default 1,000,000 for sizes <= 64 B, else 300,000)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed messages first (default: count / 5, at most 200,000)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs per cell")
    parser.add_argument(
        "--modes",
        default="a,b,c,z,j",
        help=f"throughput paths, from {','.join(TPUT_MODES)} (empty: none)",
    )
    parser.add_argument("--rtt-count", type=int, default=100_000, help="timed round trips")
    parser.add_argument("--rtt-warmup", type=int, default=10_000, help="untimed round trips")
    parser.add_argument("--rtt-size", type=int, default=32, help="ping-pong message size")
    parser.add_argument(
        "--rtt-modes",
        default="spin,default,spin-api,zmq,java",
        help=f"latency paths, from {','.join(RTT_MODES)} (empty: none)",
    )
    parser.add_argument(
        "--term-length", type=int, default=64 * 1024 * 1024, help="driver --ipc-term-length"
    )
    parser.add_argument(
        "--sparse",
        action="store_true",
        help="driver --term-buffer-sparse-file true (default: allocated and pre-mapped, Aeron's "
        "default)",
    )
    parser.add_argument("--fragment-limit", type=int, default=4096, help="(a, c) poll limit")
    parser.add_argument("--batch-rows", type=int, default=1024, help="(c) records per offer")
    parser.add_argument(
        "--java-seconds", type=float, default=10.0, help="Aeron Java throughput run length"
    )
    parser.add_argument("--aeron-java", default=AERON_JAVA, help="the aeron-java script")
    parser.add_argument("--no-java", action="store_true", help="skip the Aeron Java rows")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds before a run fails")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 50,000 messages, 1 repeat, 5,000 round trips, 3 s of Java",
    )
    parser.add_argument("--markdown", action="store_true", help="also print a markdown report")
    parser.add_argument("--out", metavar="FILE", help="write the markdown report to FILE")
    return parser


INT_ERRORS = ("{what}: integers, not {text!r}", "{what}: positive integers, not {text!r}")


@contextlib.contextmanager
def java_row(cell: TputCell | RttCell):
    """An Aeron Java row: when it is skipped or fails, that is noted in the cell and on stderr
    and the run goes on."""
    try:
        yield
    except Skipped as e:
        cell.note = f"skipped: {e}"
        progress(f"    {cell.note}")
    except BenchError as e:
        cell.note = f"failed: {e}".splitlines()[0]
        progress(f"    {e}")


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.worker is not None:
        return worker_main(args.worker)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop every child and remove every dir.
    signal.signal(signal.SIGTERM, _terminated)
    sizes, counts = common.sizes_and_counts(parser, args, INT_ERRORS)
    if any(s < 8 for s in sizes) or args.rtt_size < 8:
        parser.error("sizes must be at least 8 bytes (every message carries a u64 sequence)")
    common.check_counts(parser, counts, sizes)
    modes = common.split_modes(parser, args.modes, TPUT_MODES, "--modes")
    rtt_modes = common.split_modes(parser, args.rtt_modes, RTT_MODES, "--rtt-modes")
    common.require_positive(parser, args, ("repeats", "rtt_count", "fragment_limit", "batch_rows"))
    if args.rtt_warmup < 0 or (args.warmup is not None and args.warmup < 0):
        parser.error("warmups must not be negative")
    if args.quick:
        counts = [50_000]
        args.repeats = 1
        args.rtt_count = 5_000
        args.rtt_warmup = 1_000
        args.java_seconds = 3.0
    counts = common.per_size_counts(counts, sizes)
    warmups = [args.warmup if args.warmup is not None else min(200_000, n // 5) for n in counts]
    opts = Options(
        term_length=args.term_length,
        sparse=args.sparse,
        fragment_limit=args.fragment_limit,
        batch_rows=args.batch_rows,
        timeout=args.timeout,
        java=None if args.no_java else args.aeron_java,
        java_seconds=args.java_seconds,
    )
    info = common.machine_info(with_load=True)
    info["java"] = java_version()
    info["aeronio setup"] = (
        f"standalone driver process (python -m aeronio.cli driver), aeron:ipc, term "
        f"{args.term_length:,} B ({'sparse' if args.sparse else 'allocated'}), "
        f"concurrent publication, fragment limit {args.fragment_limit}, batch rows "
        f"{args.batch_rows}, spinning loops yield every {YIELD_EVERY} idle polls"
    )

    tput: list[TputCell] = []
    for size, n, w in zip(sizes, counts, warmups, strict=True):
        for mode in modes:
            cell = TputCell(mode, size, n)
            tput.append(cell)
            progress(f"{TPUT_MODES[mode]}, {size} B, N={n:,} (warmup {w:,})")
            if mode == "j":
                with java_row(cell):
                    cell.rates, cell.note = java_throughput(size, opts)
                    progress(f"    {cell.rate:>14,.0f} msgs/s ({cell.note})")
                continue
            for _ in range(args.repeats):
                if mode == "z":
                    rates = zmq_throughput(size, n, w, opts)
                else:
                    rates = aeron_throughput(mode, size, n, w, opts)
                cell.rates.append(rates["rate"])
                cell.e2e_rates.append(rates["e2e"])

    rtt: list[RttCell] = []
    for mode in rtt_modes:
        cell = RttCell(mode, args.rtt_size, args.rtt_count)
        rtt.append(cell)
        progress(
            f"{RTT_MODES[mode]}, {args.rtt_size} B, {args.rtt_count:,} round trips "
            f"(warmup {args.rtt_warmup:,})"
        )
        if mode == "zmq":
            cell.stats = zmq_latency(args.rtt_size, args.rtt_count, args.rtt_warmup, opts)
        elif mode == "java":
            with java_row(cell):
                cell.stats = java_latency(args.rtt_size, args.rtt_count, args.rtt_warmup, opts)
                cell.note = "busy-spin threads, one JVM"
                if "raw" in cell.stats:
                    progress(f"    {cell.stats['raw']}")
                else:
                    progress(
                        f"    median {cell.stats['median']:.2f} us, p99 {cell.stats['p99']:.2f} us"
                    )
        else:
            cell.stats = aeron_latency(mode, args.rtt_size, args.rtt_count, args.rtt_warmup, opts)

    warm_text = (
        ", ".join(f"{w:,} msgs before {s} B runs" for s, w in zip(sizes, warmups, strict=True))
        + f"; {args.rtt_warmup:,} round trips"
    )
    print(text_report(info, tput, rtt, args.repeats, warm_text))
    common.write_markdown(
        args,
        argv,
        "bench/ipc_processes.py",
        lambda command: markdown_report(info, tput, rtt, args.repeats, warm_text, command),
    )
    return 0


if __name__ == "__main__":
    common.run_main(main, interrupted_exit=True)
