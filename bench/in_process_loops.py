"""The in-process loops of bench/ipc_throughput.py: one run of each mode, aeronio's and
pyzmq's, timed; each checks that exactly N messages (and the right bytes) arrived."""

import asyncio
import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import zmq
from basics import (
    BenchError,
    check,
    record_dtype,
)

import aeronio
from aeronio import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

CHANNEL = "aeron:ipc"
STREAM_ID = 1001
LINK_DELAY_S = 0.05


def make_message(size: int, fill: int) -> bytes:
    return bytes([fill]) * size


def last_message(size: int) -> bytes:
    """A final message distinct from the bulk one, to check the last delivery byte for byte."""
    return bytes((i * 7 + 3) & 0xFF for i in range(size))


def fail_offer(result: int, where: str) -> None:
    raise BenchError(f"{where}: offer returned {result}")


def check_delivered(label: str, n: int, size: int, count: int, nbytes: int) -> None:
    """Exactly `n` messages of `size` bytes arrived."""
    check(count == n, f"{label} received {count} messages, expected {n}")
    check(nbytes == n * size, f"{label} received {nbytes} bytes, expected {n * size}")


# -- aeronio runs -------------------------------------------------------------------------


@dataclass
class AeronSetup:
    term_length: int
    exclusive: bool
    sparse: bool
    burst: int
    fragment_limit: int
    batch_rows: int
    timeout: float
    warmup: int = 0
    thread_backoff: float = 20e-6

    def driver_options(self) -> dict:
        return {"ipc_term_length": self.term_length, "term_buffer_sparse_file": self.sparse}


async def _open(client: aeronio.Aeron, setup: AeronSetup):
    sub = await client.add_subscription(CHANNEL, STREAM_ID)
    if setup.exclusive:
        pub = await client.add_exclusive_publication(CHANNEL, STREAM_ID)
    else:
        pub = await client.add_publication(CHANNEL, STREAM_ID)
    await asyncio.sleep(LINK_DELAY_S)
    deadline = time.monotonic() + 5.0
    while not (sub.is_connected and pub.is_connected):
        check(time.monotonic() < deadline, "image not linked within 5 s")
        await asyncio.sleep(0.01)
    return pub, sub


async def run_offer_poll(pub, sub, size: int, n: int, setup: AeronSetup) -> float:
    """(a): offer up to `burst` messages, poll up to `burst`, yield only when nothing moved."""
    msg = make_message(size, 0xA5)
    burst = setup.burst
    try_offer = pub.try_offer
    poll = sub.poll
    count = 0
    nbytes = 0

    def handler(buffer, header) -> None:
        nonlocal count, nbytes
        count += 1
        nbytes += len(buffer)

    sent = 0
    t0 = time.perf_counter()
    while count < n:
        k = min(burst, n - sent)
        i = 0
        while i < k:
            result = try_offer(msg)
            if result > 0:
                i += 1
            elif result == ADMIN_ACTION:
                continue
            elif result == BACK_PRESSURED or result == NOT_CONNECTED:
                break
            else:
                fail_offer(result, "(a) try_offer")
        sent += i
        if poll(handler, burst) == 0 and i == 0:
            await asyncio.sleep(0)
    elapsed = time.perf_counter() - t0
    check(sent == n, f"(a) sent {sent} messages, expected {n}")
    check_delivered("(a)", n, size, count, nbytes)
    return elapsed


async def run_threads(pub, sub, size: int, n: int, setup: AeronSetup) -> float:
    """(a2): a publisher thread spins on try_offer; the loop polls, yielding when idle."""
    msg = make_message(size, 0x5A)
    try_offer = pub.try_offer
    poll = sub.poll
    limit = setup.fragment_limit
    backoff = setup.thread_backoff
    stop = threading.Event()
    errors: list[BaseException] = []
    sent = 0

    def publisher() -> None:
        nonlocal sent
        try:
            i = 0
            while i < n:
                result = try_offer(msg)
                if result > 0:
                    i += 1
                elif result == ADMIN_ACTION:
                    continue
                elif result == BACK_PRESSURED or result == NOT_CONNECTED:
                    if stop.is_set():
                        return
                    time.sleep(backoff)  # a real sleep: time.sleep(0) keeps the GIL
                else:
                    fail_offer(result, "(a2) try_offer")
            sent = i
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    count = 0
    nbytes = 0

    def handler(buffer, header) -> None:
        nonlocal count, nbytes
        count += 1
        nbytes += len(buffer)

    thread = threading.Thread(target=publisher, name="bench-publisher", daemon=True)
    deadline = time.monotonic() + setup.timeout
    t0 = time.perf_counter()
    thread.start()
    try:
        while count < n:
            if poll(handler, limit) == 0:
                if errors:
                    raise errors[0]
                check(time.monotonic() < deadline, f"(a2) stalled at {count}/{n} messages")
                await asyncio.sleep(0)
        elapsed = time.perf_counter() - t0
    finally:
        stop.set()
        thread.join(10.0)
    if errors:
        raise errors[0]
    check(sent == n, f"(a2) publisher sent {sent} messages, expected {n}")
    check_delivered("(a2)", n, size, count, nbytes)
    return elapsed


