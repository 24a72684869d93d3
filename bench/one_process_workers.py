"""Worker processes of bench/versus_aeron_c.py, aeronio side: the publication and subscription in
one process (the publisher's and subscriber's loops in one thread, or each call alone), attached
to a standalone driver (spec["dir"]). The counterparts of bench/aeron_c_workers.py's one-thread
and one-call roles; every message carries its number, checked at the receiver."""

from __future__ import annotations

import asyncio
import time

from aeron_workers import (
    SEQ,
    Received,
    Released,
    aeron_client,
    back_off,
    emit,
    idled,
    offer_failed,
    wait_connected,
)
from basics import BenchError, check

from aeronio import ADMIN_ACTION


def checked(got: Received, total: int, size: int) -> None:
    """Every message came, in order (a gap or reorder is an error, not a number)."""
    check(got.bad is None, f"sequence check failed: {got.bad}")
    check(
        got.count == total and got.last_length == size,
        f"received {got.count} messages (last {got.last_length} B), expected {total} of {size} B",
    )


def counting_handler(got: Received):
    """poll's handler: checks each message's number against the count so far."""
    unpack = SEQ.unpack_from

    def handler(buffer, header) -> None:
        if unpack(buffer)[0] != got.count and got.bad is None:
            got.bad = f"message {unpack(buffer)[0]} came as number {got.count}"
        got.count += 1
        got.last_length = len(buffer)

    return handler


async def offer_poll(pub, sub, spec: dict, got: Received, stop: int, deadline: float) -> None:
    """(a) in one thread: offer up to `burst` messages with try_offer, poll up to `burst`, again
    until message `stop` came (yielding to the loop every idle_yield idle rounds)."""
    burst, size, every = spec["burst"], spec["size"], spec["idle_yield"]
    msg = bytearray(size)
    stamp, try_offer, poll = SEQ.pack_into, pub.try_offer, sub.poll
    handler = counting_handler(got)
    sent = got.count
    idle = spins = 0
    while got.count < stop:
        k = min(sent + burst, stop)
        while sent < k:
            stamp(msg, 0, sent)
            result = try_offer(msg)
            if result <= 0:
                spins = await back_off(result, spins, "(a) try_offer", every)
                break
            sent += 1
        if poll(handler, burst) == 0:
            idle = await idled(idle, deadline, got.count, stop, every)


async def await_async_for(pub, sub, spec: dict, got: Received, stop: int, deadline: float) -> None:
    """(b) in one thread: a task offers with `await pub.offer(msg)`, this one reads with
    `async for message in sub`, until message `stop` came."""
    msg = bytearray(spec["size"])
    stamp, offer, unpack = SEQ.pack_into, pub.offer, SEQ.unpack_from

    async def producer(start: int) -> None:
        for i in range(start, stop):
            stamp(msg, 0, i)
            await offer(msg)

    task = asyncio.get_running_loop().create_task(producer(got.count))
    count, data = got.count, b""
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            if count < stop:
                async for message in sub:
                    data = message.data
                    if unpack(data)[0] != count and got.bad is None:
                        got.bad = f"message {unpack(data)[0]} came as number {count}"
                    count += 1
                    if count == stop:
                        break
            await task
    except TimeoutError:
        raise BenchError(f"(b) stalled at {count}/{stop}") from None
    finally:
        task.cancel()
        got.count, got.last_length = count, len(data)


ONE_THREAD_LOOPS = {"a": offer_poll, "b": await_async_for}


async def open_pair(client, spec: dict):
    sub = await client.add_subscription(spec["channel"], spec["stream"])
    pub = await client.add_publication(spec["channel"], spec["stream"])
    await wait_connected(pub, sub, timeout=spec["timeout"])
    return pub, sub


async def one_thread(spec: dict, released: Released) -> dict:
    """The publisher's and the subscriber's loops of spec["mode"] in one thread: the warmup,
    then the timed messages."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    async with aeron_client(spec) as (client, _):
        pub, sub = await open_pair(client, spec)
        emit("READY")
        run = ONE_THREAD_LOOPS[spec["mode"]]
        got = Received()
        deadline = time.monotonic() + spec["timeout"]
        await run(pub, sub, spec, got, warmup, deadline)
        t0, cpu0 = time.perf_counter(), time.process_time()
        await run(pub, sub, spec, got, total, deadline)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        checked(got, total, spec["size"])
        return {"count": spec["count"], "received": got.count, "elapsed": elapsed, "cpu_s": cpu}


async def wait_window(pub, length: int, seconds: float) -> None:
    """Until the publication may take `length` bytes more without back-pressure (the driver
    moves its limit as the subscriber catches up)."""
    deadline = time.monotonic() + seconds
    while pub.position_limit - pub.position < length:
        check(time.monotonic() < deadline, f"publication window under {length} B for {seconds:g} s")
        await asyncio.sleep(0.001)


async def one_call(spec: dict, released: Released) -> dict:
    """`try_offer(msg)` alone in a loop (chunks of `chunk` messages, each timed once the window
    has room for all of it: no offer is refused), then `poll(handler, 1)` alone until the chunk
    is read; the seconds of each kind of call, summed over the chunks after the warmup."""
    size, chunk, total = spec["size"], spec["chunk"], spec["warmup"] + spec["count"]
    frame = (32 + size + 31) // 32 * 32
    async with aeron_client(spec) as (client, _):
        pub, sub = await open_pair(client, spec)
        emit("READY")
        got = Received()
        msg = bytearray(size)
        stamp, try_offer, poll = SEQ.pack_into, pub.try_offer, sub.poll
        handler = counting_handler(got)
        clock = time.perf_counter
        offer_s = poll_s = 0.0
        empty = 0
        for first in range(0, total, chunk):
            stop = min(first + chunk, total)
            await wait_window(pub, (stop - first) * frame, spec["timeout"])
            t0 = clock()
            for i in range(first, stop):
                stamp(msg, 0, i)
                result = try_offer(msg)
                if result == ADMIN_ACTION:  # the term rotated under this offer: Aeron's retry
                    result = try_offer(msg)
                if result <= 0:
                    offer_failed(result, f"try_offer {i} with room in the window")
            t1 = clock()
            while got.count < stop:
                if poll(handler, 1) == 0:
                    empty += 1
            t2 = clock()
            if first >= spec["warmup"]:
                offer_s += t1 - t0
                poll_s += t2 - t1
        checked(got, total, size)
        return {"count": total - spec["warmup"], "received": got.count, "offer_s": offer_s,
                "poll_s": poll_s, "empty_polls": empty}  # fmt: skip


ROLES = {"aeron-one-thread": one_thread, "aeron-one-call": one_call}
