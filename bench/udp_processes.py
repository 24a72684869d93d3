#!/usr/bin/env python
"""UDP over loopback between two processes: aeronio vs pyzmq tcp:// vs the reference Aeron.

Every aeronio run starts two worker processes, each with its own embedded media driver
(`aeronio.MediaDriver.launch` on its event loop, its own directory under /dev/shm): a publisher
(or ping) on `aeron:udp?endpoint=127.0.0.1:<free port>` and a subscriber (or pong) on the same
channel. pyzmq runs PUSH/PULL and PAIR between two processes over tcp://127.0.0.1. The reference
Aeron (Java 1.15.1, via ../shared/aeron-java/aeron-java or $AERON_JAVA) runs its own samples in
the same run, also as two processes each with an embedded driver: StreamingPublisher ->
RateSubscriber, and Ping/Pong - skipped with a reason, never failing the run, when Java is
missing.

Throughput (payload MB/s, MB = 10**6 B) is timed in the receiving process from the end of the
warmup to the last message; every message carries a u64 sequence number in its first 8 bytes
that the receiver checks, and the count and the last message's length are checked. e2e runs from
the sender's first timed send to the receiver's last message (one CLOCK_MONOTONIC for all
processes). Each cell runs for every receiver window setting (--windows): `default` (each side's
defaults), or a size W: `rcv-wnd=W|so-rcvbuf=W|so-sndbuf=W` on the subscription, `so-
rcvbuf=W|so-sndbuf=W` on the publication, and for Java -Daeron.rcv.initial.window.length,
-Daeron.socket.so_rcvbuf and -Daeron.socket.so_sndbuf = W on both sides.

  a  try_offer loop          -> poll(handler, limit) loop
  b  await pub.offer(msg)    -> async for message in sub        (default NotifyingIdleStrategy)
  c  try_offer_batch(2-D u8) -> batch_poll + batch.records(dtype) numpy views
  z  pyzmq PUSH.send         -> PULL.recv over tcp://127.0.0.1
  j  Aeron Java StreamingPublisher -> RateSubscriber: median of the subscriber's 1-second
     rates (first two dropped), computed from its message totals and the lines' arrival times

Yield policy of the spinning loops (a, c, spin): the embedded driver's sender and receiver run
on the same event loop as the application, so spinning without yielding only delays them. The
loops `await asyncio.sleep(0)` on every poll that finds nothing and every offer that is refused
(back-pressure can only be relieved by this process's own sender), and a publisher also after
every --send-yield messages offered (the sender then sends while the publisher appends, instead
of the publisher filling half a term first). (b) leaves it to the awaitable API: `await offer`
returns without yielding while there is space, and waits through back-pressure with the client's
idle strategy.

Every aeronio run is bounded by --timeout: a receiver that runs out of time reports what it
received, in order, as an INCOMPLETE row (its rate over what arrived) instead of hanging; a
wrong or out-of-order message fails the row (noted, the run goes on).

Round-trip latency (32 B by default, >= 100,000 round trips after a warmup), per round trip with
perf_counter_ns in the ping process; ping and pong each with its own embedded driver, the pings
on one UDP endpoint and the pongs on another; median, p99, p99.9 in microseconds:

  spin       ping/pong spin on try_offer and poll, yielding on every empty poll (busy-spin at
             the loop level: the driver runs between polls)
  spin-invoke  the same loops calling the embedded driver's duty cycle (MediaDriver.invoke)
             on every poll instead of yielding (yielding every 1000 idle polls)
  default    ping: await pub.offer + await sub.receive(); pong: async for + await pub.offer;
             the default NotifyingIdleStrategy (yield ~50 times, then park until woken)
  yield-api  the same calls with YieldingIdleStrategy (never parks)
  zmq        pyzmq PAIR send/recv over tcp://127.0.0.1
  java       Aeron Java Ping/Pong (two JVMs, embedded drivers in SHARED threading, its
             HdrHistogram)

    python bench/udp_processes.py --quick
    python bench/udp_processes.py --markdown --out udp_processes.md
    python bench/udp_processes.py --only a,z,j,spin,zmq,java --sizes 32 --windows 2m

"""

from __future__ import annotations

