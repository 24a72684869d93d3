"""What the benchmark scripts share: failure, the machine header, command-line helpers, medians
and the text and markdown tables of the report; and, for the cross-process benchmarks
(ipc_processes.py, udp_processes.py), their worker processes (aeronio, pyzmq), the parent's
handling of child processes, and the reference Aeron (Java) helpers.

The scripts run as `python bench/<script>.py`, which puts this directory first on sys.path, so
they import this module as `common`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import queue
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import zmq

import aeronio
from aeronio import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED
from aeronio.counters import FLOW_CONTROL_RECEIVERS_TYPE_ID
from aeronio.idle import BusySpinIdleStrategy, YieldingIdleStrategy
from aeronio.protocol import embedded


class BenchError(RuntimeError):
    """A run delivered the wrong messages, stalled or a process failed: no number to report."""


class Stalled(BenchError):
    """A receiving loop ran out of time (a failure, unless the run accepts a partial result)."""


class Skipped(Exception):
    """A row that cannot run here (reported as `skipped: reason`, not as a failure)."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise BenchError(message)


def record_dtype(size: int) -> np.dtype:
    """The numpy record of the batch paths: a u64 sequence number, then the rest of `size`."""
    if size == 8:
        return np.dtype([("seq", "<u8")])
    return np.dtype([("seq", "<u8"), ("body", f"V{size - 8}")])


# -- command line -------------------------------------------------------------------------------


def default_count(size: int) -> int:
    return 1_000_000 if size <= 64 else 300_000


def parse_ints(
    parser: argparse.ArgumentParser, text: str, what: str, errors: tuple[str, str]
) -> list[int]:
    """Comma-separated positive integers (`_` allowed in them), or a usage error: errors[0] when
    one is not an integer, errors[1] when none is given or one is not positive (both formatted
    with `what` and `text`)."""
    try:
        values = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(errors[0].format(what=what, text=text))
    if not values or any(v <= 0 for v in values):
        parser.error(errors[1].format(what=what, text=text))
    return values


def sizes_and_counts(
    parser: argparse.ArgumentParser, args: argparse.Namespace, errors: tuple[str, str]
) -> tuple[list[int], list[int] | None]:
    """--sizes and --count (None when not given), parsed with `parse_ints`."""
    sizes = parse_ints(parser, args.sizes, "--sizes", errors)
    counts = parse_ints(parser, args.count, "--count", errors) if args.count else None
    return sizes, counts


def check_counts(
    parser: argparse.ArgumentParser, counts: list[int] | None, sizes: list[int]
) -> None:
    if counts is not None and len(counts) not in (1, len(sizes)):
        parser.error("--count: give one number, or one per size")


def per_size_counts(counts: list[int] | None, sizes: list[int]) -> list[int]:
    """One count per size: the default for each size, or the one count given for all."""
    if counts is None:
        return [default_count(s) for s in sizes]
    if len(counts) == 1:
        return counts * len(sizes)
    return counts


def split_modes(
    parser: argparse.ArgumentParser, text: str, known: dict[str, str], what: str, noun: str = ""
) -> list[str]:
    """The comma-separated modes of `text`, each one of `known`, or a usage error."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in known]
    if unknown:
        parser.error(f"{what}: unknown {noun}{', '.join(unknown)}; known: {', '.join(known)}")
    return modes


def require_positive(
    parser: argparse.ArgumentParser, args: argparse.Namespace, names: Iterable[str]
) -> None:
    for name in names:
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")


# -- the report ---------------------------------------------------------------------------------


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_info(with_load: bool = False) -> dict[str, str]:
    """The report's header: when, on what, with which versions (and the load average at the
    start, `with_load`)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    info = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical, {usable} usable",
    }
    if with_load:
        info["load average"] = f"{load_average()} (at start)"
    info.update(
        {
            "platform": platform.platform(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "numpy": np.__version__,
            "pyzmq": f"{zmq.__version__} (libzmq {zmq.zmq_version()})",
            "aeronio": aeronio.__version__,
        }
    )
    return info


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def span(rates: Iterable[float]) -> str:
    """`min..max` of the rates of the repeats, or "" with fewer than two."""
    rates = list(rates)
    if len(rates) < 2:
        return ""
    return f"{min(rates):,.0f}..{max(rates):,.0f}"


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def text_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned columns (those in `right` right-aligned) under a dashed rule."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def md_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    align = ["---:" if i in right else "---" for i in range(len(headers))]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    out.extend("| " + " | ".join(v.replace("|", "\\|") for v in r) + " |" for r in rows)
    return out


def write_markdown(
    args: argparse.Namespace,
    argv: list[str] | None,
    script: str,
    report: Callable[[str], str],
) -> None:
    """With --markdown or --out: the markdown report (made by `report` from the command line
    that ran `script`) printed, written to the --out file, or both."""
    if not (args.markdown or args.out):
        return
    command = " ".join(["python", script, *(argv or sys.argv[1:])])
    text = report(command)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"\nmarkdown written to {args.out}")
    if args.markdown:
        print()
        print(text, end="")


