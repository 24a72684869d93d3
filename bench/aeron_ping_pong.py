"""Worker processes of the cross-process benchmarks, aeronio side: ping and pong."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np
from aeron_workers import (
    SEQ,
    Released,
    Window,
    aeron_client,
    back_off,
    bounded,
    emit,
    offer_failed,
    out_of_time,
    wait_connected,
    yield_due,
)
from basics import Stalled, check

from aeronio import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED
from aeronio.protocol import embedded

# -- aeronio ping-pong ----------------------------------------------------------------------

# Idle polls between yields to the loop when the spinning loop runs the driver itself.
INVOKE_YIELD = 1000

# RTT modes: (the loop, the idle strategy of the awaitable calls; None: aeronio's default).
RTT_LOOPS: dict[str, tuple[str, str | None]] = {
    "spin": ("spin", None),
    "spin-invoke": ("spin", None),
    "default": ("await", None),
    "spin-api": ("await", "busy-spin"),
    "yield-api": ("await", "yielding"),
}


def rtt_stats(rtts_ns: list[int]) -> dict:
    a = np.asarray(rtts_ns, dtype=np.int64) / 1000.0
    if not len(a):
        return {"n": 0}
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


async def aeron_ping(spec: dict, released: Released) -> dict:
    loop, idle = RTT_LOOPS[spec["mode"]]
    async with aeron_client({**spec, "idle": idle}) as (client, driver_pid):
        sub = await client.add_subscription(spec["pong_channel"], spec["pong_stream"])
        pub = await client.add_publication(spec["ping_channel"], spec["ping_stream"])
        await wait_connected(pub, sub, timeout=spec["timeout"])
        emit("READY")
        window = Window(driver_pid)
        rtts: list[int] = []
        stalled = None
        window.start()
        try:
            if loop == "spin":
                await ping_spin(pub, sub, spec, rtts, idle_work(spec))
            else:
                await ping_await(pub, sub, spec, rtts)
        except Stalled as e:
            if not spec.get("partial"):
                raise
            stalled = out_of_time(spec, e)
        window.stop()
        return {**rtt_stats(rtts), "incomplete": stalled, **window.result()}


def idle_work(spec: dict) -> Callable[[], int] | None:
    """What a spinning loop calls on an empty poll instead of yielding to the loop: in mode
    spin-invoke, its embedded driver's duty cycle (MediaDriver.invoke); else nothing."""
    if spec["mode"] != "spin-invoke":
        return None
    return embedded.find(spec["dirs"][spec["role"]]).invoke


async def ping_spin(
    pub, sub, spec: dict, rtts: list[int], invoke: Callable[[], int] | None = None
) -> None:
    """Ping, spinning on try_offer and poll (at every idle_yield-th idle poll yielding as
    take_turns says, or with `invoke`, calling it on every idle poll and yielding every
    INVOKE_YIELD); the round trips after the warmup appended to `rtts` in ns."""
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    every = spec["idle_yield"] if invoke is None else INVOKE_YIELD
    msg = bytearray(size)
    stamp, unpack = SEQ.pack_into, SEQ.unpack_from
    try_offer, poll = pub.try_offer, sub.poll
    clock = time.perf_counter_ns
    got = [-1]

    def handler(buffer, header) -> None:
        got[0] = unpack(buffer)[0]

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
            spins = await back_off(result, spins, "ping try_offer", every)
        if invoke is not None:
            invoke()  # send it now
        while poll(handler, 1) == 0:
            if invoke is not None:
                invoke()
            spins += 1
            if spins >= every:
                spins = 0
                if time.monotonic() >= deadline:
                    raise Stalled(f"ping stalled at round trip {i}/{total}")
                if yield_due():
                    await asyncio.sleep(0)
        t1 = clock()
        check(got[0] == i, f"pong {got[0]} answered ping {i}")
        if i >= warmup:
            append(t1 - t0)


async def ping_await(pub, sub, spec: dict, rtts: list[int]) -> None:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    msg = bytearray(size)
    stamp, unpack = SEQ.pack_into, SEQ.unpack_from
    offer, receive = pub.offer, sub.receive
    clock = time.perf_counter_ns
    append = rtts.append
    i = 0
    try:
        async with bounded(spec["timeout"]):
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
    except Stalled:
        raise Stalled(f"ping stalled at round trip {i}/{total}") from None


async def aeron_pong(spec: dict, released: Released) -> dict:
    total = spec["warmup"] + spec["count"]
    loop, idle = RTT_LOOPS[spec["mode"]]
    async with aeron_client({**spec, "idle": idle}) as (client, _):
        sub = await client.add_subscription(spec["ping_channel"], spec["ping_stream"])
        pub = await client.add_publication(spec["pong_channel"], spec["pong_stream"])
        emit("READY")
        await wait_connected(sub, timeout=spec["timeout"])
        cpu0 = time.process_time()
        count = [0]
        stalled = None
        try:
            if loop == "spin":
                await pong_spin(pub, sub, spec, count, idle_work(spec))
            else:
                await pong_await(pub, sub, spec, count)
        except Stalled as e:
            if not spec.get("partial"):
                raise
            stalled = out_of_time(spec, e)
        cpu = time.process_time() - cpu0
        if stalled is None:
            check(count[0] == total, f"pong answered {count[0]}, expected {total}")
        await released.wait(spec["timeout"] + spec.get("grace", 0.0))
        return {"count": count[0], "cpu_s": cpu, "incomplete": stalled}


async def pong_await(pub, sub, spec: dict, count: list[int]) -> None:
    total = spec["warmup"] + spec["count"]
    offer = pub.offer
    try:
        async with bounded(spec["timeout"]):
            async for message in sub:
                await offer(message.data)
                count[0] += 1
                if count[0] == total:
                    break
    except Stalled:
        raise Stalled(f"pong stalled at {count[0]}/{total}") from None


async def pong_spin(
    pub, sub, spec: dict, count: list[int], invoke: Callable[[], int] | None = None
) -> None:
    total = spec["warmup"] + spec["count"]
    every = spec["idle_yield"] if invoke is None else INVOKE_YIELD
    try_offer, poll = pub.try_offer, sub.poll

    def handler(buffer, header) -> None:
        while True:  # echo at once, spinning through back-pressure like Aeron's Pong
            result = try_offer(buffer)
            if result > 0:
                count[0] += 1
                return
            if result != BACK_PRESSURED and result != NOT_CONNECTED and result != ADMIN_ACTION:
                offer_failed(result, "pong try_offer")

    deadline = time.monotonic() + spec["timeout"]
    idle = 0
    while count[0] < total:
        polled = poll(handler, 1)
        if invoke is not None:
            invoke()  # sends the echo at once, or finds the next ping
        if polled == 0:
            idle += 1
            if idle >= every:
                idle = 0
                if time.monotonic() >= deadline:
                    raise Stalled(f"pong stalled at {count[0]}/{total}")
                if yield_due():
                    await asyncio.sleep(0)
