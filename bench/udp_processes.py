#!/usr/bin/env python
"""UDP over loopback between two processes: aeronio vs pyzmq tcp:// vs the reference Aeron.

Every aeronio run starts two worker processes, each with its own embedded media driver
(`aeronio.MediaDriver.launch` on its event loop, its own directory under /dev/shm): a publisher
(or ping) on `aeron:udp?endpoint=127.0.0.1:<free port>` and a subscriber (or pong) on the same
channel. pyzmq runs PUSH/PULL and PAIR between two processes over tcp://127.0.0.1. The reference
Aeron (Java 1.15.1, via /work/shared/aeron-java/aeron-java) runs its own samples in the same
run, also as two processes each with an embedded driver: StreamingPublisher -> RateSubscriber,
and Ping/Pong - skipped with a reason, never failing the run, when Java is missing.

Throughput (payload MB/s, MB = 10**6 B) is timed in the receiving process from the end of the
warmup to the last message; every message carries a u64 sequence number in its first 8 bytes
that the receiver checks, and the count and the last message's length are checked. e2e runs
from the sender's first timed send to the receiver's last message (one CLOCK_MONOTONIC for all
processes). Each cell runs for every receiver window setting (--windows): `default` (each
side's defaults), or a size W: `rcv-wnd=W|so-rcvbuf=W|so-sndbuf=W` on the subscription,
`so-rcvbuf=W|so-sndbuf=W` on the publication, and for Java -Daeron.rcv.initial.window.length,
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
returns without yielding while there is space, and waits through back-pressure with the
client's idle strategy.

Every aeronio run is bounded by --timeout: a receiver that runs out of time reports what it
received, in order, as an INCOMPLETE row (its rate over what arrived) instead of hanging; a
wrong or out-of-order message fails the row (noted, the run goes on).

Round-trip latency (32 B by default, >= 100,000 round trips after a warmup), per round trip with
perf_counter_ns in the ping process; ping and pong each with its own embedded driver, the pings
on one UDP endpoint and the pongs on another; median, p99, p99.9 in microseconds:

  spin       ping/pong spin on try_offer and poll, yielding on every empty poll (busy-spin at
             the loop level: the driver runs between polls)
  default    ping: await pub.offer + await sub.receive(); pong: async for + await pub.offer;
             the default NotifyingIdleStrategy (yield ~50 times, then park until woken)
  yield-api  the same calls with YieldingIdleStrategy (never parks)
  zmq        pyzmq PAIR send/recv over tcp://127.0.0.1
  java       Aeron Java Ping/Pong (two JVMs, embedded drivers, its HdrHistogram)

    python bench/udp_processes.py --quick
    python bench/udp_processes.py --markdown --out udp_processes.md
    python bench/udp_processes.py --only a,z,j,spin,zmq,java --sizes 32 --windows 2m
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import signal
import socket
import time
from dataclasses import dataclass

import common
from common import (
    AERON_JAVA,
    RTT_HEADERS,
    RTT_RIGHT,
    BenchError,
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

from aeronio.errors import ChannelUriError
from aeronio.protocol.channel import parse_size

STREAM_ID = 1001
PING_STREAM_ID = 1002
PONG_STREAM_ID = 1003
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
    "default": "aeronio default idle: await offer/receive",
    "yield-api": "aeronio Yielding idle: await offer/receive",
    "zmq": "pyzmq PAIR tcp://",
    "java": "Aeron Java Ping/Pong",
}
AERON_TPUT = ("a", "b", "c")


@dataclass
class Options:
    fragment_limit: int
    batch_rows: int
    send_yield: int
    timeout: float
    java: str | None  # the aeron-java script, None when Java rows are disabled
    java_seconds: float
    java_props: dict[str, str]  # --java-prop: driver/sample properties for every JVM


# -- channels and windows -------------------------------------------------------------------


def window_bytes(window: str) -> int | None:
    """None for `default`, else the window's size in bytes (k/m/g suffixes, as in channels)."""
    return None if window == "default" else parse_size("window", window)


def udp_channels(port: int, window: str) -> tuple[str, str]:
    """(publication channel, subscription channel) on 127.0.0.1:port with the window setting."""
    base = f"aeron:udp?endpoint=127.0.0.1:{port}"
    if window == "default":
        return base, base
    buffers = f"|so-rcvbuf={window}|so-sndbuf={window}"
    return base + buffers, f"{base}|rcv-wnd={window}{buffers}"


