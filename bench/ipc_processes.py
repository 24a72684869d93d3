#!/usr/bin/env python
"""Cross-process IPC: aeronio through a standalone driver vs pyzmq ipc:// vs the reference Aeron.

Every aeronio run starts `python -m aeronio.cli driver --dir /dev/shm/<unique>` as its own
process, then a publisher (or ping) process and a subscriber (or pong) process that attach to it
with `aeronio.connect(DIR)`. pyzmq runs the same pattern between two processes over ipc://. The
reference Aeron (Java 1.15.1, via ../shared/aeron-java/aeron-java or $AERON_JAVA) runs its own
samples in the same run: EmbeddedIpcThroughput and EmbeddedPingPong (threads in one JVM, its own
embedded driver) - skipped with a reason, never failing the run, when Java is missing.

Throughput (payload MB/s, MB = 10**6 B), timed in the receiving process from the end of the
warmup to the last message; every message carries a u64 sequence number in its first 8 bytes
that the receiver checks, and the count and the last message's length are checked. A second
rate, e2e, runs from the sender's first timed send to the receiver's last message (one
CLOCK_MONOTONIC for all processes). Each run prints where the CPU went (receiver, sender,
driver) on stderr.

a try_offer loop -> poll(handler, limit) loop (spin; sleep(0) every 1000 idle) b await
pub.offer(msg) -> async for message in sub (default NotifyingIdleStrategy) c try_offer_batch(2-D
u8) -> batch_poll + batch.records(dtype) numpy views z pyzmq PUSH.send -> PULL.recv over ipc://
j Aeron Java EmbeddedIpcThroughput: median of its 1-second samples (first ones dropped)

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
import functools
import os
import queue
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from basics import STREAM_ID, Skipped, require_positive, run_main, split_modes
from children import Child, Scope
from command_line import (
    RunOptions,
    Runs,
    add_mode_arguments,
    add_report_arguments,
    add_run_arguments,
    counts_and_warmups,
    latency_cells,
    parse_command_line,
    throughput_cells,
)
from java_peer import (
    java_argv,
    java_available,
    java_ping_props,
    java_samples,
    parse_hdr,
    ping_pong_spec,
    read_until,
)
from reports import (
    Report,
    RttCell,
    TputCell,
    process_info,
    ratio_target,
    rtt_table,
    rtt_targets,
    tput_rate,
    tput_table,
)
from runs import worker_run

from tests.support.reference_aeron import runner

CHANNEL = "aeron:ipc"
YIELD_EVERY = 1000  # idle spins between `await asyncio.sleep(0)` in the spinning loops
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


@dataclass
class Options(RunOptions):
    term_length: int
    sparse: bool


def start_driver(scope: Scope, opts: Options) -> tuple[Child, str]:
    """A standalone aeronio driver on a fresh /dev/shm directory, once it is up."""
    dir = scope.shm_dir("driver")
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
    driver = scope.child("aeronio driver", argv)
    driver.expect("aeronio driver pid", 30.0)
    return driver, dir


def aeron_spec(opts: Options, **spec) -> Callable[[Scope, tuple[str, str]], dict]:
    """The spec of a run's aeronio workers: `spec` and what every one of this benchmark has - a
    standalone driver started in the run's scope, its channel, and the spinning loops' yield
    policy (every YIELD_EVERY idle polls; no yield while sending)."""

    def spec_of(scope: Scope, roles: tuple[str, str]) -> dict:
        _, dir = start_driver(scope, opts)
        return {
            **spec,
            "dir": dir,
            "channel": CHANNEL,
            "idle_yield": YIELD_EVERY,
            "send_yield": 0,
            "fragment_limit": opts.fragment_limit,
            "batch_rows": opts.batch_rows,
        }

    return spec_of


def zmq_spec(scope: Scope, roles: tuple[str, str]) -> dict:
    return {"address": f"ipc://{scope.temp_dir('aeronio-bench-zmq-')}/sock"}


# -- throughput runs ------------------------------------------------------------------------


def aeron_throughput(cell: TputCell, warmup: int, opts: Options) -> dict:
    """One run: driver, subscriber, publisher processes."""
    spec = aeron_spec(opts, mode=cell.mode, stream=STREAM_ID)
    return worker_run(WORKER, "aeron-tput", cell, warmup, opts.timeout, spec)


def zmq_throughput(cell: TputCell, warmup: int, opts: Options) -> dict:
    return worker_run(WORKER, "zmq-tput", cell, warmup, opts.timeout, zmq_spec)


JAVA_RATE = re.compile(r"Duration (\d+)ms - ([\d,]+) messages - ([\d,]+) payload bytes")


def java_throughput(cell: TputCell, warmup: int, opts: Options) -> tuple[list[float], str]:
    """Aeron's EmbeddedIpcThroughput for --java-seconds; its per-second rates (msgs/s) after
    dropping the first two (JIT warmup) and any printed once shutdown began."""
    java_available(opts.java)
    with Scope(WORKER) as scope:
        dir = scope.shm_dir("java")
        props = {"aeron.sample.messageLength": cell.size}
        java = scope.child(
            "Aeron Java",
            java_argv(opts.java, dir, props, "io.aeron.samples.EmbeddedIpcThroughput"),
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
        return java_samples(rates)


# -- latency runs ---------------------------------------------------------------------------


def aeron_latency(cell: RttCell, warmup: int, opts: Options) -> dict:
    spec = aeron_spec(opts, mode=cell.mode, **ping_pong_spec(CHANNEL, CHANNEL))
    return worker_run(WORKER, "aeron-rtt", cell, warmup, opts.timeout, spec)


def zmq_latency(cell: RttCell, warmup: int, opts: Options) -> dict:
    return worker_run(WORKER, "zmq-rtt", cell, warmup, opts.timeout, zmq_spec)


def java_latency(cell: RttCell, warmup: int, opts: Options) -> dict:
    java_available(opts.java)
    with Scope(WORKER) as scope:
        dir = scope.shm_dir("java")
        props = java_ping_props(cell.size, cell.count, warmup, CHANNEL, CHANNEL)
        java = scope.child(
            "Aeron Java",
            java_argv(opts.java, dir, props, "io.aeron.samples.EmbeddedPingPong"),
            stdin_text="n\n",  # its "Execute again? (y/n)" prompt
        )
        lines = read_until(java, opts.timeout + 60.0, lambda line: line.startswith("#[Buckets"))
        java.stop(signal.SIGINT, 15.0)
        stats = parse_hdr(lines)
        if not lines:
            raise Skipped(f"no output from Aeron Java{java.tail(3)}")
        return stats


TPUT_RUNS = Runs(aeron_throughput, zmq_throughput, java_throughput)
RTT_RUNS = Runs(aeron_latency, zmq_latency, java_latency)


# =========================================================================================
# Report
# =========================================================================================


def targets(tput: list[TputCell], rtt: list[RttCell]) -> list[str]:
    """The issue's targets, met or not, from what this run measured."""
    rate = functools.partial(tput_rate, tput)
    return [
        ratio_target("32 B try_offer/poll >= 3x pyzmq", rate("a"), rate("z"), 3),
        ratio_target(
            "32 B await offer/async for >= 0.8x try_offer/poll", rate("b"), rate("a"), 0.8
        ),
        ratio_target("32 B await offer/async for >= 2x pyzmq", rate("b"), rate("z"), 2),
        ratio_target("32 B batch path >= Aeron Java IPC rate", rate("c"), rate("j"), 1),
        *rtt_targets(rtt, 10, "pyzmq"),
    ]


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