import argparse
import functools
import os
import queue
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from basics import STREAM_ID, BenchError, Skipped, require_positive, run_main, split_modes
from children import Scope, free_port, free_ports, proc_cpu_s, progress
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
    AERON_TPUT,
    Report,
    RttCell,
    TputCell,
    fmt_x,
    process_info,
    ratio_target,
    rtt_table,
    rtt_targets,
    tput_rate,
    tput_table,
    verdict,
)
from runs import pct, worker_run

from aeronio.errors import ChannelUriError
from aeronio.protocol.channel import parse_size
from tests.support.reference_aeron import runner

IDLE_YIELD = 1  # idle polls / refused offers between yields: the driver shares the loop
SEND_YIELD = 256  # default --send-yield
GRACE = 20.0  # seconds a worker may take beyond --timeout (setup, driver start and close)
WORKER = os.path.abspath(__file__)
JAVA_UDP_PROPS = (
    "aeron.rcv.initial.window.length",
    "aeron.socket.so_rcvbuf",
    "aeron.socket.so_sndbuf",
)

TPUT_MODES: dict[str, str] = {
    "a": "aeronio (a) try_offer -> poll",
    "b": "aeronio (b) await offer -> async for",
    "c": "aeronio (c) offer_batch -> batch_poll",
    "z": "pyzmq PUSH/PULL tcp://",
    "j": "Aeron Java StreamingPublisher -> RateSubscriber",
}
RTT_MODES: dict[str, str] = {
    "spin": "aeronio busy-spin poll/try_offer",
    "spin-invoke": "aeronio busy-spin poll/try_offer + driver.invoke()",
    "default": "aeronio default idle: await offer/receive",
    "yield-api": "aeronio Yielding idle: await offer/receive",
    "zmq": "pyzmq PAIR tcp://",
    "java": "Aeron Java Ping/Pong (SHARED threading)",
}


@dataclass
class Options(RunOptions):
    send_yield: int
    java_props: dict[str, str]  # --java-prop: driver/sample properties for every JVM


# -- channels and windows -------------------------------------------------------------------


def window_bytes(window: str) -> int | None:
    """None for `default`, else the window's size in bytes (k/m/g suffixes, as in channels)."""
    return None if window == "default" else parse_size("window", window)


def udp_channel(port: int) -> str:
    return f"aeron:udp?endpoint=127.0.0.1:{port}"


def udp_channels(port: int, window: str) -> tuple[str, str]:
    """(publication channel, subscription channel) on 127.0.0.1:port with the window setting."""
    base = udp_channel(port)
    if window == "default":
        return base, base
    buffers = f"|so-rcvbuf={window}|so-sndbuf={window}"
    return base + buffers, f"{base}|rcv-wnd={window}{buffers}"


def aeron_spec(opts: Options, **spec) -> Callable[[Scope, tuple[str, str]], dict]:
    """The spec of a run's aeronio workers: `spec` and what every one of this benchmark has - an
    embedded driver per role, each on a fresh /dev/shm directory of the run's scope, the yield
    policy, a partial result when time runs out."""

    def spec_of(scope: Scope, roles: tuple[str, str]) -> dict:
        return {
            **spec,
            "dirs": {role: scope.shm_dir(role) for role in roles},
            "idle_yield": IDLE_YIELD,
            "send_yield": opts.send_yield,
            "fragment_limit": opts.fragment_limit,
            "batch_rows": opts.batch_rows,
            "partial": True,
            "grace": GRACE,
        }

    return spec_of


def zmq_spec(scope: Scope, roles: tuple[str, str]) -> dict:
    return {"address": f"tcp://127.0.0.1:{free_port()}"}


# -- throughput runs ------------------------------------------------------------------------


def aeron_throughput(cell: TputCell, warmup: int, opts: Options) -> dict:
    """One run: subscriber, publisher processes (each with its own driver)."""
    pub_channel, sub_channel = udp_channels(free_port(), cell.window)
    spec = aeron_spec(
        opts, mode=cell.mode, channel=pub_channel, sub_channel=sub_channel, stream=STREAM_ID
    )
    return worker_run(WORKER, "aeron-tput", cell, warmup, opts.timeout, spec)