def run_main(main: Callable[[], int], interrupted_exit: bool = False) -> NoReturn:
    """Exit with main()'s status, or 1 after `BENCHMARK FAILED: ...` when a run went wrong; with
    `interrupted_exit`, 130 after `interrupted` on KeyboardInterrupt."""
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"BENCHMARK FAILED: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        if not interrupted_exit:
            raise
        print("interrupted", file=sys.stderr)
        sys.exit(130)


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
# idle_yield (idle polls or refused offers between `await asyncio.sleep(0)`) and send_yield
# (messages offered between yields when not back-pressured, 0 for never); a one-to-many
# publisher's receivers (how many its flow control must track before it is READY).
# =========================================================================================

SEQ = struct.Struct("<Q")


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
        """Wait on the loop (which keeps running, and with it an embedded driver)."""
        deadline = time.monotonic() + timeout
        while not self.event.is_set():
            if time.monotonic() > deadline:
                raise BenchError("not released by the parent in time")
            await asyncio.sleep(0.005)

    def wait_blocking(self, timeout: float) -> None:
        if not self.event.wait(timeout):
            raise BenchError("not released by the parent in time")


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
                FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id
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
    async with aeron_client(spec) as (client, _):
        pub = await client.add_publication(spec["channel"], spec["stream"])
        await wait_connected(pub)
        if spec.get("receivers"):  # one to many: until every receiver counts (see wait_receivers)
            await wait_receivers(client, pub, spec["receivers"])
        emit("READY")
        run = {"a": pub_spin, "b": pub_await, "c": pub_batch}[spec["mode"]]
        await run(pub, spec, 0, warmup)
        t0, cpu0 = time.perf_counter(), time.process_time()
        await run(pub, spec, warmup, total)
        t1, cpu1 = time.perf_counter(), time.process_time()
        emit("SENT")
        await released.wait(spec["timeout"] + spec.get("grace", 0.0))
        return {"sent": total, "t_first": t0, "elapsed": t1 - t0, "cpu_s": cpu1 - cpu0}


async def pub_spin(pub, spec: dict, start: int, stop: int) -> None:
    """Messages start..stop-1 (each carrying its number), spinning through back-pressure; with
    send_yield, yielding to the loop after every send_yield messages."""
    msg = bytearray(spec["size"])
    stamp = SEQ.pack_into
    try_offer = pub.try_offer
    every, send_yield = spec["idle_yield"], spec["send_yield"]
    chunk = send_yield or max(1, stop - start)
    spins = 0
    for first in range(start, stop, chunk):
        for i in range(first, min(first + chunk, stop)):
            stamp(msg, 0, i)
            while True:
                result = try_offer(msg)
                if result > 0:
                    break
                spins = await back_off(result, spins, "(a) try_offer", every)
        if send_yield:
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
            return {"t0": None, "t_last": None, "elapsed": 0.0, "cpu_s": 0.0, "driver_cpu_s": None}
        driver = None if self.d0 is None or self.d1 is None else self.d1 - self.d0
        return {
            "t0": self.t0,
            "t_last": self.t1,
            "elapsed": self.t1 - self.t0,
            "cpu_s": self.cpu1 - self.cpu0,
            "driver_cpu_s": driver,
        }