# the markdown report's title, the text report's titles of the throughput and latency tables
TITLE = "Cross-process IPC: aeronio vs pyzmq vs Aeron (Java)"
TABLE_TITLES = ("Throughput (cross-process IPC)", "Round-trip latency (ping-pong over IPC)")


# =========================================================================================
# Main
# =========================================================================================


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Cross-process IPC throughput and ping-pong latency: aeronio through a "
        "standalone driver vs pyzmq over ipc:// vs the reference Aeron (Java), in one run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_run_arguments(parser)
    add_mode_arguments(parser, TPUT_MODES, RTT_MODES)
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
    parser.add_argument("--aeron-java", default=str(runner()), help="the aeron-java script")
    parser.add_argument("--no-java", action="store_true", help="skip the Aeron Java rows")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds before a run fails")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 50,000 messages, 1 repeat, 5,000 round trips, 3 s of Java",
    )
    add_report_arguments(parser)
    return parser


# --quick: the count for every size, and arguments
QUICK = dict(count=50_000, repeats=1, rtt_count=5_000, rtt_warmup=1_000, java_seconds=3.0)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, sizes, counts = parse_command_line(parser, argv)
    modes = split_modes(parser, args.modes, TPUT_MODES, "--modes")
    rtt_modes = split_modes(parser, args.rtt_modes, RTT_MODES, "--rtt-modes")
    require_positive(parser, args, ("repeats", "rtt_count", "fragment_limit", "batch_rows"))
    counts, warmups = counts_and_warmups(parser, args, sizes, counts, QUICK)
    opts = Options.from_args(args, term_length=args.term_length, sparse=args.sparse)
    setup = (
        f"standalone driver process (python -m aeronio.cli driver), aeron:ipc, term "
        f"{args.term_length:,} B ({'sparse' if args.sparse else 'allocated'}), "
        f"concurrent publication, fragment limit {args.fragment_limit}, batch rows "
        f"{args.batch_rows}, spinning loops yield every {YIELD_EVERY} idle polls"
    )
    info = process_info(setup, args, sizes, warmups)
    plan = [
        (TputCell(mode, size, n), w)
        for size, n, w in zip(sizes, counts, warmups, strict=True)
        for mode in modes
    ]
    tput = throughput_cells(plan, TPUT_MODES, args.repeats, TPUT_RUNS, opts)
    java_note = "busy-spin threads, one JVM"
    rtt = latency_cells(rtt_modes, RTT_MODES, args, RTT_RUNS, opts, java_note)
    report = Report(
        TITLE,
        TABLE_TITLES,
        info,
        tput_table(tput, TPUT_MODES, "min..max msgs/s / note", lambda c: c.note or c.spread),
        rtt_table(rtt, RTT_MODES),
        targets(tput, rtt),
        NOTES,
    )
    report.print(args, argv, "bench/ipc_processes.py")
    return 0


if __name__ == "__main__":
    run_main(main, interrupted_exit=True)