def zmq_throughput(cell: TputCell, warmup: int, opts: Options) -> dict:
    return worker_run(WORKER, "zmq-tput", cell, warmup, opts.timeout, zmq_spec)


def java_props(window: str, opts: Options) -> dict[str, object]:
    """The driver properties of a window setting (both sides), then --java-prop's."""
    size = window_bytes(window)
    return {**({} if size is None else dict.fromkeys(JAVA_UDP_PROPS, size)), **opts.java_props}


JAVA_TOTAL = re.compile(r"totals (\d+) messages")


def java_rates(samples: list[tuple[float, int]]) -> list[float]:
    """msgs/s between consecutive (arrival time, total messages) samples, from the first sample
    that shows messages."""
    first = next((i for i, (_, total) in enumerate(samples) if total > 0), len(samples))
    if first > 0:
        first -= 1  # the last zero total is where the stream started from
    rates = []
    for (t0, n0), (t1, n1) in zip(samples[first:], samples[first + 1 :], strict=False):
        if t1 > t0:
            rates.append((n1 - n0) / (t1 - t0))
    return rates


def java_throughput(cell: TputCell, warmup: int, opts: Options) -> tuple[list[float], str]:
    """RateSubscriber, then StreamingPublisher (each JVM with an embedded driver) for about
    --java-seconds of samples; the subscriber's per-second rates after dropping the first two
    (JIT warmup, and the first may include the connection)."""
    java_available(opts.java)
    with Scope(WORKER) as scope:
        props = {
            "aeron.sample.embeddedMediaDriver": "true",
            "aeron.sample.channel": udp_channel(free_port()),
            "aeron.sample.streamId": STREAM_ID,
            "aeron.sample.messageLength": cell.size,
            **java_props(cell.window, opts),
        }
        sub = scope.child(
            "Aeron Java RateSubscriber",
            java_argv(
                opts.java, scope.shm_dir("java-sub"), props, "io.aeron.samples.RateSubscriber"
            ),
        )
        # the first run may fetch the jar; the subscriber prints a line a second from its start
        started = read_until(sub, 120.0, lambda line: "totals" in line)
        if not any("totals" in line for line in started):
            raise Skipped(f"Aeron Java RateSubscriber did not start{sub.tail(3)}")
        pub = scope.child(
            "Aeron Java StreamingPublisher",
            java_argv(
                opts.java,
                scope.shm_dir("java-pub"),
                {**props, "aeron.sample.messages": 10**12},
                "io.aeron.samples.StreamingPublisher",
            ),
            stdin_text="n\n",  # its "Execute again? (y/n)" prompt
        )
        samples: list[tuple[float, int]] = []
        cpu0: tuple[float | None, float | None, float] | None = None
        deadline = time.monotonic() + opts.java_seconds + 60.0
        stop_at: float | None = None
        while time.monotonic() < (stop_at or deadline):
            try:
                line = sub.next_line(min(0.5, (stop_at or deadline) - time.monotonic()))
            except queue.Empty:
                continue
            if line is None:
                break
            m = JAVA_TOTAL.search(line)
            if m is None:
                continue
            total = int(m.group(1))
            samples.append((sub.line_time, total))
            if total > 0 and stop_at is None:  # time the run from the first data
                stop_at = time.monotonic() + opts.java_seconds + 2.5
                cpu0 = (proc_cpu_s(sub.pid), proc_cpu_s(pub.pid), time.monotonic())
        cpu1 = (proc_cpu_s(sub.pid), proc_cpu_s(pub.pid), time.monotonic())
        sub.stop(signal.SIGINT, 15.0)  # it registers SIGINT for an orderly shutdown
        pub.stop(signal.SIGINT, 15.0)
        rates = java_rates(samples)
        if not rates or max(rates) <= 0:
            raise Skipped(
                f"no messages reached Aeron Java RateSubscriber{sub.tail(3)}{pub.tail(3)}"
            )
        kept, note = java_samples(rates)
        if cpu0 is not None:
            wall = cpu1[2] - cpu0[2]
            use = [
                None if a is None or b is None else b - a
                for a, b in zip(cpu0[:2], cpu1[:2], strict=True)
            ]
            progress(
                f"    cpu over {wall:.1f} s: RateSubscriber JVM {pct(use[0], wall)}, "
                f"StreamingPublisher JVM {pct(use[1], wall)} (of one core)"
            )
        return kept, note