def aeron_spec(scope: Scope, opts: Options, roles: tuple[str, str], **spec) -> dict:
    """What every aeronio worker of this benchmark has: an embedded driver per role, each on a
    fresh /dev/shm directory, the yield policy, a partial result when time runs out."""
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


# -- throughput runs ------------------------------------------------------------------------


def aeron_throughput(mode: str, size: int, count: int, warmup: int, window: str, opts: Options):
    """One run: subscriber, publisher processes (each with its own driver)."""
    with Scope(WORKER) as scope:
        pub_channel, sub_channel = udp_channels(common.free_port(), window)
        spec = common.run_spec(
            size,
            count,
            warmup,
            opts.timeout,
            **aeron_spec(
                scope,
                opts,
                ("aeron-sub", "aeron-pub"),
                mode=mode,
                channel=pub_channel,
                sub_channel=sub_channel,
                stream=STREAM_ID,
            ),
        )
        return common.throughput_run(
            scope, spec, ("aeronio subscriber", "aeron-sub"), ("aeronio publisher", "aeron-pub")
        )


def tcp_address() -> str:
    return f"tcp://127.0.0.1:{common.free_port(socket.SOCK_STREAM)}"


def zmq_throughput(size: int, count: int, warmup: int, opts: Options):
    with Scope(WORKER) as scope:
        spec = common.run_spec(size, count, warmup, opts.timeout, address=tcp_address())
        return common.throughput_run(
            scope, spec, ("pyzmq PULL", "zmq-pull"), ("pyzmq PUSH", "zmq-push")
        )


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


