"""The reference Aeron (Java 1.15.1) as a peer of the benchmarks: its samples' properties, their
output (rates, HdrHistogram percentiles)."""

from __future__ import annotations

import os
import queue
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from basics import PING_STREAM_ID, PONG_STREAM_ID, Skipped
from children import Child

from tests.support.reference_aeron import classpath, java_args

# -- the reference Aeron (Java) -------------------------------------------------------------


def java_available(java: str | None) -> None:
    """Skipped unless `java` (the aeron-java script; None: disabled) can run here."""
    if java is None:
        raise Skipped("disabled (--no-java)")
    if shutil.which("java") is None:
        raise Skipped("no java")
    if not os.access(java, os.X_OK):
        raise Skipped(f"no {java}")


def java_argv(java: str, dir: str, props: dict[str, object], cls: str) -> list[str]:
    """The command line of `cls` of the reference jar (got by the aeron-java script `java`) as a
    client of (or driver on) `dir`."""
    return java_args(cls, {"aeron.dir": dir, **props}, class_path=classpath(Path(java)))


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