# -- latency runs ---------------------------------------------------------------------------


def aeron_latency(cell: RttCell, warmup: int, opts: Options) -> dict:
    ping_port, pong_port = free_ports(2)
    spec = aeron_spec(
        opts,
        mode=cell.mode,
        **ping_pong_spec(udp_channel(ping_port), udp_channel(pong_port)),
    )
    return worker_run(WORKER, "aeron-rtt", cell, warmup, opts.timeout, spec)


def zmq_latency(cell: RttCell, warmup: int, opts: Options) -> dict:
    return worker_run(WORKER, "zmq-rtt", cell, warmup, opts.timeout, zmq_spec)


# The reference's ping-pong runs its drivers in SHARED threading (one agent thread per JVM) unless
# --java-prop says otherwise: DEDICATED's three spinning threads per JVM on this 2-core machine
# gave a 3.8 ms median round trip (20,000 round trips) and could not finish 100,000 in time.
JAVA_RTT_PROPS = {"aeron.threading.mode": "SHARED"}
JAVA_RTT_PATIENCE_S = 0.002  # per round trip, beyond --timeout, before Ping counts as failed


def java_latency(cell: RttCell, warmup: int, opts: Options) -> dict:
    """Pong, then Ping (each JVM with an embedded driver, SHARED threading by default) over two
    UDP endpoints; Ping's HdrHistogram of `count` round trips after `warmup`."""
    java_available(opts.java)
    ping_port, pong_port = free_ports(2)
    with Scope(WORKER) as scope:
        props = {
            "aeron.sample.embeddedMediaDriver": "true",
            **java_ping_props(
                cell.size, cell.count, warmup, udp_channel(ping_port), udp_channel(pong_port)
            ),
            **JAVA_RTT_PROPS,
            **opts.java_props,
        }
        pong = scope.child(
            "Aeron Java Pong",
            java_argv(opts.java, scope.shm_dir("java-pong"), props, "io.aeron.samples.Pong"),
        )
        started = read_until(pong, 120.0, lambda line: line.startswith("Publishing Pong"))
        if not started or not started[-1].startswith("Publishing Pong"):
            raise Skipped(f"Aeron Java Pong did not start{pong.tail(3)}")
        ping = scope.child(
            "Aeron Java Ping",
            java_argv(opts.java, scope.shm_dir("java-ping"), props, "io.aeron.samples.Ping"),
            stdin_text="n\n",  # its "Execute again? (y/n)" prompt
        )
        # It prints only at the end, and its slowest round trips take milliseconds here.
        patience = opts.timeout + 60.0 + (cell.count + warmup) * JAVA_RTT_PATIENCE_S
        lines = read_until(ping, patience, lambda line: line.startswith("#[Buckets"))
        ping.stop(signal.SIGINT, 15.0)
        pong.stop(signal.SIGINT, 15.0)
        if not any(line.startswith("#[Buckets") for line in lines):
            raise BenchError(f"no histogram from Aeron Java Ping{ping.tail(3)}")
        return parse_hdr(lines)


TPUT_RUNS = Runs(aeron_throughput, zmq_throughput, java_throughput)
RTT_RUNS = Runs(aeron_latency, zmq_latency, java_latency)


# =========================================================================================
# Report
# =========================================================================================


def targets(tput: list[TputCell], rtt: list[RttCell]) -> list[str]:
    """Issue 4's targets, met or not, from what this run measured (failed and incomplete rows
    count as not measured)."""
    rate = functools.partial(tput_rate, tput)
    out = [
        ratio_target(
            "32 B aeronio (a) try_offer/poll >= 2x pyzmq tcp (default window)",
            rate("a", "default"),
            rate("z"),
            2,
        ),
        ratio_target(
            "32 B aeronio (b) await offer/async for >= 0.8x (a) (default window)",
            rate("b", "default"),
            rate("a", "default"),
            0.8,
        ),
    ]
    for window in dict.fromkeys(c.window for c in tput if c.mode == "j"):
        j = rate("j", window)
        best = [(m, rate(m, window)) for m in AERON_TPUT]
        best = [(m, v / j) for m, v in best if v and j]
        text = ", ".join(f"({m}) {fmt_x(x)}" for m, x in best) or "n/a"
        ok = None if not best else max(x for _, x in best) >= 1
        out.append(f"32 B aeronio >= Aeron Java, window {window}: {text} -> {verdict(ok)}")
    return out + rtt_targets(rtt, 30, "pyzmq tcp")


