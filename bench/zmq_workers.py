"""Worker processes of the cross-process benchmarks, pyzmq side, and the worker entry point
(`worker_main`) that runs any role."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable

import zmq
from aeron_ping_pong import aeron_ping, aeron_pong, rtt_stats
from aeron_workers import (
    SEQ,
    Received,
    Released,
    Window,
    aeron_pub,
    aeron_sub,
    emit,
    received_result,
    take_turns,
)
from basics import check

# -- pyzmq (spec["address"]: ipc://... or tcp://...) ----------------------------------------


# pyzmq at its best ordinary settings: bytes messages, default high-water marks, no receive
# timeout (a stalled run is stopped by the parent, which waits for the result with a limit).


@contextlib.contextmanager
def zmq_socket(spec: dict, kind: int, bind: bool):
    """A socket of `kind` bound or connected to spec["address"] (READY said once it is); closed,
    and its context terminated, on the way out."""
    ctx = zmq.Context()
    sock = ctx.socket(kind)
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


def numbered_messages(size: int, start: int, stop: int) -> list[bytes]:
    """bytes messages of `size` carrying their numbers start..stop-1, made before timing."""
    pad = bytes(size - SEQ.size)
    pack = SEQ.pack
    return [pack(i) + pad for i in range(start, stop)]


def zmq_push(spec: dict, released: Released) -> dict:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    first, timed = numbered_messages(size, 0, warmup), numbered_messages(size, warmup, total)
    with zmq_socket(spec, zmq.PUSH, bind=False) as push:
        send = push.send
        for msg in first:
            send(msg)
        t0, cpu0 = time.perf_counter(), time.process_time()
        for msg in timed:
            send(msg)
        t1, cpu1 = time.perf_counter(), time.process_time()
        emit("SENT")
        released.wait_blocking(spec["timeout"] + spec.get("grace", 0.0))
        return {"sent": total, "t_first": t0, "elapsed": t1 - t0, "cpu_s": cpu1 - cpu0}


def zmq_pull(spec: dict, released: Released) -> dict:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    with zmq_socket(spec, zmq.PULL, bind=True) as pull:
        recv = pull.recv
        unpack = SEQ.unpack_from
        window = Window()
        errors = 0
        data = b""
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
        bad = f"{errors} messages out of sequence" if errors else None
        return received_result(spec, Received(total, bad, len(data)), window)


def zmq_ping(spec: dict, released: Released) -> dict:
    size, warmup, total = spec["size"], spec["warmup"], spec["warmup"] + spec["count"]
    messages = numbered_messages(size, 0, total)
    with zmq_socket(spec, zmq.PAIR, bind=False) as sock:
        unpack = SEQ.unpack_from
        send, recv = sock.send, sock.recv
        clock = time.perf_counter_ns
        rtts: list[int] = []
        append = rtts.append
        window = Window()
        window.start()
        for i, msg in enumerate(messages):
            t0 = clock()
            send(msg)
            data = recv()
            t1 = clock()
            seq = unpack(data)[0]
            check(seq == i, f"pong {seq} answered ping {i}")
            if i >= warmup:
                append(t1 - t0)
        window.stop()
        return {**rtt_stats(rtts), **window.result()}


def zmq_pong(spec: dict, released: Released) -> dict:
    total = spec["warmup"] + spec["count"]
    with zmq_socket(spec, zmq.PAIR, bind=True) as sock:
        send, recv = sock.send, sock.recv
        cpu0 = time.process_time()
        count = 0
        while count < total:
            send(recv())
            count += 1
        cpu = time.process_time() - cpu0
        released.wait_blocking(spec["timeout"] + spec.get("grace", 0.0))
        return {"count": count, "cpu_s": cpu}


ASYNC_ROLES: dict[str, Callable[[dict, Released], Awaitable[dict]]] = {
    "aeron-pub": aeron_pub,
    "aeron-sub": aeron_sub,
    "aeron-ping": aeron_ping,
    "aeron-pong": aeron_pong,
}
SYNC_ROLES: dict[str, Callable[[dict, Released], dict]] = {
    "zmq-push": zmq_push,
    "zmq-pull": zmq_pull,
    "zmq-ping": zmq_ping,
    "zmq-pong": zmq_pong,
}


def worker_main(
    spec_json: str, more_roles: dict[str, Callable[[dict, Released], Awaitable[dict]]] | None = None
) -> int:
    """Run the role a worker process was started for (one of ASYNC_ROLES, SYNC_ROLES or a
    script's `more_roles`, async); its RESULT on stdout, 0; or the error on stderr, 1 (also when
    it does not finish within the spec's timeout + grace)."""
    spec = json.loads(spec_json)
    async_roles = {**ASYNC_ROLES, **(more_roles or {})}
    role = spec["role"]
    limit = spec["timeout"] + spec.get("grace", 0.0)
    released = Released()
    try:
        if role in async_roles:
            take_turns(spec)

            async def run() -> dict:
                return await asyncio.wait_for(async_roles[role](spec, released), limit)

            result = asyncio.run(run())
        else:
            result = SYNC_ROLES[role](spec, released)
    except TimeoutError:
        print(f"{role}: did not finish within {limit:g} s", file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    emit("RESULT " + json.dumps(result))
    return 0
