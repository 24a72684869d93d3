#!/usr/bin/env python
"""IPC throughput of aeronio against pyzmq inproc://, measured in the same run.

Modes (publisher and subscriber in one process, payload bytes only in MB/s, MB = 10**6 B):

  a   try_offer + poll loops interleaved on one event loop (sleep(0) only when idle)
  a2  try_offer in a threading.Thread, poll loop on the event loop
  b   `await pub.offer(msg)` producer task + `async for message in sub` consumer
  c   try_offer_batch(2-D uint8 records) + batch_poll(handler) with batch.records(dtype)
  d   pyzmq PUSH/PULL over inproc://: a thread sock.send(msg), the main thread sock.recv()
  d2  (with --zmq-nocopy) the same with copy=False on both sides

Each cell is the median of --repeats runs; every run checks that exactly N messages (and the
right bytes) arrived. Ratios are aeronio msgs/s over pyzmq (d) msgs/s for the same size.

    python bench/ipc_throughput.py --quick
    python bench/ipc_throughput.py --sizes 32,1024 --repeats 5 --markdown --out bench.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import common
import numpy as np
import zmq
from common import BenchError, check, fmt

import aeronio
from aeronio import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

CHANNEL = "aeron:ipc"
STREAM_ID = 1001
LINK_DELAY_S = 0.05

MODES: dict[str, str] = {
    "a": "(a) try_offer+poll",
    "a2": "(a2) threads",
    "b": "(b) await offer/async for",
    "c": "(c) offer_batch/batch_poll",
    "d": "(d) pyzmq inproc",
    "d2": "(d2) pyzmq copy=False",
}
AERONIO_MODES = ("a", "a2", "b", "c")


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
        options: dict = {"ipc_term_length": self.term_length}
        if self.sparse:
            options["term_buffer_sparse_file"] = True
        return options


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


async def run_async_api(pub, sub, size: int, n: int, setup: AeronSetup) -> float:
    """(b): `await pub.offer(msg)` in a producer task, `async for` in the consumer."""
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
        async for message in sub:
            count += 1
            nbytes += len(message.data)
            if count == n:
                final = message.data
                break
        await task
    finally:
        if not task.done():
            task.cancel()
    elapsed = time.perf_counter() - t0
    check_delivered("(b)", n, size, count, nbytes)
    check(final == last, "(b) the last message received differs from the last one sent")
    return elapsed


async def run_batch(pub, sub, size: int, n: int, setup: AeronSetup) -> float:
    """(c): 2-D uint8 records through try_offer_batch; batch_poll sums one field per batch."""
    rows = setup.batch_rows
    limit = setup.fragment_limit
    dtype = common.record_dtype(size)
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


def zmq_run(size: int, n: int, copy: bool, timeout: float) -> float:
    """(d)/(d2): PUSH in a thread sends N messages, PULL in this thread receives them."""
    global _zmq_runs
    _zmq_runs += 1
    address = f"inproc://bench-{os.getpid()}-{_zmq_runs}"
    msg = make_message(size, 0x99)
    last = last_message(size)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
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
    try:
        check(ready.wait(10.0), "pyzmq sender did not connect")
        recv = pull.recv
        count = 0
        nbytes = 0
        data = b""
        t0 = time.perf_counter()
        go.set()
        try:
            for _ in range(n):
                data = recv(copy=copy)
                count += 1
                nbytes += len(data)
        except zmq.Again:
            raise BenchError(f"pyzmq stalled at {count}/{n} messages") from None
        elapsed = time.perf_counter() - t0
        thread.join(10.0)
        if errors:
            raise errors[0]
        final = data if copy else data.bytes
        check_delivered("pyzmq", n, size, count, nbytes)
        check(final == last, "pyzmq: the last message received differs from the last one sent")
        return elapsed
    finally:
        go.set()
        thread.join(10.0)
        pull.close(linger=0)
        ctx.term()


# -- driver -------------------------------------------------------------------------------


@dataclass
class Cell:
    mode: str
    size: int
    count: int
    times: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float | None:
        return common.median_or_none(self.times)

    @property
    def msgs_per_s(self) -> float | None:
        m = self.median
        return None if m is None else self.count / m

    @property
    def mb_per_s(self) -> float | None:
        rate = self.msgs_per_s
        return None if rate is None else rate * self.size / 1e6

    @property
    def spread(self) -> str:
        """min..max msgs/s over the repeats."""
        return common.span(self.count / t for t in self.times)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=(
            "IPC throughput of aeronio (try_offer/poll, threads, await offer/async for, "
            "offer_batch/batch_poll) against pyzmq PUSH/PULL over inproc://, in one run."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--sizes", default="32,1024", help="message sizes in bytes, comma-separated (>= 8)"
    )
    parser.add_argument(
        "--count",
        default=None,
        help="messages per run: one number for every size or one per size "
        "(default 1,000,000 for sizes <= 64 B, else 300,000)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="runs per cell (median reported)")
    parser.add_argument(
        "--modes",
        default="a,a2,b,c,d",
        help=f"modes to run, comma-separated, from {','.join(MODES)}",
    )
    parser.add_argument(
        "--zmq-nocopy", action="store_true", help="also run pyzmq with copy=False (mode d2)"
    )
    parser.add_argument(
        "--term-length", type=int, default=64 * 1024 * 1024, help="IPC term length in bytes"
    )
    parser.add_argument(
        "--sparse",
        action="store_true",
        help="sparse log buffers (term_buffer_sparse_file=True) instead of allocated, pre-mapped "
        "ones (Aeron's default)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="untimed messages sent through each aeronio run's log first (try_offer+poll)",
    )
    parser.add_argument(
        "--exclusive", action="store_true", help="use exclusive publications (no tail CAS)"
    )
    parser.add_argument(
        "--burst", type=int, default=256, help="(a) messages offered (and polled) per round"
    )
    parser.add_argument(
        "--fragment-limit", type=int, default=4096, help="(a2, c) fragment limit per poll"
    )
    parser.add_argument(
        "--thread-backoff",
        type=float,
        default=20e-6,
        help="(a2) seconds the publisher thread sleeps when back-pressured (releases the GIL)",
    )
    parser.add_argument("--batch-rows", type=int, default=1024, help="(c) records per offer_batch")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run fails")
    parser.add_argument("--quick", action="store_true", help="smoke test: N=50,000 and --repeats 1")
    parser.add_argument("--markdown", action="store_true", help="also print a markdown report")
    parser.add_argument("--out", metavar="FILE", help="write the markdown report to FILE")
    return parser


INT_ERRORS = (
    "{what} must be comma-separated integers: {text!r}",
    "{what} must be positive integers: {text!r}",
)


def resolve(args: argparse.Namespace, parser: argparse.ArgumentParser):
    sizes, counts = common.sizes_and_counts(parser, args, INT_ERRORS)
    if any(s < 8 for s in sizes):
        parser.error("--sizes: every size must be at least 8 bytes (the records carry a u64 seq)")
    max_message = min(args.term_length // 8, 16 * 1024 * 1024)
    if any(s > max_message for s in sizes):
        parser.error(f"--sizes: max message length for this term length is {max_message}")
    common.check_counts(parser, counts, sizes)
    if args.quick:
        counts = [50_000]
        args.repeats = 1
    counts = common.per_size_counts(counts, sizes)
    modes = common.split_modes(parser, args.modes, MODES, "--modes", noun="mode(s) ")
    if args.zmq_nocopy and "d2" not in modes:
        modes.append("d2")
    if args.thread_backoff < 0:
        parser.error("--thread-backoff must not be negative")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    common.require_positive(parser, args, ("repeats", "burst", "fragment_limit", "batch_rows"))
    return sizes, counts, modes


def ratio(cell: Cell, peer: Cell | None) -> str:
    if cell.mode == "d" or peer is None:
        return ""
    if cell.msgs_per_s is None or peer.msgs_per_s is None:
        return "n/a"
    return f"{cell.msgs_per_s / peer.msgs_per_s:.2f}x"


def rows_of(cells: list[Cell]) -> list[list[str]]:
    peers = {c.size: c for c in cells if c.mode == "d"}
    rows = []
    for cell in cells:
        rows.append(
            [
                MODES[cell.mode],
                str(cell.size),
                f"{cell.count:,}",
                fmt(cell.msgs_per_s, ",.0f"),
                fmt(cell.mb_per_s, ",.1f"),
                ratio(cell, peers.get(cell.size)),
                cell.spread or cell.note,
            ]
        )
    return rows


HEADERS = ["mode", "size B", "N", "msgs/s", "MB/s", "vs pyzmq", "min..max msgs/s"]
RIGHT = {1, 2, 3, 4, 5}


def text_report(info: dict[str, str], cells: list[Cell], repeats: int) -> str:
    out = [f"{k:>13}: {v}" for k, v in info.items()]
    out.append(f"{'repeats':>13}: {repeats} (median shown; MB = 10^6 payload bytes)")
    out.append("")
    out.extend(common.text_table(HEADERS, rows_of(cells), RIGHT))
    out.append("")
    out.append("vs pyzmq = aeronio msgs/s / pyzmq (d) msgs/s at the same size")
    return "\n".join(out)


def markdown_report(info: dict[str, str], cells: list[Cell], repeats: int, argv: str) -> str:
    out = ["## IPC throughput: aeronio vs pyzmq inproc", ""]
    out.extend(f"- **{k}**: {v}" for k, v in info.items())
    out.append(f"- **repeats**: {repeats} (median shown; MB = 10^6 payload bytes)")
    out.append(f"- **command**: `{argv}`")
    out.append("")
    out.extend(common.md_table(HEADERS, rows_of(cells), RIGHT))
    out.append("")
    out.append("`vs pyzmq` = aeronio msgs/s ÷ pyzmq PUSH/PULL (copy=True) msgs/s at the same size.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sizes, counts, modes = resolve(args, parser)
    setup = AeronSetup(
        term_length=args.term_length,
        exclusive=args.exclusive,
        sparse=args.sparse,
        burst=args.burst,
        fragment_limit=args.fragment_limit,
        batch_rows=args.batch_rows,
        timeout=args.timeout,
        warmup=args.warmup,
        thread_backoff=args.thread_backoff,
    )
    info = common.machine_info()
    info["aeronio setup"] = (
        f"embedded driver per run, aeron:ipc, term {args.term_length:,} B "
        f"({'sparse' if args.sparse else 'allocated'}), "
        f"{'exclusive' if args.exclusive else 'concurrent'} publication, "
        f"warmup {args.warmup:,} msgs, burst {args.burst}, fragment limit "
        f"{args.fragment_limit}, batch rows {args.batch_rows}, "
        f"thread backoff {args.thread_backoff * 1e6:g} us"
    )
    cells: list[Cell] = []
    for size, n in zip(sizes, counts, strict=True):
        for mode in modes:
            cell = Cell(mode, size, n)
            cells.append(cell)
            for rep in range(args.repeats):
                try:
                    if mode in AERONIO_MODES:
                        elapsed = asyncio.run(aeronio_run(mode, size, n, setup))
                    else:
                        elapsed = zmq_run(size, n, copy=(mode == "d"), timeout=args.timeout)
                except NotApplicable as e:
                    cell.note = f"skipped: {e}"
                    print(f"{MODES[mode]:<28} {size:>6} B  n/a ({e})", file=sys.stderr)
                    break
                cell.times.append(elapsed)
                print(
                    f"{MODES[mode]:<28} {size:>6} B  run {rep + 1}/{args.repeats}: "
                    f"{n / elapsed:>12,.0f} msgs/s",
                    file=sys.stderr,
                    flush=True,
                )
    print(text_report(info, cells, args.repeats))
    common.write_markdown(
        args,
        argv,
        "bench/ipc_throughput.py",
        lambda command: markdown_report(info, cells, args.repeats, command),
    )
    return 0


if __name__ == "__main__":
    common.run_main(main)