NOTES = [
    "Throughput: msgs/s timed in the receiving process from the end of the warmup to the last "
    "message, median of the repeats (min..max shown); MB = 10^6 payload bytes. e2e msgs/s: "
    "from the sender's first timed send to the receiver's last message (CLOCK_MONOTONIC, one "
    "clock for all processes).",
    "aeronio rows: two processes, each with its own embedded driver (sender or receiver on the "
    "application's event loop), aeron:udp unicast over 127.0.0.1, a fresh pair per run. "
    "INCOMPLETE: the receiver ran out of --timeout; its rate is over the messages that arrived "
    "(all in order) and the row meets no target.",
    "window: `default` is each side's defaults (aeronio and Aeron: receiver window 128 KiB; "
    "socket buffers: the OS default for aeronio, so_rcvbuf 128 KiB for Aeron); a size W sets the "
    "receiver window and both socket buffers to W on both sides.",
    "pyzmq rows: two processes over tcp://127.0.0.1 (PUSH/PULL, PAIR), copy=True, default HWM.",
    "Aeron Java rows: the reference Aeron 1.15.1 samples as two JVMs, each with an embedded "
    "driver on its own aeron.dir; throughput (default DEDICATED threading: conductor, sender and "
    "receiver threads) = median of RateSubscriber's 1-second rates; latency (SHARED threading: "
    "DEDICATED's six spinning threads on 2 cores took ms per round trip) = Ping's HdrHistogram.",
    "Latency: per round trip in the ping process after the warmup, numpy percentiles.",
    "vs pyzmq: throughput aeronio / pyzmq; latency pyzmq median / this median (higher is "
    "better for both). vs Aeron: aeronio / Aeron Java msgs/s with the same size and window.",
]


def setup_line(opts: Options) -> str:
    return (
        "two processes, each with its own embedded driver (aeronio.MediaDriver.launch, its own "
        "/dev/shm dir), aeron:udp unicast on 127.0.0.1, default term (16 MiB) and MTU (1408); "
        f"fragment limit {opts.fragment_limit}, batch rows {opts.batch_rows}; spinning loops "
        f"yield on every empty poll or refused offer and after every {opts.send_yield} messages "
        f"offered; --timeout {opts.timeout:g} s per run"
    )


QUICK_NOTE = (
    "--quick: a smoke test. Runs of 20,000 messages last milliseconds and fit in the windows "
    "and socket buffers, so their rates (and the ratios to Aeron's per-second samples) say "
    "little; run without --quick for figures."
)


def notes(quick: bool) -> list[str]:
    return [QUICK_NOTE, *NOTES] if quick else NOTES


# the markdown report's title, the text report's titles of the throughput and latency tables
TITLE = "UDP over loopback: aeronio vs pyzmq tcp vs Aeron (Java)"
TABLE_TITLES = (
    "Throughput (UDP over loopback, two processes)",
    "Round-trip latency (ping-pong over UDP loopback)",
)