async def run_async_api(pub, sub, size: int, n: int, setup: AeronSetup, form: str = "") -> float:
    """(b): `await pub.offer(msg)` in a producer task, `async for` in the consumer - over the
    subscription (copied messages), `sub.messages(copy=False)` (form "views": in place) or
    `sub.batches()` (form "batches": lists)."""
    msg = make_message(size, 0x3C)
    last = last_message(size)

    async def producer() -> None:
        offer = pub.offer
        for _ in range(n - 1):
            await offer(msg)
        await offer(last)

    count = 0
    nbytes = 0
    final = b""
    t0 = time.perf_counter()
    task = asyncio.get_running_loop().create_task(producer())
    try:
        if form == "batches":
            async for batch in sub.batches():
                for message in batch:
                    nbytes += len(message.data)
                count += len(batch)
                if count >= n:
                    final = batch[-1].data
                    break
        else:
            async for message in sub.messages(copy=form != "views"):
                count += 1
                nbytes += len(message.data)
                if count == n:
                    final = bytes(message.data)
                    break
        await task
    finally:
        if not task.done():
            task.cancel()
    elapsed = time.perf_counter() - t0
    check_delivered(f"(b{form and ' ' + form})", n, size, count, nbytes)
    check(final == last, "(b) the last message received differs from the last one sent")
    return elapsed


async def run_batch(pub, sub, size: int, n: int, setup: AeronSetup) -> float:
    """(c): 2-D uint8 records through try_offer_batch; batch_poll sums one field per batch."""
    rows = setup.batch_rows
    limit = setup.fragment_limit
    dtype = record_dtype(size)
    records = np.full((rows, size), 0xC3, dtype=np.uint8)
    seq_column = records[:, :8].view("<u8").reshape(rows)
    ramp = np.arange(rows, dtype=np.uint64)
    offer_batch = pub.try_offer_batch
    batch_poll = sub.batch_poll
    count = 0
    seq_sum = 0

    def handler(batch) -> None:
        nonlocal count, seq_sum
        recs = batch.records(dtype)
        count += len(recs)
        seq_sum += int(recs["seq"].sum())

    sent = 0
    chunk = records[:0]
    start = 0
    t0 = time.perf_counter()
    while count < n:
        moved = 0
        if start == len(chunk) and sent < n:
            k = min(rows, n - sent)
            seq_column[:k] = ramp[:k] + sent  # stamp a sequence number into each record
            chunk = records[:k]
            start = 0
        if start < len(chunk):
            result = offer_batch(chunk, start)
            if result > 0:
                start += result
                sent += result
                moved = result
            elif result == ADMIN_ACTION:
                continue
            elif result != BACK_PRESSURED and result != NOT_CONNECTED:
                fail_offer(result, "(c) try_offer_batch")
        if batch_poll(handler, limit) == 0 and not moved:
            await asyncio.sleep(0)
    elapsed = time.perf_counter() - t0
    check(sent == n, f"(c) sent {sent} records, expected {n}")
    check(count == n, f"(c) received {count} records, expected {n}")
    expected = n * (n - 1) // 2
    check(seq_sum == expected, f"(c) sequence sum {seq_sum}, expected {expected}")
    return elapsed


AERONIO_RUNS: dict[str, Callable] = {
    "a": run_offer_poll,
    "a2": run_threads,
    "b": run_async_api,
    "bv": functools.partial(run_async_api, form="views"),
    "bb": functools.partial(run_async_api, form="batches"),
    "c": run_batch,
}


async def aeronio_run(mode: str, size: int, n: int, setup: AeronSetup) -> float:
    """One timed run on a fresh embedded driver; setup and teardown are not timed."""
    async with aeronio.connect(**setup.driver_options()) as client:
        pub, sub = await _open(client, setup)
        if mode == "c" and size > pub.max_payload_length:
            raise NotApplicable(f"record size {size} > max_payload_length {pub.max_payload_length}")
        try:
            if setup.warmup:  # untimed: fault in the log pages the timed run starts on
                await asyncio.wait_for(
                    run_offer_poll(pub, sub, size, setup.warmup, setup), setup.timeout
                )
            run = AERONIO_RUNS[mode](pub, sub, size, n, setup)
            return await asyncio.wait_for(run, setup.timeout)
        except TimeoutError:
            raise BenchError(f"({mode}) did not finish within {setup.timeout} s") from None
        finally:
            await pub.close()
            await sub.close()


