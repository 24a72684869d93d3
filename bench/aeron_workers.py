"""Worker processes of the cross-process benchmarks, aeronio side: throughput publishers and
subscribers (run as `python bench/<script>.py --worker JSON`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from basics import BenchError, Stalled, check, record_dtype
from children import driver_cpu, proc_cpu_s
from worker_protocol import SEQ, Pace, Released, emit

import aeronio
from aeronio import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED, _core
from aeronio.counters import FLOW_CONTROL_RECEIVERS_TYPE_ID
from aeronio.idle import BusySpinIdleStrategy, YieldingIdleStrategy

# =========================================================================================
# Cross-process benchmarks, worker side: `python bench/<script>.py --worker '{"role": ...}'`
# Protocol on stdout: "READY" once set up, "SENT" when a sender has sent everything, then
# "RESULT {json}"; errors go to stderr with a non-zero exit. A worker that must outlive its peer
# waits for its stdin to close ("release").
#
# A worker's spec (JSON) holds what every run has - role, size, count, warmup, timeout (seconds
# for the run's loops), grace (extra seconds before the worker itself gives up) and partial (a
# loop that runs out of time returns what it got instead of failing) - and for aeronio: dir
# (the standalone driver's) or dirs (each role's own embedded driver's), the channels and
# streams, the mode, fragment_limit, batch_rows and the yield policy of the spinning loops:
# idle_yield (idle polls or refused offers between `await asyncio.sleep(0)`), turns (with a
# standalone driver: at those only when the loop is due its turn, see take_turns) and send_yield
# (messages offered between yields when not back-pressured, 0 for never); a one-to-many
# publisher's receivers (how many its flow control must track before it is READY).
# =========================================================================================


class Turns:
    """Whether a spinning loop at its idle_yield-th idle poll yields: always (interval 0: an
    embedded driver runs on the loop), or only once the loop has had no turn from it for
    `interval_ns`, as aeronio's awaitables take theirs (_core.LOOP_TURN_NS): with a standalone
    driver the loop runs only the client's own tasks, its keepalive among them."""

    def __init__(self, interval_ns: int = 0) -> None:
        self.interval_ns = interval_ns
        self.last_ns = 0

    def due(self) -> bool:
        if not self.interval_ns:
            return True
        now = time.monotonic_ns()
        if now - self.last_ns < self.interval_ns:
            return False
        self.last_ns = now
        return True


_turns = Turns()


def take_turns(spec: dict) -> None:
    """This worker's spinning loops yield at every idle_yield-th idle poll, or with
    spec["turns"] as aeronio's awaitables take their turns; spec["loop_turn_ns"] sets the
    interval of both (default the library's)."""
    global _turns
    interval = spec.get("loop_turn_ns", _core.LOOP_TURN_NS)
    if "loop_turn_ns" in spec:
        _core._set_loop_turn_ns(interval)
    embedded = "dirs" in spec  # a driver of the worker's own, on its loop
    _turns = Turns(interval if spec.get("turns") and not embedded else 0)


def yield_due() -> bool:
    """Whether a spinning loop at its idle_yield-th idle poll yields (take_turns)."""
    return _turns.due()


def offer_failed(result: int, where: str) -> NoReturn:
    raise BenchError(f"{where}: offer returned {result}")


async def back_off(result: int, spins: int, where: str, every: int) -> int:
    """After an offer that took nothing: the spin count, yielding to the loop every `every`
    spins through back-pressure (or not connected, or an admin action); BenchError when the
    offer failed for good."""
    if result != BACK_PRESSURED and result != NOT_CONNECTED and result != ADMIN_ACTION:
        offer_failed(result, where)
    spins += 1
    if spins >= every:
        if yield_due():
            await asyncio.sleep(0)
        return 0
    return spins


async def idled(idle: int, deadline: float, count: int, total: int, every: int) -> int:
    """After a poll that found nothing: the idle count, checking the deadline (Stalled) and
    yielding to the loop every `every` idle polls."""
    idle += 1
    if idle < every:
        return idle
    if time.monotonic() >= deadline:
        raise Stalled(f"stalled at {count}/{total}")
    if yield_due():
        await asyncio.sleep(0)
    return 0