def java_throughput(size: int, window: str, opts: Options) -> tuple[list[float], str]:
    """RateSubscriber, then StreamingPublisher (each JVM with an embedded driver) for about
    --java-seconds of samples; the subscriber's per-second rates after dropping the first two
    (JIT warmup, and the first may include the connection)."""
    common.java_available(opts.java)
    with Scope(WORKER) as scope:
        props = {
            "aeron.sample.embeddedMediaDriver": "true",
            "aeron.sample.channel": f"aeron:udp?endpoint=127.0.0.1:{common.free_port()}",
            "aeron.sample.streamId": STREAM_ID,
            "aeron.sample.messageLength": size,
            **java_props(window, opts),
        }
        sub = scope.child(
            "Aeron Java RateSubscriber",
            common.java_argv(
                opts.java, scope.shm_dir("java-sub"), props, "io.aeron.samples.RateSubscriber"
            ),
        )
        # the first run may fetch the jar; the subscriber prints a line a second from its start
        started = common.read_until(sub, 120.0, lambda line: "totals" in line)
        if not any("totals" in line for line in started):
            raise Skipped(f"Aeron Java RateSubscriber did not start{sub.tail(3)}")
        pub = scope.child(
            "Aeron Java StreamingPublisher",
            common.java_argv(
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
                cpu0 = (common.proc_cpu_s(sub.pid), common.proc_cpu_s(pub.pid), time.monotonic())
        cpu1 = (common.proc_cpu_s(sub.pid), common.proc_cpu_s(pub.pid), time.monotonic())
        sub.stop(signal.SIGINT, 15.0)  # it registers SIGINT for an orderly shutdown
        pub.stop(signal.SIGINT, 15.0)
        rates = java_rates(samples)
        if not rates or max(rates) <= 0:
            raise Skipped(
                f"no messages reached Aeron Java RateSubscriber{sub.tail(3)}{pub.tail(3)}"
            )
        kept = rates[2:] if len(rates) >= 4 else rates
        note = f"{len(kept)} 1-s samples (of {len(rates)})"
        if cpu0 is not None:
            wall = cpu1[2] - cpu0[2]
            use = [
                None if a is None or b is None else b - a
                for a, b in zip(cpu0[:2], cpu1[:2], strict=True)
            ]
            progress(
                f"    cpu over {wall:.1f} s: RateSubscriber JVM {common.pct(use[0], wall)}, "
                f"StreamingPublisher JVM {common.pct(use[1], wall)} (of one core)"
            )
        return kept, note


# -- latency runs ---------------------------------------------------------------------------


def aeron_latency(mode: str, size: int, count: int, warmup: int, opts: Options) -> dict:
    ping_port, pong_port = common.free_ports(2)
    with Scope(WORKER) as scope:
        spec = common.run_spec(
            size,
            count,
            warmup,
            opts.timeout,
            **aeron_spec(
                scope,
                opts,
                ("aeron-ping", "aeron-pong"),
                mode=mode,
                ping_channel=f"aeron:udp?endpoint=127.0.0.1:{ping_port}",
                pong_channel=f"aeron:udp?endpoint=127.0.0.1:{pong_port}",
                ping_stream=PING_STREAM_ID,
                pong_stream=PONG_STREAM_ID,
            ),
        )
        return common.latency_run(scope, spec, "aeronio", "aeron")


def zmq_latency(size: int, count: int, warmup: int, opts: Options) -> dict:
    with Scope(WORKER) as scope:
        spec = common.run_spec(size, count, warmup, opts.timeout, address=tcp_address())
        return common.latency_run(scope, spec, "pyzmq", "zmq")


def java_latency(size: int, count: int, warmup: int, opts: Options) -> dict:
    """Pong, then Ping (each JVM with an embedded driver) over two UDP endpoints; Ping's
    HdrHistogram of `count` round trips after `warmup`."""
    common.java_available(opts.java)
    ping_port, pong_port = common.free_ports(2)
    with Scope(WORKER) as scope:
        props = {
            "aeron.sample.embeddedMediaDriver": "true",
            "aeron.sample.messageLength": size,
            "aeron.sample.ping.channel": f"aeron:udp?endpoint=127.0.0.1:{ping_port}",
            "aeron.sample.pong.channel": f"aeron:udp?endpoint=127.0.0.1:{pong_port}",
            "aeron.sample.ping.streamId": PING_STREAM_ID,
            "aeron.sample.pong.streamId": PONG_STREAM_ID,
            "aeron.sample.messages": count,
            "aeron.sample.warmup.messages": max(warmup, 1),
            "aeron.sample.warmup.iterations": 1,
            **opts.java_props,
        }
        pong = scope.child(
            "Aeron Java Pong",
            common.java_argv(opts.java, scope.shm_dir("java-pong"), props, "io.aeron.samples.Pong"),
        )
        started = common.read_until(pong, 120.0, lambda line: line.startswith("Publishing Pong"))
        if not started or not started[-1].startswith("Publishing Pong"):
            raise Skipped(f"Aeron Java Pong did not start{pong.tail(3)}")
        ping = scope.child(
            "Aeron Java Ping",
            common.java_argv(opts.java, scope.shm_dir("java-ping"), props, "io.aeron.samples.Ping"),
            stdin_text="n\n",  # its "Execute again? (y/n)" prompt
        )
        lines = common.read_until(
            ping, opts.timeout + 60.0, lambda line: line.startswith("#[Buckets")
        )
        ping.stop(signal.SIGINT, 15.0)
        pong.stop(signal.SIGINT, 15.0)
        if not any(line.startswith("#[Buckets") for line in lines):
            raise BenchError(f"no histogram from Aeron Java Ping{ping.tail(3)}")
        return common.parse_hdr(lines)


# =========================================================================================
# Report
# =========================================================================================


def tput_rows(cells: list[TputCell]) -> list[list[str]]:
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
        note = "; ".join(x for x in (c.note, c.spread) if x)
        rows.append(
            [
                TPUT_MODES[c.mode],
                c.window or "-",
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
    "window",
    "size B",
    "N",
    "msgs/s",
    "MB/s",
    "e2e msgs/s",
    "vs pyzmq",
    "vs Aeron",
    "note / min..max msgs/s",
]
TPUT_RIGHT = {2, 3, 4, 5, 6, 7, 8}


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def targets(tput: list[TputCell], rtt: list[RttCell]) -> list[str]:
    """Issue 4's targets, met or not, from what this run measured (incomplete rows count as
    not measured)."""

    def t(mode: str, window: str | None, size: int = 32) -> float | None:
        cell = next(
            (
                c
                for c in tput
                if c.mode == mode and c.size == size and (window is None or c.window == window)
            ),
            None,
        )
        if cell is None or "incomplete" in cell.note or "failed" in cell.note:
            return None
        return cell.rate

    def r(mode: str) -> float | None:
        cell = next((c for c in rtt if c.mode == mode), None)
        if cell is None or not cell.stats or "incomplete" in cell.note:
            return None
        return cell.stats.get("median")

    out = []
    a, z = t("a", "default"), t("z", None)
    ratio = a / z if a and z else None
    out.append(
        f"32 B aeronio (a) try_offer/poll >= 2x pyzmq tcp (default window): {fmt_x(ratio)} -> "
        f"{verdict(None if ratio is None else ratio >= 2)}"
    )
    for window in dict.fromkeys(c.window for c in tput if c.mode == "j"):
        j = t("j", window)
        best = [(m, t(m, window)) for m in AERON_TPUT]
        best = [(m, v / j) for m, v in best if v and j]
        text = ", ".join(f"({m}) {fmt_x(x)}" for m, x in best) or "n/a"
        ok = None if not best else max(x for _, x in best) >= 1
        out.append(f"32 B aeronio >= Aeron Java, window {window}: {text} -> {verdict(ok)}")
    spin = r("spin")
    out.append(
        f"busy-spin RTT median <= 30 us: {fmt(spin, '.2f')} us -> "
        f"{verdict(None if spin is None else spin <= 30)}"
    )
    default, zmq_rtt = r("default"), r("zmq")
    ok = None if default is None or zmq_rtt is None else default <= zmq_rtt
    out.append(
        f"default idle RTT median <= pyzmq tcp: {fmt(default, '.2f')} vs "
        f"{fmt(zmq_rtt, '.2f')} us -> {verdict(ok)}"
    )
    return out


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
    "driver (default DEDICATED threading: conductor, sender and receiver threads) on its own "
    "aeron.dir; throughput = median of RateSubscriber's 1-second rates, latency = Ping's "
    "HdrHistogram.",
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


def text_report(info, tput, rtt, repeats, warmups, quick: bool) -> str:
    out = [f"{k:>14}: {v}" for k, v in info.items()]
    out.append(f"{'repeats':>14}: {repeats} (throughput; median shown)")
    out.append(f"{'warmup':>14}: {warmups}")
    if tput:
        out += ["", "Throughput (UDP over loopback, two processes)", ""]
        out += common.text_table(TPUT_HEADERS, tput_rows(tput), TPUT_RIGHT)
    if rtt:
        out += ["", "Round-trip latency (ping-pong over UDP loopback)", ""]
        out += common.text_table(RTT_HEADERS, rtt_rows(rtt, RTT_MODES), RTT_RIGHT)
    out += ["", "Targets:"] + [f"  {x}" for x in targets(tput, rtt)]
    out += [""] + [f"* {x}" for x in notes(quick)]
    return "\n".join(out)


def markdown_report(info, tput, rtt, repeats, warmups, quick: bool, command: str) -> str:
    out = ["## UDP over loopback: aeronio vs pyzmq tcp vs Aeron (Java)", ""]
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
    out += [""] + [f"- {x}" for x in notes(quick)]
    return "\n".join(out) + "\n"


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
        "--windows",
        default="default,2m",
        help="receiver window settings: `default`, or a size (e.g. 2m) for the receiver window "
        "and both socket buffers",
    )
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
        default="spin,default,yield-api,zmq,java",
        help=f"latency paths, from {','.join(RTT_MODES)} (empty: none)",
    )
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
    parser.add_argument("--aeron-java", default=AERON_JAVA, help="the aeron-java script")
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
    parser.add_argument("--markdown", action="store_true", help="also print a markdown report")
    parser.add_argument("--out", metavar="FILE", help="write the markdown report to FILE")
    return parser


INT_ERRORS = ("{what}: integers, not {text!r}", "{what}: positive integers, not {text!r}")


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


def aeron_row(cell: TputCell, run) -> None:
    """One aeronio throughput run into `cell`: an incomplete run noted (its rate kept, apart), a
    failed one noted and the benchmark goes on."""
    with noted_row(cell):
        rates = run()
        if rates["incomplete"]:
            cell.note = f"INCOMPLETE: {rates['incomplete']}"
            if rates["rate"]:
                cell.rates.append(rates["rate"])
            return
        cell.rates.append(rates["rate"])
        cell.e2e_rates.append(rates["e2e"])


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
    windows = parse_windows(parser, args.windows)
    if args.only is not None:
        known = {**TPUT_MODES, **RTT_MODES}
        only = common.split_modes(parser, args.only, known, "--only")
        modes = [m for m in only if m in TPUT_MODES]
        rtt_modes = [m for m in only if m in RTT_MODES]
    else:
        modes = common.split_modes(parser, args.modes, TPUT_MODES, "--modes")
        rtt_modes = common.split_modes(parser, args.rtt_modes, RTT_MODES, "--rtt-modes")
    common.require_positive(
        parser, args, ("repeats", "rtt_count", "fragment_limit", "batch_rows", "timeout")
    )
    if args.rtt_warmup < 0 or (args.warmup is not None and args.warmup < 0):
        parser.error("warmups must not be negative")
    if args.send_yield < 0:
        parser.error("--send-yield must not be negative")
    java_extra = {}
    for prop in args.java_prop:
        key, eq, value = prop.partition("=")
        if not eq or not key.strip():
            parser.error(f"--java-prop: KEY=VALUE, not {prop!r}")
        java_extra[key.strip().removeprefix("-D")] = value
    if args.quick:
        counts = [20_000]
        args.repeats = 1
        args.rtt_count = 2_000
        args.rtt_warmup = 500
        args.java_seconds = 3.0
        args.timeout = 10.0
    counts = common.per_size_counts(counts, sizes)
    warmups = [args.warmup if args.warmup is not None else min(200_000, n // 5) for n in counts]
    opts = Options(
        fragment_limit=args.fragment_limit,
        batch_rows=args.batch_rows,
        send_yield=args.send_yield,
        timeout=args.timeout,
        java=None if args.no_java else args.aeron_java,
        java_seconds=args.java_seconds,
        java_props=java_extra,
    )
    info = common.machine_info(with_load=True)
    info["java"] = common.java_version()
    info["aeronio setup"] = setup_line(opts)
    if java_extra:
        info["java props"] = " ".join(f"-D{k}={v}" for k, v in java_extra.items())

    tput: list[TputCell] = []
    for size, n, w in zip(sizes, counts, warmups, strict=True):
        for window in windows:
            for mode in [m for m in modes if m != "z"]:
                cell = TputCell(mode, size, n, window)
                tput.append(cell)
                progress(f"{TPUT_MODES[mode]}, window {window}, {size} B, N={n:,} (warmup {w:,})")
                if mode == "j":
                    with noted_row(cell):
                        cell.rates, cell.note = java_throughput(size, window, opts)
                        progress(f"    {cell.rate:>14,.0f} msgs/s ({cell.note})")
                    continue
                for _ in range(args.repeats):
                    aeron_row(
                        cell,
                        lambda mode=mode, size=size, n=n, w=w, window=window: aeron_throughput(
                            mode, size, n, w, window, opts
                        ),
                    )
                    if cell.note:  # an incomplete or failed run: no repeats
                        break
        if "z" in modes:
            cell = TputCell("z", size, n)
            tput.append(cell)
            progress(f"{TPUT_MODES['z']}, {size} B, N={n:,} (warmup {w:,})")
            for _ in range(args.repeats):
                rates = zmq_throughput(size, n, w, opts)
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
                cell.note = "two JVMs, embedded drivers"
                if "raw" in cell.stats:
                    progress(f"    {cell.stats['raw']}")
                else:
                    progress(
                        f"    median {cell.stats['median']:.2f} us, p99 {cell.stats['p99']:.2f} us"
                    )
        else:
            with noted_row(cell):
                stats = aeron_latency(mode, args.rtt_size, args.rtt_count, args.rtt_warmup, opts)
                cell.stats = stats
                if stats.get("incomplete"):
                    cell.note = f"INCOMPLETE: {stats['incomplete']}"

    warm_text = (
        ", ".join(f"{w:,} msgs before {s} B runs" for s, w in zip(sizes, warmups, strict=True))
        + f"; {args.rtt_warmup:,} round trips"
    )
    print(text_report(info, tput, rtt, args.repeats, warm_text, args.quick))
    common.write_markdown(
        args,
        argv,
        "bench/udp_processes.py",
        lambda command: markdown_report(
            info, tput, rtt, args.repeats, warm_text, args.quick, command
        ),
    )
    return 0


if __name__ == "__main__":
    common.run_main(main, interrupted_exit=True)