@dataclass
class Received:
    """What a receiving loop got: messages, the first sequence error, the last message's length
    and, when it ran out of time (partial runs only), how far it got."""

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
    loop until `got.count` reaches `upto`, yielding every idle_yield idle polls; Stalled at the
    deadline (checked when yielding, and in a partial run also while messages arrive)."""
    total = spec["warmup"] + spec["count"]
    limit, every, partial = spec["fragment_limit"], spec["idle_yield"], spec.get("partial")

    async def drain(upto: int) -> None:
        idle = 0
        while got.count < upto:
            if poll(handler, min(limit, upto - got.count)) == 0:
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

    poll = sub.poll
    deadline = time.monotonic() + spec["timeout"]
    drain = drainer(spec, poll, handler, got, deadline)
    try:
        await drain(warmup)
        window.start()
        await drain(total - 1)
        while got.count < total:  # the last message, through a handler that notes its length
            if poll(last_handler, 1) == 0:
                if time.monotonic() >= deadline:
                    raise Stalled(f"stalled at {got.count}/{total}")
                await asyncio.sleep(0)
        window.stop()
    finally:
        if errors:
            got.bad = f"{errors} messages out of sequence"


async def sub_async_for(sub, spec: dict, window: Window, got: Received) -> None:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    unpack = SEQ.unpack_from
    errors = 0
    data = b""
    if warmup == 0:
        window.start()
    try:
        async with bounded(spec["timeout"]):
            async for message in sub:
                data = message.data
                if unpack(data)[0] != got.count:
                    errors += 1
                got.count += 1
                if got.count == warmup:
                    window.start()
                elif got.count == total:
                    break
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
    """Ping, spinning on try_offer and poll (yielding every idle_yield idle polls, or with
    `invoke`, calling it on every idle poll and yielding every INVOKE_YIELD); the round trips
    after the warmup appended to `rtts` in ns."""
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
                await asyncio.sleep(0)


# -- pyzmq (spec["address"]: ipc://... or tcp://...) ----------------------------------------


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
        return received_result(spec, Received(total, bad, len(data)), window)


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


def worker_main(spec_json: str) -> int:
    """Run the role a worker process was started for; its RESULT on stdout, 0; or the error on
    stderr, 1 (also when it does not finish within the spec's timeout + grace)."""
    spec = json.loads(spec_json)
    role = spec["role"]
    limit = spec["timeout"] + spec.get("grace", 0.0)
    released = Released()
    try:
        if role in ASYNC_ROLES:

            async def run() -> dict:
                return await asyncio.wait_for(ASYNC_ROLES[role](spec, released), limit)

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


# =========================================================================================
# Cross-process benchmarks, parent side: child processes, their clean-up, runs and reports
# =========================================================================================


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Child:
    """A child process (in its own process group) whose stdout lines are read by a thread (each
    with the CLOCK_MONOTONIC time it arrived) and whose stderr goes to a temporary file shown when
    it fails."""

    def __init__(self, name: str, argv: list[str], stdin_text: str | None = None):
        self.name = name
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.output: list[str] = []
        self.line_time = 0.0  # when the line next_line returned last arrived
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
                self.lines.put((time.monotonic(), line.rstrip("\n")))
        self.lines.put(None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def next_line(self, timeout: float) -> str | None:
        """The next stdout line, None at EOF; raises queue.Empty after `timeout`."""
        if self.eof:
            return None
        item = self.lines.get(timeout=max(0.0, timeout))
        if item is None:
            self.eof = True
            return None
        self.line_time, line = item
        self.output.append(line)
        return line

    def expect(self, prefix: str, timeout: float, peer: Child | None = None) -> str:
        """The next line starting with `prefix`; BenchError when this child exits first, or
        `peer` (a child that should outlive this one's answer) exits, or after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.next_line(left if peer is None else min(0.5, left))
            except queue.Empty:
                if peer is not None and peer.proc.poll() is not None:
                    raise BenchError(
                        f"{peer.name} exited with status {peer.proc.poll()} while waiting for "
                        f"{self.name}{peer.tail()}"
                    ) from None
                if peer is not None and left > 0:
                    continue
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

    def result(self, timeout: float, peer: Child | None = None) -> dict:
        return json.loads(self.expect("RESULT ", timeout, peer)[len("RESULT ") :])

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
    """User + system CPU seconds of a live process (all its threads), from /proc."""
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


def free_ports(n: int, kind: int = socket.SOCK_DGRAM) -> list[int]:
    """`n` different ports free on 127.0.0.1 now (UDP by default, else `kind`)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(n):
            s = stack.enter_context(socket.socket(socket.AF_INET, kind))
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    """A port free on 127.0.0.1 now (UDP by default, else `kind`)."""
    return free_ports(1, kind)[0]


class Scope:
    """Everything a run starts - child processes, then directories - torn down in `close()`
    whatever happened. `script` is the benchmark run as the workers (`--worker JSON`)."""

    def __init__(self, script: str) -> None:
        self.script = script
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
        return self.child(name, [sys.executable, self.script, "--worker", json.dumps(spec)])

    def shm_dir(self, kind: str) -> str:
        """A fresh directory name under /dev/shm (not created), removed on close."""
        dir = os.path.join(shm_base(), unique_name(kind))
        self.paths.append(dir)
        return dir

    def temp_dir(self, prefix: str) -> str:
        dir = tempfile.mkdtemp(prefix=prefix)
        self.paths.append(dir)
        return dir

    def close(self) -> None:
        for c in reversed(self.children):
            with contextlib.suppress(Exception):
                c.close()
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def unwind_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the finally blocks stop every child and remove every
    directory."""
    signal.signal(signal.SIGTERM, _terminated)


def pct(part: float | None, whole: float) -> str:
    return "?" if part is None or whole <= 0 else f"{100 * part / whole:.0f}%"


def report_throughput(
    received: dict, sent: dict | None, names: tuple[str, str]
) -> dict[str, float | None]:
    """Rates of one run: `rate` timed in the receiver (end of warmup to last message) and `e2e`
    from the sender's first timed send to the receiver's last message (CLOCK_MONOTONIC is one
    clock for all processes); None when nothing was timed. Prints where the CPU went (`names`:
    the receiver's and the sender's; `sent` is None when the sender was not waited for)."""
    n, wall = received["count"], received["elapsed"]
    rate = n / wall if n and wall > 0 else None
    e2e = None
    if rate is not None and sent is not None and not received.get("incomplete"):
        e2e = n / (received["t_last"] - sent["t_first"])
    parts = [f"{names[0]} {pct(received['cpu_s'], wall)} of {wall * 1e3:.1f} ms"]
    if sent is not None:
        parts.append(
            f"{names[1]} {pct(sent['cpu_s'], sent['elapsed'])} of {sent['elapsed'] * 1e3:.1f} ms "
            f"({n / sent['elapsed']:,.0f} msgs/s sent)"
        )
    if received.get("driver_cpu_s") is not None:  # /proc ticks: 10 ms resolution
        parts.append(f"driver {received['driver_cpu_s'] * 1e3:.0f} ms")
    head = "n/a" if rate is None else f"{rate:,.0f}"
    tail = f" (e2e {e2e:,.0f})" if e2e is not None else ""
    if received.get("incomplete"):
        tail += f" INCOMPLETE: {received['incomplete']}"
    progress(f"    {head:>14} msgs/s{tail}   cpu: " + ", ".join(parts))
    return {"rate": rate, "e2e": e2e}


def run_spec(size: int, count: int, warmup: int, timeout: float, **spec) -> dict:
    """The workers' spec of one run: `spec` and what every run has."""
    return {**spec, "size": size, "count": count, "warmup": warmup, "timeout": timeout}


def worker_limit(spec: dict) -> float:
    """How long the parent waits for a worker's result: its own limit and some."""
    return spec["timeout"] + spec.get("grace", 0.0) + 30.0


def pair_run(
    scope: Scope, spec: dict, first: tuple[str, str], second: tuple[str, str], first_measures: bool
) -> tuple[dict, dict | None]:
    """The `first` worker, then (once it is READY) the `second`, each given as (name, role).
    The result of the one that measures - the first (a receiver) if `first_measures`, else the
    second (a ping) - once it is done, then the other's once released (after its SENT, a
    sender's), or None when the run was incomplete and the other is stopped instead."""
    started = scope.worker(first[0], {**spec, "role": first[1]})
    started.expect("READY", 30.0)
    then = scope.worker(second[0], {**spec, "role": second[1]})
    measuring, other = (started, then) if first_measures else (then, started)
    result = measuring.result(worker_limit(spec), peer=other)
    answer = None
    if result.get("incomplete"):
        other.stop()
    else:
        if first_measures:
            other.expect("SENT", 30.0)
        other.release()
        answer = other.result(30.0)
        other.wait(30.0)
    measuring.wait(30.0)
    return result, answer


def throughput_run(
    scope: Scope, spec: dict, receiver: tuple[str, str], sender: tuple[str, str]
) -> dict:
    """The receiver worker, then the sender, each given as (name, role); the receiver's result
    once it has every message (or ran out of time), then the sender's once released (a sender
    left behind by an incomplete run is stopped instead). The run's rates, and `incomplete`
    (the CPU report names each worker by its role without the prefix: sub, pub, pull, push)."""
    received, sent = pair_run(scope, spec, receiver, sender, first_measures=True)
    names = (receiver[1].partition("-")[2], sender[1].partition("-")[2])
    if "dirs" in spec:
        names = (f"{names[0]}+driver", f"{names[1]}+driver")
    return {**report_throughput(received, sent, names), "incomplete": received.get("incomplete")}


def latency_run(scope: Scope, spec: dict, pong: tuple[str, str], ping: tuple[str, str]) -> dict:
    """The pong worker, then the ping, each given as (name, role); the ping's statistics once it
    is done, after the pong's answer count once released (a pong left behind by an incomplete
    run is stopped instead)."""
    stats, answered = pair_run(scope, spec, pong, ping, first_measures=False)
    report_latency(stats, answered, embedded="dirs" in spec)
    return stats


# The two workers of a run, as (name, role): the receiver (or pong) first, the sender (or ping).
WORKER_PAIRS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "aeron-tput": (("aeronio subscriber", "aeron-sub"), ("aeronio publisher", "aeron-pub")),
    "zmq-tput": (("pyzmq PULL", "zmq-pull"), ("pyzmq PUSH", "zmq-push")),
    "aeron-rtt": (("aeronio pong", "aeron-pong"), ("aeronio ping", "aeron-ping")),
    "zmq-rtt": (("pyzmq pong", "zmq-pong"), ("pyzmq ping", "zmq-ping")),
}


def worker_run(
    script: str,
    pair: str,
    cell: TputCell | RttCell,
    warmup: int,
    timeout: float,
    spec_of: Callable[[Scope, tuple[str, str]], dict],
) -> dict:
    """One run of `cell` (its size and count, after `warmup` untimed messages or round trips)
    between the two workers of WORKER_PAIRS[pair], run as `script`: the throughput run's rates,
    or the latency run's statistics (pairs `*-rtt`). `spec_of(scope, roles)` gives what the
    workers' spec has for this benchmark and mode; it may start processes of its own in the
    run's scope (a standalone driver) or name directories for the roles."""
    first, second = WORKER_PAIRS[pair]
    with Scope(script) as scope:
        spec = run_spec(
            cell.size, cell.count, warmup, timeout, **spec_of(scope, (first[1], second[1]))
        )
        run = latency_run if pair.endswith("-rtt") else throughput_run
        return run(scope, spec, first, second)


def report_latency(stats: dict, answered: dict | None, embedded: bool = False) -> None:
    wall = stats["elapsed"]
    suffix = "+driver" if embedded else ""
    parts = [f"ping{suffix} {pct(stats['cpu_s'], wall)}"]
    if answered is not None:
        parts.append(f"pong{suffix} {pct(answered['cpu_s'], wall)}")
    if stats.get("driver_cpu_s") is not None:
        parts.append(f"driver {pct(stats['driver_cpu_s'], wall)}")
    head = (
        "no round trips timed"
        if not stats.get("n")
        else f"median {stats['median']:.2f} us, p99 {stats['p99']:.2f} us, "
        f"p99.9 {stats['p999']:.2f} us over {stats['n']:,}"
    )
    if stats.get("incomplete"):
        head += f" INCOMPLETE: {stats['incomplete']}"
    progress(f"    {head}   cpu over {wall:.2f} s: " + ", ".join(parts))


# -- the reference Aeron (Java) -------------------------------------------------------------

AERON_JAVA = "/work/shared/aeron-java/aeron-java"
# the streams of every run, aeronio's and Aeron Java's alike: throughput, pings, pongs
STREAM_ID = 1001
PING_STREAM_ID = 1002
PONG_STREAM_ID = 1003


def java_available(java: str | None) -> None:
    """Skipped unless `java` (the aeron-java script; None: disabled) can run here."""
    if java is None:
        raise Skipped("disabled (--no-java)")
    if shutil.which("java") is None:
        raise Skipped("no java")
    if not os.access(java, os.X_OK):
        raise Skipped(f"no {java}")


def java_argv(java: str, dir: str, props: dict[str, object], cls: str) -> list[str]:
    return [java, f"-Daeron.dir={dir}", *(f"-D{k}={v}" for k, v in props.items()), cls]


def java_ping_props(
    size: int, count: int, warmup: int, ping_channel: str, pong_channel: str
) -> dict[str, object]:
    """The properties of Aeron's ping-pong samples: `count` round trips of `size` bytes after
    one iteration of `warmup` (at least one), pings on PING_STREAM_ID, pongs on PONG_STREAM_ID."""
    return {
        "aeron.sample.messageLength": size,
        "aeron.sample.ping.channel": ping_channel,
        "aeron.sample.pong.channel": pong_channel,
        "aeron.sample.ping.streamId": PING_STREAM_ID,
        "aeron.sample.pong.streamId": PONG_STREAM_ID,
        "aeron.sample.messages": count,
        "aeron.sample.warmup.messages": max(warmup, 1),
        "aeron.sample.warmup.iterations": 1,
    }


def ping_pong_spec(ping_channel: str, pong_channel: str) -> dict:
    """The channels and streams of an aeronio ping-pong (its workers' spec)."""
    return {
        "ping_channel": ping_channel,
        "pong_channel": pong_channel,
        "ping_stream": PING_STREAM_ID,
        "pong_stream": PONG_STREAM_ID,
    }


def java_samples(rates: list[float]) -> tuple[list[float], str]:
    """The per-second rates of an Aeron Java throughput run that count (the first two dropped,
    JIT warmup, when there are four or more), and the note that says how many."""
    kept = rates[2:] if len(rates) >= 4 else rates
    return kept, f"{len(kept)} 1-s samples (of {len(rates)})"


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


def read_until(child: Child, timeout: float, stop: Callable[[str], bool]) -> list[str]:
    """`child`'s stdout lines until one for which `stop` is true (included), EOF or `timeout`."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = child.next_line(deadline - time.monotonic())
        except queue.Empty:
            return lines
        if line is None:
            return lines
        lines.append(line)
        if stop(line):
            return lines


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


# -- cells and rows of the report -----------------------------------------------------------


@dataclass
class TputCell:
    mode: str
    size: int
    count: int
    window: str = ""  # the receiver window setting (UDP)
    rates: list[float] = field(default_factory=list)
    e2e_rates: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def rate(self) -> float | None:
        return median_or_none(self.rates)

    @property
    def e2e(self) -> float | None:
        return median_or_none(self.e2e_rates)

    @property
    def mb(self) -> float | None:
        r = self.rate
        return None if r is None else r * self.size / 1e6

    @property
    def spread(self) -> str:
        return span(self.rates)


@dataclass
class RttCell:
    mode: str
    size: int
    count: int
    stats: dict | None = None
    note: str = ""


def fmt_x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


@contextlib.contextmanager
def noted_row(cell: TputCell | RttCell):
    """A row that may be skipped or fail without failing the run: noted in the cell (and on
    stderr) and the run goes on."""
    try:
        yield
    except Skipped as e:
        cell.note = f"skipped: {e}"
        progress(f"    {cell.note}")
    except BenchError as e:
        cell.note = f"failed: {e}".splitlines()[0]
        progress(f"    {e}")


def rtt_rows(cells: list[RttCell], names: dict[str, str], peer: str = "zmq") -> list[list[str]]:
    """The latency table's rows (`names`: each mode's path); vs pyzmq = the `peer` mode's median
    over this one's."""
    zmq_median = {
        c.size: c.stats["median"] for c in cells if c.mode == peer and c.stats and c.stats.get("n")
    }
    rows = []
    for c in cells:
        s = c.stats or {}
        if "raw" in s:
            rows.append([names[c.mode], str(c.size), f"{c.count:,}"] + [""] * 6 + [s["raw"]])
            continue
        ratio = ""
        if c.mode != peer and s.get("median") and zmq_median.get(c.size):
            ratio = f"{zmq_median[c.size] / s['median']:.2f}x"
        rows.append(
            [
                names[c.mode],
                str(c.size),
                f"{c.count:,}" if s.get("n") is None else f"{s['n']:,}",
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


Table = tuple[list[str], list[list[str]], set[int]]  # headers, rows, right-aligned columns


def rtt_table(cells: list[RttCell], names: dict[str, str]) -> Table | None:
    """The latency table (`names`: each mode's path), None when nothing was measured."""
    return (RTT_HEADERS, rtt_rows(cells, names), RTT_RIGHT) if cells else None


AERON_TPUT = ("a", "b", "c")  # the aeronio throughput modes (z: pyzmq, j: Aeron Java)


def tput_table(
    cells: list[TputCell],
    names: dict[str, str],
    note_header: str,
    note: Callable[[TputCell], str],
    windows: bool = False,
) -> Table | None:
    """The throughput table (`names`: each mode's path; with `windows`, a window column after
    it; `note(cell)` under `note_header` last), None when nothing was measured. vs pyzmq: an
    aeronio mode's rate over pyzmq's of the same size; vs Aeron: over Aeron Java's of the same
    size and window."""
    if not cells:
        return None
    zmq_rate = {c.size: c.rate for c in cells if c.mode == "z"}
    java_rate = {(c.size, c.window): c.rate for c in cells if c.mode == "j"}
    rows = []
    for c in cells:
        vs_zmq = vs_java = ""
        if c.mode in AERON_TPUT and c.rate:
            if zmq_rate.get(c.size):
                vs_zmq = fmt_x(c.rate / zmq_rate[c.size])
            if java_rate.get((c.size, c.window)):
                vs_java = fmt_x(c.rate / java_rate[(c.size, c.window)])
        rows.append(
            [
                names[c.mode],
                *([c.window or "-"] if windows else []),
                str(c.size),
                "-" if c.mode == "j" else f"{c.count:,}",
                fmt(c.rate, ",.0f"),
                fmt(c.mb, ",.1f"),
                "-" if c.mode == "j" else fmt(c.e2e, ",.0f"),
                vs_zmq,
                vs_java,
                note(c),
            ]
        )
    headers = ["path", *(["window"] if windows else []), "size B", "N", "msgs/s", "MB/s"]
    headers += ["e2e msgs/s", "vs pyzmq", "vs Aeron", note_header]
    return headers, rows, set(range(2 if windows else 1, len(headers) - 1))


# -- targets --------------------------------------------------------------------------------


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def ratio_target(what: str, rate: float | None, base: float | None, at_least: float) -> str:
    """`what: 1.23x -> met` when rate / base is at least `at_least` (n/a without both)."""
    ratio = rate / base if rate and base else None
    return f"{what}: {fmt_x(ratio)} -> {verdict(None if ratio is None else ratio >= at_least)}"


def counted(cell: TputCell | RttCell | None) -> bool:
    """Whether a cell's figures count for the targets: measured, not failed or incomplete."""
    return cell is not None and not cell.note.startswith(("failed", "INCOMPLETE"))


def tput_rate(
    cells: list[TputCell], mode: str, window: str | None = None, size: int = 32
) -> float | None:
    """The rate of the `mode` cell of `size` (and `window`, unless None) if it counts."""
    cell = next(
        (
            c
            for c in cells
            if c.mode == mode and c.size == size and (window is None or c.window == window)
        ),
        None,
    )
    return cell.rate if counted(cell) else None


def rtt_median(cells: list[RttCell], mode: str) -> float | None:
    """The median round trip of the `mode` cell if it counts."""
    cell = next((c for c in cells if c.mode == mode), None)
    return cell.stats.get("median") if counted(cell) and cell.stats else None


def rtt_targets(cells: list[RttCell], spin_limit: float, zmq: str) -> list[str]:
    """The latency targets: the busy-spin median at most `spin_limit` us, the default idle
    strategy's at most pyzmq's (`zmq`: how the target names it)."""
    spins = [m for m in (rtt_median(cells, "spin"), rtt_median(cells, "spin-invoke")) if m]
    spin = min(spins, default=None)
    default, zmq_rtt = rtt_median(cells, "default"), rtt_median(cells, "zmq")
    ok = None if default is None or zmq_rtt is None else default <= zmq_rtt
    return [
        f"busy-spin RTT median (best busy-spin row) <= {spin_limit:g} us: {fmt(spin, '.2f')} us -> "
        f"{verdict(None if spin is None else spin <= spin_limit)}",
        f"default idle RTT median <= {zmq}: {fmt(default, '.2f')} vs "
        f"{fmt(zmq_rtt, '.2f')} us -> {verdict(ok)}",
    ]


# -- the report -----------------------------------------------------------------------------


@dataclass
class Report:
    """A cross-process benchmark's report: `title` (markdown), the header (`info`), the
    throughput and latency tables (None: not run) under their `titles` in the text report, the
    targets (under the heading `summary`) and the notes."""

    title: str
    titles: tuple[str, str]
    info: dict[str, str]
    tput: Table | None
    rtt: Table | None
    targets: list[str]
    notes: list[str]
    summary: str = "Targets"

    def tables(self, titles: tuple[str, str]) -> list[tuple[str, Table]]:
        """(title, table) of the tables that are there, titled from `titles`."""
        pairs = zip(titles, (self.tput, self.rtt), strict=True)
        return [(title, table) for title, table in pairs if table is not None]

    def text(self) -> str:
        out = [f"{k:>14}: {v}" for k, v in self.info.items()]
        for title, table in self.tables(self.titles):
            out += ["", title, "", *text_table(*table)]
        out += ["", f"{self.summary}:"] + [f"  {x}" for x in self.targets]
        out += [""] + [f"* {x}" for x in self.notes]
        return "\n".join(out)

    def markdown(self, command: str) -> str:
        out = [f"## {self.title}", ""]
        out.extend(f"- **{k}**: {v}" for k, v in self.info.items())
        out.append(f"- **command**: `{command}`")
        for title, table in self.tables(("Throughput", "Round-trip latency")):
            out += ["", f"### {title}", "", *md_table(*table)]
        out += ["", f"### {self.summary}", ""] + [f"- {x}" for x in self.targets]
        out += [""] + [f"- {x}" for x in self.notes]
        return "\n".join(out) + "\n"

    def print(self, args: argparse.Namespace, argv: list[str] | None, script: str) -> None:
        """The text report on stdout, then the markdown one as --markdown and --out say."""
        print(self.text())
        write_markdown(args, argv, script, self.markdown)


def process_info(
    setup: str,
    args: argparse.Namespace,
    sizes: list[int],
    warmups: list[int],
    more: dict[str, str] | None = None,
) -> dict[str, str]:
    """The report's header: the machine (and its load at the start), Java, the aeronio setup,
    `more`, then the repeats and the warmups of the run `args` say."""
    warmup = ", ".join(f"{w:,} msgs before {s} B runs" for s, w in zip(sizes, warmups, strict=True))
    return {
        **machine_info(with_load=True),
        "java": java_version(),
        "aeronio setup": setup,
        **(more or {}),
        "repeats": f"{args.repeats} (throughput; median shown)",
        "warmup": f"{warmup}; {args.rtt_warmup:,} round trips",
    }


# =========================================================================================
# Cross-process benchmarks, main: the command line and the measuring of the cells
# =========================================================================================

INT_ERRORS = ("{what}: integers, not {text!r}", "{what}: positive integers, not {text!r}")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """--worker (hidden: how a worker is started), --sizes, --count, --warmup, --repeats."""
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


def add_mode_arguments(
    parser: argparse.ArgumentParser, tput_modes: dict[str, str], rtt_modes: dict[str, str]
) -> None:
    """--modes (default: all of `tput_modes`), --rtt-count, --rtt-warmup, --rtt-size and
    --rtt-modes (default: all of `rtt_modes`)."""
    parser.add_argument(
        "--modes",
        default=",".join(tput_modes),
        help=f"throughput paths, from {','.join(tput_modes)} (empty: none)",
    )
    parser.add_argument("--rtt-count", type=int, default=100_000, help="timed round trips")
    parser.add_argument("--rtt-warmup", type=int, default=10_000, help="untimed round trips")
    parser.add_argument("--rtt-size", type=int, default=32, help="ping-pong message size")
    parser.add_argument(
        "--rtt-modes",
        default=",".join(rtt_modes),
        help=f"latency paths, from {','.join(rtt_modes)} (empty: none)",
    )


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """--markdown and --out (what write_markdown reads)."""
    parser.add_argument("--markdown", action="store_true", help="also print a markdown report")
    parser.add_argument("--out", metavar="FILE", help="write the markdown report to FILE")


def parse_command_line(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> tuple[argparse.Namespace, list[int], list[int] | None]:
    """The parent's arguments, --sizes (each >= 8 bytes, like --rtt-size if any) and --count (None
    when not given); from here on SIGTERM unwinds. A worker (--worker SPEC) runs its role here
    instead and exits with its status."""
    args = parser.parse_args(argv)
    if args.worker is not None:
        sys.exit(worker_main(args.worker))
    unwind_on_sigterm()
    sizes, counts = sizes_and_counts(parser, args, INT_ERRORS)
    if any(s < 8 for s in sizes) or getattr(args, "rtt_size", 8) < 8:
        parser.error("sizes must be at least 8 bytes (every message carries a u64 sequence)")
    check_counts(parser, counts, sizes)
    return args, sizes, counts


def counts_and_warmups(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    sizes: list[int],
    counts: list[int] | None,
    quick: dict[str, object],
) -> tuple[list[int], list[int]]:
    """The count and the warmup (--warmup, else a fifth of the count, at most 200,000) of each
    size, once the warmups are checked; with --quick, `quick` first: its "count" for every size,
    the rest set as arguments (e.g. "repeats": 1)."""
    if getattr(args, "rtt_warmup", 0) < 0 or (args.warmup is not None and args.warmup < 0):
        parser.error("warmups must not be negative")
    if args.quick:
        counts = [quick["count"]]
        for name, value in quick.items():
            if name != "count":
                setattr(args, name, value)
    counts = per_size_counts(counts, sizes)
    warmups = [args.warmup if args.warmup is not None else min(200_000, n // 5) for n in counts]
    return counts, warmups


@dataclass
class RunOptions:
    """What the runs of a cross-process benchmark take from its command line (a benchmark's
    options add their own fields)."""

    fragment_limit: int
    batch_rows: int
    timeout: float
    java: str | None  # the aeron-java script, None when Java rows are disabled
    java_seconds: float

    @classmethod
    def from_args(cls, args: argparse.Namespace, **more):
        """The options of `args` (--fragment-limit, --batch-rows, --timeout, --aeron-java unless
        --no-java, --java-seconds), and `more` (the benchmark's own fields)."""
        return cls(
            fragment_limit=args.fragment_limit,
            batch_rows=args.batch_rows,
            timeout=args.timeout,
            java=None if args.no_java else args.aeron_java,
            java_seconds=args.java_seconds,
            **more,
        )


@dataclass
class Runs:
    """How a benchmark runs a cell, each called as run(cell, warmup, opts): aeronio (any mode
    but pyzmq's and Aeron Java's: the cell says which), pyzmq (z, zmq), Aeron Java (j, java)."""

    aeron: Callable[[Any, int, Any], Any]  # (cell, warmup, the benchmark's RunOptions)
    zmq: Callable[[Any, int, Any], Any]
    java: Callable[[Any, int, Any], Any]

    @staticmethod
    def kind(mode: str) -> str:
        """Whose run measures `mode`: aeron, zmq or java."""
        if mode in ("j", "java"):
            return "java"
        return "zmq" if mode in ("z", "zmq") else "aeron"


def throughput_cells(
    plan: Iterable[tuple[TputCell, int]],
    names: dict[str, str],
    repeats: int,
    runs: Runs,
    opts: RunOptions,
    aeron_noted: bool = False,
) -> list[TputCell]:
    """Each (cell, warmup) of `plan` measured in turn, a progress line first. Aeron Java once:
    its run gives its per-second rates and a note, and a skipped or failed run is noted in the
    cell. Every other mode `repeats` times, each run giving its rates: an incomplete run is
    noted (its rate kept) and ends the cell's repeats, and so does, with `aeron_noted`, a failed
    aeronio run (any other failed run fails the benchmark)."""
    cells = []
    for cell, warmup in plan:
        kind = runs.kind(cell.mode)
        run = getattr(runs, kind)
        cells.append(cell)
        window = f", window {cell.window}" if cell.window else ""
        progress(f"{names[cell.mode]}{window}, {cell.size} B, N={cell.count:,} (warmup {warmup:,})")
        if kind == "java":
            with noted_row(cell):
                cell.rates, cell.note = run(cell, warmup, opts)
                progress(f"    {cell.rate:>14,.0f} msgs/s ({cell.note})")
            continue
        noted = aeron_noted and kind == "aeron"
        for _ in range(repeats):
            with noted_row(cell) if noted else contextlib.nullcontext():
                rates = run(cell, warmup, opts)
                if rates["incomplete"]:
                    cell.note = f"INCOMPLETE: {rates['incomplete']}"
                    if rates["rate"]:
                        cell.rates.append(rates["rate"])
                else:
                    cell.rates.append(rates["rate"])
                    cell.e2e_rates.append(rates["e2e"])
            if cell.note:  # an incomplete or failed run: no repeats
                break
    return cells


def latency_cells(
    modes: list[str],
    names: dict[str, str],
    args: argparse.Namespace,
    runs: Runs,
    opts: RunOptions,
    java_note: str,
    aeron_noted: bool = False,
) -> list[RttCell]:
    """A cell of --rtt-size and --rtt-count for each mode, measured in turn after a progress
    line: its run, called as run(cell, --rtt-warmup, opts), gives its statistics. An incomplete
    run is noted (its statistics kept); Aeron Java is noted `java_note`, or skipped or failed in
    its note, and so is, with `aeron_noted`, a failed aeronio run (any other failed run fails
    the benchmark)."""
    size, count, warmup = args.rtt_size, args.rtt_count, args.rtt_warmup
    cells = []
    for mode in modes:
        kind = runs.kind(mode)
        run = getattr(runs, kind)
        cell = RttCell(mode, size, count)
        cells.append(cell)
        progress(f"{names[mode]}, {size} B, {count:,} round trips (warmup {warmup:,})")
        noted = kind == "java" or (aeron_noted and kind == "aeron")
        with noted_row(cell) if noted else contextlib.nullcontext():
            cell.stats = run(cell, warmup, opts)
            if kind == "java":
                cell.note = java_note
                if "raw" in cell.stats:
                    progress(f"    {cell.stats['raw']}")
                else:
                    progress(
                        f"    median {cell.stats['median']:.2f} us, p99 {cell.stats['p99']:.2f} us"
                    )
            elif cell.stats.get("incomplete"):
                cell.note = f"INCOMPLETE: {cell.stats['incomplete']}"
    return cells
