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
import os
import queue
import re
import signal
import sys
import time
from dataclasses import dataclass

import common
from common import (
    AERON_JAVA,
    RTT_HEADERS,
    RTT_RIGHT,
    Child,
    RttCell,
    Scope,
    Skipped,
    TputCell,
    fmt,
    fmt_x,
    noted_row,
    progress,
    rtt_rows,
)

CHANNEL = "aeron:ipc"
STREAM_ID = 1001
PING_STREAM_ID = 1002
PONG_STREAM_ID = 1003
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


def worker_spec(opts: Options, **spec) -> dict:
    """What every aeronio worker of this benchmark has: the standalone driver's channel and the
    spinning loops' yield policy (every YIELD_EVERY idle polls; no yield while sending)."""
    return {
        **spec,
        "channel": CHANNEL,
        "idle_yield": YIELD_EVERY,
        "send_yield": 0,
        "fragment_limit": opts.fragment_limit,
        "batch_rows": opts.batch_rows,
    }


@dataclass
class Options:
    term_length: int
    sparse: bool
    fragment_limit: int
    batch_rows: int
    timeout: float
    java: str | None  # the aeron-java script, None when Java rows are disabled
    java_seconds: float


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


def zmq_address(scope: Scope) -> str:
    return f"ipc://{scope.temp_dir('aeronio-bench-zmq-')}/sock"


# -- throughput runs ------------------------------------------------------------------------


def aeron_throughput(
    mode: str, size: int, count: int, warmup: int, opts: Options
) -> dict[str, float]:
    """One run: driver, subscriber, publisher processes."""
    with Scope(WORKER) as scope:
        driver, dir = start_driver(scope, opts)
        spec = common.run_spec(
            size,
            count,
            warmup,
            opts.timeout,
            **worker_spec(opts, mode=mode, dir=dir, stream=STREAM_ID),
        )
        return common.throughput_run(
            scope,
            spec,
            ("aeronio subscriber", "aeron-sub"),
            ("aeronio publisher", "aeron-pub"),
        )


def zmq_throughput(size: int, count: int, warmup: int, opts: Options) -> dict[str, float]:
    with Scope(WORKER) as scope:
        spec = common.run_spec(size, count, warmup, opts.timeout, address=zmq_address(scope))
        return common.throughput_run(
            scope, spec, ("pyzmq PULL", "zmq-pull"), ("pyzmq PUSH", "zmq-push")
        )


JAVA_RATE = re.compile(r"Duration (\d+)ms - ([\d,]+) messages - ([\d,]+) payload bytes")


def java_throughput(size: int, opts: Options) -> tuple[list[float], str]:
    """Aeron's EmbeddedIpcThroughput for --java-seconds; its per-second rates (msgs/s) after
    dropping the first two (JIT warmup) and any printed once shutdown began."""
    common.java_available(opts.java)
    with Scope(WORKER) as scope:
        dir = scope.shm_dir("java")
        props = {"aeron.sample.messageLength": size}
        java = scope.child(
            "Aeron Java",
            common.java_argv(opts.java, dir, props, "io.aeron.samples.EmbeddedIpcThroughput"),
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


def aeron_latency(mode: str, size: int, count: int, warmup: int, opts: Options) -> dict:
    with Scope(WORKER) as scope:
        driver, dir = start_driver(scope, opts)
        spec = common.run_spec(
            size,
            count,
            warmup,
            opts.timeout,
            **worker_spec(
                opts,
                mode=mode,
                dir=dir,
                ping_channel=CHANNEL,
                pong_channel=CHANNEL,
                ping_stream=PING_STREAM_ID,
                pong_stream=PONG_STREAM_ID,
            ),
        )
        return common.latency_run(scope, spec, "aeronio", "aeron")


def zmq_latency(size: int, count: int, warmup: int, opts: Options) -> dict:
    with Scope(WORKER) as scope:
        spec = common.run_spec(size, count, warmup, opts.timeout, address=zmq_address(scope))
        return common.latency_run(scope, spec, "pyzmq", "zmq")


def java_latency(size: int, count: int, warmup: int, opts: Options) -> dict:
    common.java_available(opts.java)
    with Scope(WORKER) as scope:
        dir = scope.shm_dir("java")
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
            common.java_argv(opts.java, dir, props, "io.aeron.samples.EmbeddedPingPong"),
            stdin_text="n\n",  # its "Execute again? (y/n)" prompt
        )
        lines = common.read_until(
            java, opts.timeout + 60.0, lambda line: line.startswith("#[Buckets")
        )
        java.stop(signal.SIGINT, 15.0)
        stats = common.parse_hdr(lines)
        if not lines:
            raise Skipped(f"no output from Aeron Java{java.tail(3)}")
        return stats


# =========================================================================================
# Report
# =========================================================================================


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
        out += common.text_table(RTT_HEADERS, rtt_rows(rtt, RTT_MODES), RTT_RIGHT)
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
        out += common.md_table(RTT_HEADERS, rtt_rows(rtt, RTT_MODES), RTT_RIGHT)
    out += ["", "### Targets", ""] + [f"- {x}" for x in targets(tput, rtt)]
    out += [""] + [f"- {x}" for x in NOTES]
    return "\n".join(out) + "\n"


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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.worker is not None:
        return common.worker_main(args.worker)
    common.unwind_on_sigterm()
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
    info["java"] = common.java_version()
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
                with noted_row(cell):
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
            with noted_row(cell):
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