class NotApplicable(Exception):
    """The mode cannot run this size (reported as n/a, not as a failure)."""


# -- pyzmq runs ---------------------------------------------------------------------------


_zmq_runs = 0


def _inproc_address() -> str:
    global _zmq_runs
    _zmq_runs += 1
    return f"inproc://bench-{os.getpid()}-{_zmq_runs}"


def zmq_run(size: int, n: int, copy: bool, timeout: float) -> float:
    """(d)/(d2): PUSH in a thread sends N bytes messages, PULL in this thread receives them
    (default high-water marks, no receive timeout: a watchdog ends a stalled run)."""
    address = _inproc_address()
    msg = make_message(size, 0x99)
    last = last_message(size)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(address)
    ready, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def sender() -> None:
        push = ctx.socket(zmq.PUSH)
        try:
            push.connect(address)
            ready.set()
            go.wait()
            send = push.send
            for _ in range(n - 1):
                send(msg, copy=copy)
            send(last, copy=copy)
        except BaseException as e:
            errors.append(e)
        finally:
            push.close(linger=-1)

    thread = threading.Thread(target=sender, name="bench-zmq-push", daemon=True)
    thread.start()
    watchdog = _Watchdog(ctx, address, timeout)
    try:
        check(ready.wait(10.0), "pyzmq sender did not connect")
        recv = pull.recv
        count = 0
        nbytes = 0
        data = b""
        t0 = time.perf_counter()
        go.set()
        for _ in range(n):
            data = recv(copy=copy)
            count += 1
            nbytes += len(data)
        elapsed = time.perf_counter() - t0
        watchdog.check(count, n)
        thread.join(10.0)
        if errors:
            raise errors[0]
        final = data if copy else data.bytes
        check_delivered("pyzmq", n, size, count, nbytes)
        check(final == last, "pyzmq: the last message received differs from the last one sent")
        return elapsed
    finally:
        watchdog.cancel()
        go.set()
        thread.join(10.0)
        pull.close(linger=0)
        ctx.term()


def zmq_burst_run(size: int, n: int, burst: int, timeout: float) -> float:
    """(d1): one thread, PUSH and PULL over inproc://: send `burst` bytes messages, receive
    them, again until N - the one-thread pattern of (a)."""
    address = _inproc_address()
    msg = make_message(size, 0x77)
    last = last_message(size)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(address)
    push = ctx.socket(zmq.PUSH)
    push.connect(address)
    send, recv = push.send, pull.recv
    count = 0
    nbytes = 0
    data = b""
    try:
        t0 = time.perf_counter()
        while count < n:
            k = min(burst, n - count)
            for _ in range(k - 1):
                send(msg)
            send(last if count + k == n else msg)
            for _ in range(k):
                data = recv()
                nbytes += len(data)
            count += k
        elapsed = time.perf_counter() - t0
        check_delivered("pyzmq (one thread)", n, size, count, nbytes)
        check(data == last, "pyzmq: the last message received differs from the last one sent")
        check(elapsed < timeout, f"pyzmq (one thread) took {elapsed:.1f} s")
        return elapsed
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()


class _Watchdog:
    """Ends a stalled receive loop: after `timeout` s it feeds the PULL socket empty messages
    until cancelled, so the loop runs out; check() then fails the run."""

    def __init__(self, ctx: zmq.Context, address: str, timeout: float):
        self.fired = False
        self._done = threading.Event()
        self._ctx, self._address = ctx, address
        self._thread = threading.Thread(target=self._run, args=(timeout,), daemon=True)
        self._thread.start()

    def _run(self, timeout: float) -> None:
        if self._done.wait(timeout):
            return
        self.fired = True
        sock = self._ctx.socket(zmq.PUSH)
        sock.connect(self._address)
        try:
            while not self._done.is_set():
                try:
                    sock.send(b"", zmq.NOBLOCK)
                except zmq.Again:
                    time.sleep(0.001)
        finally:
            sock.close(linger=0)

    def check(self, count: int, n: int) -> None:
        if self.fired:
            raise BenchError(f"pyzmq stalled (no message for {count}/{n} within the timeout)")

    def cancel(self) -> None:
        self._done.set()
        self._thread.join(10.0)