async def wait_connected(*things, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(t.is_connected for t in things):
        check(time.monotonic() < deadline, f"not connected within {timeout:g} s")
        await asyncio.sleep(0.001)


async def wait_receivers(client, pub, n: int, timeout: float = 10.0) -> None:
    """Wait until the flow control of one-to-many publication `pub` (multicast or MDC) tracks
    `n` receivers: its fc-receivers counter (type 17) in the driver of `client`."""
    deadline = time.monotonic() + timeout
    counters = client.counters
    counter_id = None
    while True:
        if counter_id is None:
            counter_id = counters.find_by_type_id_and_registration_id(
                FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.original_registration_id
            )
        seen = 0 if counter_id is None else counters.get_counter_value(counter_id)
        if seen >= n:
            return
        check(
            time.monotonic() < deadline,
            f"{seen} of {n} receivers tracked by flow control within {timeout:g} s"
            + (" (no fc-receivers counter)" if counter_id is None else ""),
        )
        await asyncio.sleep(0.001)


def out_of_time(spec: dict, e: Stalled) -> str:
    """How far a loop of a partial run got when its time ran out ("stalled at 5/10" -> "out of
    time (10 s) at 5/10")."""
    text = str(e)
    return f"out of time ({spec['timeout']:g} s) {text[text.find('at ') :]}"


@contextlib.asynccontextmanager
async def bounded(seconds: float):
    """Turn running out of `seconds` inside the block into Stalled (the caller says where)."""
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            yield
    except TimeoutError:
        raise Stalled("stalled") from None


IDLE_STRATEGIES = {None: None, "busy-spin": BusySpinIdleStrategy, "yielding": YieldingIdleStrategy}


@contextlib.asynccontextmanager
async def aeron_client(spec: dict):
    """(client, pid of its driver when that is another process, else None): with spec["dirs"]
    ({role: dir}), a client of a driver of this worker's own on its role's dir, running on this
    loop; else a client of the standalone driver on spec["dir"]. With the idle strategy
    spec.get("idle") names (default: aeronio's)."""
    idle = IDLE_STRATEGIES[spec.get("idle")]
    options = {} if idle is None else {"idle_strategy": idle()}
    if "dirs" in spec:
        async with aeronio.MediaDriver.launch(spec["dirs"][spec["role"]]) as driver:
            async with aeronio.connect(driver.dir, **options) as client:
                yield client, None
    else:
        async with aeronio.connect(spec["dir"], **options) as client:
            yield client, client.driver_pid


# -- aeronio throughput: publisher -------------------------------------------------------


async def aeron_pub(spec: dict, released: Released) -> dict:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    async with aeron_client(spec) as (client, driver_pid):
        pub = await client.add_publication(spec["channel"], spec["stream"])
        await wait_connected(pub)
        if spec.get("receivers"):  # one to many: until every receiver counts (see wait_receivers)
            await wait_receivers(client, pub, spec["receivers"])
        emit("READY")
        run = {"a": pub_spin, "b": pub_await, "c": pub_batch}[spec["mode"]]
        await run(pub, spec, 0, warmup)
        d0, cpu0, t0 = proc_cpu_s(driver_pid), time.process_time(), time.perf_counter()
        await run(pub, spec, warmup, total)
        t1, cpu1, d1 = time.perf_counter(), time.process_time(), proc_cpu_s(driver_pid)
        emit("SENT")
        await released.wait(spec["timeout"] + spec.get("grace", 0.0))
        return {
            "sent": total,
            "t_first": t0,
            "elapsed": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            **driver_cpu(driver_pid, d0, d1),
        }


async def pub_spin(pub, spec: dict, start: int, stop: int) -> None:
    """Messages start..stop-1 (each carrying its number), spinning through back-pressure; with
    send_yield, yielding to the loop after every send_yield messages, with turns, after every
    idle_yield messages when the loop is due its turn (take_turns); with a rate, each once it
    is due (Pace)."""
    pace = Pace(spec["rate"]) if spec.get("rate") else None
    msg = bytearray(spec["size"])
    stamp = SEQ.pack_into
    try_offer = pub.try_offer
    every, send_yield, turns = spec["idle_yield"], spec["send_yield"], spec.get("turns", False)
    chunk = send_yield or (every if turns else max(1, stop - start))
    spins = 0
    for first in range(start, stop, chunk):
        for i in range(first, min(first + chunk, stop)):
            if pace is not None:
                if (i - start) % pace.per_loop_turn == 0:
                    await asyncio.sleep(0)
                pace.wait(i)
            stamp(msg, 0, i)
            while True:
                result = try_offer(msg)
                if result > 0:
                    break
                spins = await back_off(result, spins, "(a) try_offer", every)
        if send_yield or (turns and yield_due()):
            await asyncio.sleep(0)


async def pub_await(pub, spec: dict, start: int, stop: int) -> None:
    msg = bytearray(spec["size"])
    stamp = SEQ.pack_into
    offer = pub.offer
    for i in range(start, stop):
        stamp(msg, 0, i)
        await offer(msg)


async def pub_batch(pub, spec: dict, start: int, stop: int) -> None:
    """Records start..stop-1 as 2-D uint8 arrays of up to batch_rows records per offer; with
    send_yield, yielding to the loop after every offer."""
    size, rows = spec["size"], spec["batch_rows"]
    every, send_yield = spec["idle_yield"], spec["send_yield"]
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
                if send_yield:
                    await asyncio.sleep(0)
                continue
            spins = await back_off(result, spins, "(c) try_offer_batch", every)
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
        self.started = False

    def start(self) -> None:
        self.d0 = proc_cpu_s(self.driver_pid) if self.driver_pid else None
        self.cpu0 = time.process_time()
        self.t0 = time.perf_counter()
        self.started = True

    def stop(self) -> None:
        self.t1 = time.perf_counter()
        self.cpu1 = time.process_time()
        self.d1 = proc_cpu_s(self.driver_pid) if self.driver_pid else None

    def result(self) -> dict:
        if not self.started:  # ran out of time in the warmup: nothing timed
            nothing = {"t0": None, "t_last": None, "elapsed": 0.0, "cpu_s": 0.0}
            return {**nothing, **driver_cpu(self.driver_pid, None, None)}
        return {
            "t0": self.t0,
            "t_last": self.t1,
            "elapsed": self.t1 - self.t0,
            "cpu_s": self.cpu1 - self.cpu0,
            **driver_cpu(self.driver_pid, self.d0, self.d1),
        }


@dataclass(slots=True)
class Received:
    """What a receiving loop got: messages, the first sequence error, the last message's length
    and, when it ran out of time (partial runs only), how far it got.

    Slots, so that the handlers' `got.count` is a specialised attribute access on every Python:
    from 3.12 CPython does not specialise an instance attribute that a class attribute of the
    same name shadows (a plain dataclass's defaults), about 20 ns per access (docs/benchmarks.md,
    "Where poll(h, 1)'s time went on 3.12")."""

    count: int = 0
    bad: str | None = None
    last_length: int = 0
    stalled: str | None = None


def received_result(spec: dict, got: Received, window: Window) -> dict:
    """The receiver's RESULT: timed messages and window; BenchError when a message was wrong
    or, unless it ran out of time in a partial run, missing."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    check(got.bad is None, f"sequence check failed: {got.bad}")
    if got.stalled is None:
        check(got.count == total, f"received {got.count} messages, expected {total}")
        check(
            got.last_length == spec["size"],
            f"last message {got.last_length} B, expected {spec['size']}",
        )
    timed = max(0, got.count - warmup) if window.started else 0
    return {"count": timed, "received": got.count, "incomplete": got.stalled, **window.result()}


async def aeron_sub(spec: dict, released: Released) -> dict:
    async with aeron_client(spec) as (client, driver_pid):
        sub = await client.add_subscription(
            spec.get("sub_channel", spec["channel"]), spec["stream"]
        )
        emit("READY")
        await wait_connected(sub, timeout=spec["timeout"])
        run = {"a": sub_poll, "b": sub_async_for, "c": sub_batch}[spec["mode"]]
        window = Window(driver_pid)
        got = Received()
        try:
            await run(sub, spec, window, got)
        except Stalled as e:
            if not spec.get("partial"):
                raise
            got.stalled = out_of_time(spec, e)
            if window.started:
                window.stop()
        return received_result(spec, got, window)


def drainer(
    spec: dict, poll: Callable, handler: Callable, got: Received, deadline: float
) -> Callable[[int], Awaitable[None]]:
    """`drain(upto)`: `poll(handler, limit)` (a subscription's poll or batch_poll) in a spinning
    loop until `got.count` reaches `upto`, yielding every idle_yield idle polls (in a paced run
    sleeping Pace.IDLE after each); Stalled at the deadline (checked when yielding, and in a
    partial run also while messages arrive)."""
    total = spec["warmup"] + spec["count"]
    limit, every, partial = spec["fragment_limit"], spec["idle_yield"], spec.get("partial")
    nap = Pace.nap(spec.get("rate", 0))

    async def drain(upto: int) -> None:
        idle = 0
        while got.count < upto:
            if poll(handler, min(limit, upto - got.count)) == 0:
                if nap:
                    time.sleep(nap)
                idle = await idled(idle, deadline, got.count, total, every)
            elif partial and time.monotonic() >= deadline:
                raise Stalled(f"stalled at {got.count}/{total}")

    return drain


async def sub_poll(sub, spec: dict, window: Window, got: Received) -> None:
    """poll(handler, limit) in a spinning loop; the handler checks each message's number."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    unpack = SEQ.unpack_from
    errors = 0

    def handler(buffer, header) -> None:
        nonlocal errors
        if unpack(buffer)[0] != got.count:
            errors += 1
        got.count += 1

    def last_handler(buffer, header) -> None:
        got.last_length = len(buffer)
        handler(buffer, header)

    poll, nap = sub.poll, Pace.nap(spec.get("rate", 0))  # the nap: as the drain's, the C side's
    deadline = time.monotonic() + spec["timeout"]
    drain = drainer(spec, poll, handler, got, deadline)
    try:
        await drain(warmup)
        window.start()
        await drain(total - 1)
        while got.count < total:  # the last message, through a handler that notes its length
            if poll(last_handler, 1) == 0:
                if nap:
                    time.sleep(nap)
                if time.monotonic() >= deadline:
                    raise Stalled(f"stalled at {got.count}/{total}")
                await asyncio.sleep(0)
        window.stop()
    finally:
        if errors:
            got.bad = f"{errors} messages out of sequence"


async def sub_async_for(sub, spec: dict, window: Window, got: Received) -> None:
    """`async for message in sub`, in two loops as (a) drains: to the end of the warmup, then
    the timed messages; each message's number checked (the same work as (a)'s handler)."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    unpack = SEQ.unpack_from
    errors = 0
    data = b""

    async def receive(upto: int) -> None:
        nonlocal errors, data
        count = got.count
        try:
            if count < upto:
                async for message in sub:
                    data = message.data
                    if unpack(data)[0] != count:
                        errors += 1
                    count += 1
                    if count == upto:
                        break
        finally:
            got.count = count

    try:
        async with bounded(spec["timeout"]):
            await receive(warmup)
            window.start()
            await receive(total)
        window.stop()
        got.last_length = len(data)
    except Stalled:
        raise Stalled(f"stalled at {got.count}/{total}") from None
    finally:
        if errors:
            got.bad = f"{errors} messages out of sequence"


async def sub_batch(sub, spec: dict, window: Window, got: Received) -> None:
    """batch_poll with batch.records(dtype): numpy views; checks each batch's numbers."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    dtype = record_dtype(spec["size"])

    def handler(batch) -> None:
        recs = batch.records(dtype)
        k = len(recs)
        if not k:
            return
        seq = recs["seq"]
        first, last = int(seq[0]), int(seq[-1])
        count = got.count
        if got.bad is None and (
            first != count
            or last != count + k - 1
            or int(seq.sum()) != k * count + k * (k - 1) // 2
        ):
            got.bad = f"batch at message {count}: sequence {first}..{last} over {k} records"
        if int(batch.lengths[-1]) != recs.itemsize:
            got.bad = got.bad or (
                f"record of {int(batch.lengths[-1])} B in a batch of {recs.itemsize} B"
            )
        got.count = count + k
        got.last_length = recs.itemsize

    drain = drainer(spec, sub.batch_poll, handler, got, time.monotonic() + spec["timeout"])
    await drain(warmup)
    window.start()
    await drain(total)
    window.stop()