# =========================================================================================
# Main
# =========================================================================================


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="UDP over loopback between two processes: throughput and ping-pong latency "
        "of aeronio (an embedded driver per process) vs pyzmq over tcp:// vs the reference Aeron "
        "(Java), in one run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--windows",
        default="default,2m",
        help="receiver window settings: `default`, or a size (e.g. 2m) for the receiver window "
        "and both socket buffers",
    )
    add_mode_arguments(parser, TPUT_MODES, RTT_MODES)
    parser.add_argument(
        "--only",
        default=None,
        help="run only these paths, throughput and latency alike (overrides --modes and "
        "--rtt-modes), e.g. a,z,j,spin",
    )
    parser.add_argument("--fragment-limit", type=int, default=4096, help="(a, c) poll limit")
    parser.add_argument("--batch-rows", type=int, default=1024, help="(c) records per offer")
    parser.add_argument(
        "--send-yield",
        type=int,
        default=SEND_YIELD,
        help="(a) messages offered between yields to the loop (so the driver sends); (c) yields "
        "after every offer; 0: yield only when back-pressured",
    )
    parser.add_argument(
        "--java-seconds", type=float, default=10.0, help="Aeron Java throughput run length"
    )
    parser.add_argument("--aeron-java", default=str(runner()), help="the aeron-java script")
    parser.add_argument(
        "--java-prop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a -D property for every JVM (repeatable), e.g. aeron.threading.mode=SHARED",
    )
    parser.add_argument("--no-java", action="store_true", help="skip the Aeron Java rows")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds an aeronio run may receive (then INCOMPLETE); also bounds pyzmq runs",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 20,000 messages, 1 repeat, 2,000 round trips, 3 s of Java, --timeout 10",
    )
    add_report_arguments(parser)
    return parser


# --quick: the count for every size, and arguments
QUICK = dict(
    count=20_000, repeats=1, rtt_count=2_000, rtt_warmup=500, java_seconds=3.0, timeout=10.0
)


def parse_windows(parser: argparse.ArgumentParser, text: str) -> list[str]:
    windows = [w.strip() for w in text.split(",") if w.strip()]
    if not windows:
        parser.error("--windows: give at least one setting")
    for w in windows:
        try:
            size = window_bytes(w)
        except ChannelUriError:
            parser.error(f"--windows: `default` or a size like 2m, not {w!r}")
        if size is not None and not 0 < size < 2**31:
            parser.error(f"--windows: {w!r} must be between 1 B and 2 GiB")
    return windows


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, sizes, counts = parse_command_line(parser, argv)
    windows = parse_windows(parser, args.windows)
    if args.only is not None:
        known = {**TPUT_MODES, **RTT_MODES}
        only = split_modes(parser, args.only, known, "--only")
        modes = [m for m in only if m in TPUT_MODES]
        rtt_modes = [m for m in only if m in RTT_MODES]
    else:
        modes = split_modes(parser, args.modes, TPUT_MODES, "--modes")
        rtt_modes = split_modes(parser, args.rtt_modes, RTT_MODES, "--rtt-modes")
    require_positive(
        parser, args, ("repeats", "rtt_count", "fragment_limit", "batch_rows", "timeout")
    )
    counts, warmups = counts_and_warmups(parser, args, sizes, counts, QUICK)
    if args.send_yield < 0:
        parser.error("--send-yield must not be negative")
    java_extra = {}
    for prop in args.java_prop:
        key, eq, value = prop.partition("=")
        if not eq or not key.strip():
            parser.error(f"--java-prop: KEY=VALUE, not {prop!r}")
        java_extra[key.strip().removeprefix("-D")] = value
    opts = Options.from_args(args, send_yield=args.send_yield, java_props=java_extra)
    props = " ".join(f"-D{k}={v}" for k, v in java_extra.items())
    info = process_info(
        setup_line(opts), args, sizes, warmups, {"java props": props} if props else None
    )

    plan = []  # per size: each window's cells, then pyzmq's (which has no window)
    for size, n, w in zip(sizes, counts, warmups, strict=True):
        plan += [(TputCell(m, size, n, win), w) for win in windows for m in modes if m != "z"]
        if "z" in modes:
            plan.append((TputCell("z", size, n), w))
    tput = throughput_cells(plan, TPUT_MODES, args.repeats, TPUT_RUNS, opts, aeron_noted=True)
    java_note = "two JVMs, embedded drivers"
    rtt = latency_cells(rtt_modes, RTT_MODES, args, RTT_RUNS, opts, java_note, aeron_noted=True)
    report = Report(
        TITLE,
        TABLE_TITLES,
        info,
        tput_table(
            tput,
            TPUT_MODES,
            "note / min..max msgs/s",
            lambda c: "; ".join(x for x in (c.note, c.spread) if x),
            windows=True,
        ),
        rtt_table(rtt, RTT_MODES),
        targets(tput, rtt),
        notes(args.quick),
    )
    report.print(args, argv, "bench/udp_processes.py")
    return 0


if __name__ == "__main__":
    run_main(main, interrupted_exit=True)
