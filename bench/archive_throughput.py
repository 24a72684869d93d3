#!/usr/bin/env python
"""Archive recording and replay throughput: aeronio's archive beside the reference Aeron's
(Java 1.15.1) EmbeddedRecordingThroughput and EmbeddedReplayThroughput samples, in one run.

aeronio, in one process on one event loop (as the Java samples are embedded: driver, archive
and client in one JVM): an embedded driver (`aeronio.connect()`), `archive.Archive.launch` on it
(IPC control and events) and an `archive.connect` client. Each run:

  record  start_recording(aeron:ipc?term-length=T, stream, LOCAL); an exclusive publication
          on it; N messages of S bytes (a u64 sequence number first) through
          `await publication.offer_batch(2-D uint8 records)`; timed from the first offer until
          the recording's rec-pos counter reaches the publication's position (the sample's
          timing: its clock starts once the publication is connected, stops at rec-pos).
  replay  `client.replay(recording, 0, length, "aeron:ipc", 101)` and `batch_poll` with
          `batch.records(dtype)` (numpy views over the term; every batch's sequence numbers
          checked) until all N arrived; timed from the replay request to the last message,
          "inclusive of replay request and connection setup" as the sample times it.

Aeron Java: the samples with the same message length and count, on aeronio's recorded channel
(aeron:ipc?term-length=T; --java-channel sample for theirs, UDP recorded through a spy: no
difference that outlasts the run-to-run spread here), each JVM with a fresh -Daeron.dir under
/dev/shm and -Daeron.archive.dir in the temp dir; their printed msg/sec are the figures. The
recording sample runs once per JVM, one JVM after each aeronio run (so both record into fresh
directories that go at the end of the run: iterated in one JVM, its later recordings pile up,
and ran up to 10x slower than its first here); the replay sample answers its "Execute again?"
prompt with y, one line at a time, for --repeats + 1 replays of its recording in one JVM, the
first dropped (JIT warm-up).

Before every timed run or iteration (and before each aeronio replay) the dirty page cache is
written out (`os.sync()`, untimed; --no-sync to skip it), so that none starts with the one
before still being written back. Recording is bound by writes into the page cache (pwrite into
fresh pages), and on this VM that cost moves by up to 8x from run to run for both peers, with
or without the sync, on ext4 as on tmpfs: compare medians, and the min..max.

    python bench/archive_throughput.py --quick
    python bench/archive_throughput.py --markdown --out archive.md
    python bench/archive_throughput.py --sizes 32 --repeats 3 --profile 25
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import queue
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
from basics import (
    FAILURES,
    STREAM_ID,
    BenchError,
    Skipped,
    check,
    record_dtype,
    require_positive,
    run_main,
    sizes_and_counts,
    split_modes,
)
from children import Scope, progress, unwind_on_sigterm
from command_line import add_report_arguments
from java_peer import java_argv, java_available
from reports import (
    Report,
    fmt,
    fmt_x,
    machine_info,
    median_or_none,
    span,
    verdict,
)

import aeronio
from aeronio import archive
from tests.support.reference_aeron import java_version, runner

WORKER = os.path.abspath(__file__)
REPLAY_CHANNEL = "aeron:ipc"
REPLAY_STREAM_ID = 101  # the sample's
# The archive's channels on its own driver (archive.LOCAL_ARCHIVE, archive.LOCAL): IPC control
# (streams 10 and 11), responses (21) and events (30). The recorded stream must be none of
# these: the archive would read every message as a request.
DEFAULT_TERM = 16 * 1024 * 1024  # the samples' channel (UDP) term: aeron.term.buffer.length
SAMPLE_CHANNEL = "aeron:udp?endpoint=localhost:40123"  # the samples' default channel

SAMPLES = {
    "record": "io.aeron.samples.archive.EmbeddedRecordingThroughput",
    "replay": "io.aeron.samples.archive.EmbeddedReplayThroughput",
}
JAVA_RESULT = re.compile(r"(Recorded|Replayed) ([\d.]+) MB @ ([\d.]+) MB/s - ([\d,]+) msg/sec")
CASES = {"record": "recording", "replay": "replay"}
PATHS = {
    ("record", "aeronio"): "aeronio offer_batch -> Archive",
    ("record", "java"): "Aeron Java EmbeddedRecordingThroughput",
    ("replay", "aeronio"): "aeronio Archive replay -> batch_poll",
    ("replay", "java"): "Aeron Java EmbeddedReplayThroughput",
}


@dataclass
class Options:
    term_length: int
    segment_length: int
    batch_rows: int
    fragment_limit: int
    timeout: float
    sync: bool
    java: str | None  # the aeron-java script, None with --no-java
    java_channel: str | None  # None: the samples' own default channel
    stream: int = STREAM_ID  # aeronio's recorded stream


@dataclass
class Cell:
    case: str  # record, replay
    peer: str  # aeronio, java
    size: int
    count: int
    rates: list[float] = field(default_factory=list)  # msgs/s of each counted run
    setup_s: list[float] = field(default_factory=list)  # aeronio replay: request + connect
    data_rates: list[float] = field(default_factory=list)  # aeronio replay without the setup
    cpu_s: list[float] = field(default_factory=list)  # aeronio: the process's CPU (all threads)
    note: str = ""

    @property
    def rate(self) -> float | None:
        return median_or_none(self.rates)

    @property
    def mb(self) -> float | None:
        return None if self.rate is None else self.rate * self.size / 1e6


def sync_page_cache(opts: Options) -> None:
    """Write out the dirty page cache (untimed), so that no run pays for the one before."""
    if opts.sync:
        os.sync()


# =========================================================================================
# aeronio: driver, archive and client on one event loop
# =========================================================================================


def rec_pos_counter(aeron: aeronio.Aeron, session_id: int) -> tuple[int, int] | None:
    """(counter id, recording id) of the rec-pos counter of the recording of `session_id` (the
    reference's RecordingPos.findCounterIdBySession), or None while there is none."""
    for info in aeron.counters.for_each():
        if info.label.startswith("rec-pos: "):
            parts = info.label.split()
            if int(parts[2]) == session_id:
                return info.id, int(parts[1])
    return None


async def record(aeron, client, size: int, n: int, opts: Options) -> tuple[float, int, int]:
    """Record `n` messages of `size` bytes: (seconds, recording id, end position)."""
    channel = f"aeron:ipc?term-length={opts.term_length}"
    await client.start_recording(channel, opts.stream, archive.SourceLocation.LOCAL)
    publication = await aeron.add_exclusive_publication(channel, opts.stream)
    try:
        check(size <= publication.max_payload_length, f"{size} B > max payload length")
        while not publication.is_connected:
            await asyncio.sleep(0.001)
        rows = min(opts.batch_rows, n)
        records = np.full((rows, size), 0xA5, dtype=np.uint8)
        seq = records[:, :8].view("<u8").reshape(rows)
        ramp = np.arange(rows, dtype=np.uint64)
        offer_batch = publication.offer_batch
        started = time.perf_counter()
        sent = 0
        while sent < n:
            k = min(rows, n - sent)
            seq[:k] = ramp[:k] + sent
            await offer_batch(records[:k] if k < rows else records)
            sent += k
        end = publication.position
        while (found := rec_pos_counter(aeron, publication.session_id)) is None:
            await asyncio.sleep(0)
        counter_id, recording_id = found
        get = aeron.counters.get_counter_value
        while get(counter_id) < end:
            await asyncio.sleep(0)
        elapsed = time.perf_counter() - started
    finally:
        await publication.close()
    await client.stop_recording(channel, opts.stream)
    return elapsed, recording_id, end


async def replay(client, recording_id: int, length: int, size: int, n: int, opts: Options):
    """Replay the recording, checking every message's sequence number: (seconds from the
    request to the last message, seconds the request and connection took)."""
    dtype = record_dtype(size)
    count = 0
    seq_sum = 0
    out_of_order = ""

    def on_batch(batch) -> None:
        nonlocal count, seq_sum, out_of_order
        seqs = batch.records(dtype)["seq"]
        k = len(seqs)
        if not out_of_order and (seqs[0] != count or seqs[-1] != count + k - 1):
            out_of_order = f"batch of {k} from seq {seqs[0]} at message {count}"
        seq_sum += int(seqs.sum())
        count += k

    started = time.perf_counter()
    subscription = await client.replay(recording_id, 0, length, REPLAY_CHANNEL, REPLAY_STREAM_ID)
    try:
        batch_poll, limit = subscription.batch_poll, opts.fragment_limit
        while batch_poll(on_batch, limit) == 0:  # the replay's image, its first block
            await asyncio.sleep(0)
        first = time.perf_counter()
        while count < n:
            if batch_poll(on_batch, limit) == 0:
                await asyncio.sleep(0)  # the archive and the driver run here
        elapsed = time.perf_counter() - started
    finally:
        await subscription.close()
    check(not out_of_order, f"replay out of order: {out_of_order}")
    check(count == n, f"replayed {count} messages, expected {n}")
    check(seq_sum == n * (n - 1) // 2, "replayed sequence numbers do not add up")
    return elapsed, first - started


async def aeronio_run(size: int, n: int, opts: Options) -> dict[str, float]:
    """One run on a fresh embedded driver and archive directory: record, then replay."""
    archive_dir = tempfile.mkdtemp(prefix="aeronio-bench-archive-")
    try:
        async with aeronio.connect(term_buffer_sparse_file=False) as aeron:
            async with archive.Archive.launch(
                aeron,
                archive_dir=archive_dir,
                segment_file_length=opts.segment_length,
                **archive.LOCAL_ARCHIVE,
            ):
                async with archive.connect(aeron, **archive.LOCAL) as client:
                    cpu = time.process_time()
                    record_s, recording_id, end = await record(aeron, client, size, n, opts)
                    record_cpu = time.process_time() - cpu
                    sync_page_cache(opts)
                    cpu = time.process_time()
                    replay_s, setup_s = await replay(client, recording_id, end, size, n, opts)
                    replay_cpu = time.process_time() - cpu
    finally:
        shutil.rmtree(archive_dir, ignore_errors=True)
    return {
        "record": n / record_s,
        "replay": n / replay_s,
        "setup": setup_s,
        "replay_s": replay_s,
        "record_cpu": record_cpu,
        "replay_cpu": replay_cpu,
    }


def run_aeronio(size: int, n: int, opts: Options) -> dict[str, float]:
    sync_page_cache(opts)

    async def bounded():
        try:
            return await asyncio.wait_for(aeronio_run(size, n, opts), opts.timeout)
        except TimeoutError:
            raise BenchError(f"aeronio run did not finish within {opts.timeout} s") from None

    return asyncio.run(bounded())


def profile_aeronio(size: int, n: int, opts: Options, top: int) -> None:
    """One more run (not counted) under cProfile: the `top` functions by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run_aeronio(size, n, opts)
    finally:
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    progress(f"  cProfile of one aeronio run, {size} B, N={n:,} (record + replay):")
    progress(out.getvalue().rstrip())


# =========================================================================================
# Aeron Java: the samples, a JVM per call
# =========================================================================================


def java_rates(case: str, size: int, n: int, iterations: int, opts: Options) -> list[float]:
    """The msg/sec the sample prints in each of `iterations` runs in one JVM."""
    java_available(opts.java)
    with Scope(WORKER) as scope:
        props: dict[str, object] = {
            "aeron.archive.dir": scope.temp_dir("aeronio-bench-java-archive-"),
            "aeron.sample.messageLength": size,
            "aeron.sample.messages": n,
        }
        if opts.java_channel:
            props["aeron.sample.channel"] = opts.java_channel
        argv = java_argv(opts.java, scope.shm_dir("java"), props, SAMPLES[case])
        sync_page_cache(opts)
        java = scope.child("Aeron Java", argv)
        rates: list[float] = []
        deadline = time.monotonic() + 60.0 + iterations * opts.timeout  # the first may fetch
        while len(rates) < iterations:
            try:
                line = java.next_line(deadline - time.monotonic())
            except queue.Empty:
                raise BenchError(f"Aeron Java {case}: no result in time{java.tail(3)}") from None
            if line is None:
                raise Skipped(f"Aeron Java {case} ended (status {java.proc.poll()}){java.tail(3)}")
            m = JAVA_RESULT.search(line)
            if m is None:
                continue
            rates.append(float(m.group(4).replace(",", "")))
            progress(f"    Java {case} {len(rates)}/{iterations}: {rates[-1]:>12,.0f} msgs/s")
            if len(rates) < iterations:
                sync_page_cache(opts)
            java.send("y" if len(rates) < iterations else "n")  # one line per prompt
        java.release()
        with contextlib.suppress(FAILURES):
            java.wait(60.0)  # it closes and deletes its directories
        if java.proc.poll() is None:
            java.stop(signal.SIGINT, 15.0)
        return rates


# =========================================================================================
# Report
# =========================================================================================


def note_of(cell: Cell) -> str:
    if cell.note:
        return cell.note
    parts = [span(cell.rates)] if len(cell.rates) > 1 else []
    if cell.cpu_s:
        parts.append(f"CPU {1e3 * median_or_none(cell.cpu_s):.0f} ms")
    if cell.setup_s:
        setup_ms = 1e3 * median_or_none(cell.setup_s)
        data = median_or_none(cell.data_rates)
        parts.append(f"request+connect {setup_ms:.0f} ms, then {data:,.0f} msgs/s")
    if cell.peer == "java" and cell.rates:
        k, s = len(cell.rates), "s" if len(cell.rates) > 1 else ""
        parts.append(
            f"{k} JVM{s}, one run each"
            if cell.case == "record"
            else f"{k} iteration{s} after a warm-up, one JVM"
        )
    return "; ".join(p for p in parts if p)


HEADERS = ["case", "path", "size B", "N", "msgs/s", "MB/s", "vs Aeron", "min..max msgs/s / note"]
RIGHT = {2, 3, 4, 5, 6}


def table(cells: list[Cell]):
    java = {(c.case, c.size): c.rate for c in cells if c.peer == "java"}
    rows = []
    for c in cells:
        ratio = ""
        if c.peer == "aeronio" and c.rate and java.get((c.case, c.size)):
            ratio = fmt_x(c.rate / java[(c.case, c.size)])
        rows.append(
            [
                CASES[c.case],
                PATHS[(c.case, c.peer)],
                str(c.size),
                f"{c.count:,}",
                fmt(c.rate, ",.0f"),
                fmt(c.mb, ",.1f"),
                ratio,
                note_of(c),
            ]
        )
    return HEADERS, rows, RIGHT


def targets(cells: list[Cell]) -> list[str]:
    """At least the reference's rate in each case and size."""
    out = []
    for c in cells:
        if c.peer != "aeronio":
            continue
        peer = next(
            (j for j in cells if j.peer == "java" and (j.case, j.size) == (c.case, c.size)), None
        )
        ratio = c.rate / peer.rate if peer is not None and c.rate and peer.rate else None
        ok = None if ratio is None else ratio >= 1
        out.append(f"{c.size} B {CASES[c.case]} >= Aeron Java: {fmt_x(ratio)} -> {verdict(ok)}")
    return out


NOTES = [
    "msgs/s: the median of the runs (aeronio, Java recording: a JVM each) or of the "
    "iterations after the first (Java replay, one JVM); MB = 10^6 payload bytes (Java prints "
    "MiB of payload + headers; its msg/sec is used here). vs Aeron: aeronio msgs/s / Aeron "
    "Java msgs/s of the same case and size.",
    "aeronio: one process, one event loop: embedded driver, archive (its conductor a task, "
    "BackoffIdleStrategy when idle) and the publisher or subscriber all share one thread; a "
    "fresh driver and archive directory per run, recording then replay. The Java samples run "
    "driver, archive and sample on their own threads (ArchivingMediaDriver, DEDICATED).",
    "aeronio's CPU: the process's CPU time (all threads: the event loop's and the recorder's) "
    "over each timed phase, median; it grows with the machine's load too (caches, scheduling).",
    "recording: from the first offer to rec-pos = the publication's position (the sample: from "
    "the publication connected to rec-pos); replay: from the replay request to the last message, "
    "inclusive of the request and connection setup as the sample's (aeronio's share of it, and "
    "its rate after it, in the note).",
    "Writes go to the page cache of the archive directory's file system (the temp dir, ext4 "
    "here, for both); the dirty page cache is written out before every timed run, untimed. "
    "Recording rates move by several times between runs on this VM for both peers (min..max).",
]


@contextlib.contextmanager
def noted(cell: Cell):
    """A Java row that cannot run or fails is noted in its cell; the run goes on."""
    try:
        yield
    except Skipped as e:
        cell.note = f"skipped: {e}"
        progress(f"    {cell.note}")
    except FAILURES as e:
        cell.note = f"failed: {e}".splitlines()[0]
        progress(f"    {e}")


def measure_size(size: int, n: int, peers: list[str], repeats: int, opts: Options) -> list[Cell]:
    """The four cells of one size. Each repeat: an aeronio run (record, then replay), then a
    fresh JVM of the recording sample (one run each, as aeronio's, so both write into fresh
    directories the run deletes); then the replay sample, iterated in one JVM."""
    record_a, replay_a = Cell("record", "aeronio", size, n), Cell("replay", "aeronio", size, n)
    record_j, replay_j = Cell("record", "java", size, n), Cell("replay", "java", size, n)
    progress(f"{size} B, N={n:,}: {repeats} x (aeronio record + replay, Java recording sample)")
    for i in range(repeats):
        if "aeronio" in peers:
            r = run_aeronio(size, n, opts)
            record_a.rates.append(r["record"])
            record_a.cpu_s.append(r["record_cpu"])
            replay_a.rates.append(r["replay"])
            replay_a.cpu_s.append(r["replay_cpu"])
            replay_a.setup_s.append(r["setup"])
            replay_a.data_rates.append(n / (r["replay_s"] - r["setup"]))
            progress(
                f"    run {i + 1}/{repeats}: aeronio record {r['record']:>12,.0f} msgs/s, "
                f"replay {r['replay']:>12,.0f} msgs/s (request+connect {r['setup'] * 1e3:.0f} ms), "
                f"CPU {r['record_cpu'] * 1e3:.0f} + {r['replay_cpu'] * 1e3:.0f} ms, "
                f"load {os.getloadavg()[0]:.1f}"
            )
        if "java" in peers and not record_j.note:
            with noted(record_j):
                record_j.rates += java_rates("record", size, n, 1, opts)
    if "java" in peers:
        progress(f"    {PATHS[('replay', 'java')]}: {repeats} iterations after a warm-up")
        with noted(replay_j):
            replay_j.rates = java_rates("replay", size, n, repeats + 1, opts)[1:]
    return [c for c in (record_a, record_j, replay_a, replay_j) if c.peer in peers]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Archive recording and replay throughput: aeronio's archive vs the reference "
        "Aeron's EmbeddedRecordingThroughput and EmbeddedReplayThroughput, in one run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--sizes", default="32,1024", help="message lengths (>= 8)")
    parser.add_argument(
        "--count",
        default=None,
        help="messages per run: one number, or one per size "
        "(default 10,000,000 (the samples' default) for sizes <= 64 B, else 1,000,000)",
    )
    parser.add_argument(
        "--repeats",
        "--runs",
        type=int,
        default=5,
        help="runs per cell (Java recording: a JVM each; Java replay: iterations after a warm-up)",
    )
    parser.add_argument(
        "--peers", default="aeronio,java", help="from aeronio,java (--no-java: aeronio only)"
    )
    parser.add_argument(
        "--term-length", type=int, default=DEFAULT_TERM, help="aeronio's recorded IPC term"
    )
    parser.add_argument(
        "--segment-length",
        type=int,
        default=128 * 1024 * 1024,
        help="aeronio's segment file length (the reference's default)",
    )
    parser.add_argument(
        "--stream",
        type=int,
        default=STREAM_ID,
        help="aeronio's recorded stream id (10 or 11: one of the archive's IPC control streams, "
        "which then reads every recorded message as a request)",
    )
    parser.add_argument("--batch-rows", type=int, default=1024, help="records per offer_batch")
    parser.add_argument("--fragment-limit", type=int, default=4096, help="replay batch_poll limit")
    parser.add_argument("--no-sync", action="store_true", help="no os.sync() before each run")
    parser.add_argument(
        "--java-channel",
        default="ipc",
        help="-Daeron.sample.channel of the Java samples: ipc (aeronio's recorded channel, "
        "aeron:ipc?term-length=--term-length), sample (theirs: "
        f"{SAMPLE_CHANNEL}, recorded through a spy), or a channel",
    )
    parser.add_argument("--aeron-java", default=str(runner()), help="the aeron-java script")
    parser.add_argument("--no-java", action="store_true", help="skip the Aeron Java rows")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run fails")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="TOP",
        help="after each size's runs, one more aeronio run under cProfile: its TOP functions",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: N=200,000 (1 KiB: 50,000), 1 repeat"
    )
    add_report_arguments(parser)
    return parser


INT_ERRORS = ("{what}: integers, not {text!r}", "{what}: positive integers, not {text!r}")


def counts_of(parser, args) -> tuple[list[int], list[int]]:
    sizes, counts = sizes_and_counts(parser, args, INT_ERRORS)
    if any(s < 8 for s in sizes):
        parser.error("sizes must be at least 8 bytes (every message carries a u64 sequence)")
    if counts is not None and len(counts) not in (1, len(sizes)):
        parser.error("--count: give one number, or one per size")
    if args.quick:
        args.repeats = 1
        return sizes, [200_000 if s <= 64 else 50_000 for s in sizes]
    if counts is None:
        return sizes, [10_000_000 if s <= 64 else 1_000_000 for s in sizes]
    return sizes, counts * len(sizes) if len(counts) == 1 else counts


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    unwind_on_sigterm()
    sizes, counts = counts_of(parser, args)
    require_positive(parser, args, ("repeats", "batch_rows", "fragment_limit", "timeout"))
    peers = split_modes(parser, args.peers, {"aeronio": "", "java": ""}, "--peers")
    if args.no_java and "java" in peers:
        peers.remove("java")
    term = args.term_length
    if term < 65536 or term & (term - 1) or args.segment_length < term:
        parser.error("--term-length: a power of two >= 64 KiB, at most --segment-length")
    opts = Options(
        term_length=term,
        segment_length=args.segment_length,
        batch_rows=args.batch_rows,
        fragment_limit=args.fragment_limit,
        timeout=args.timeout,
        sync=not args.no_sync,
        java=args.aeron_java,
        stream=args.stream,
        java_channel={"ipc": f"aeron:ipc?term-length={term}", "sample": None}.get(
            args.java_channel, args.java_channel
        ),
    )
    info = machine_info(with_load=True)
    info["java"] = java_version()
    info["aeronio setup"] = (
        f"one process, one event loop: aeronio.connect() (embedded driver, defaults: allocated "
        f"logs, MAP_POPULATE), Archive.launch (segments {opts.segment_length:,} B, no sync, "
        f"IPC control and events, archive dir in {tempfile.gettempdir()}), archive.connect "
        f"(IPC); recorded aeron:ipc?term-length={term} stream {opts.stream}, exclusive "
        f"publication, offer_batch of {opts.batch_rows} records; replay to aeron:ipc stream "
        f"{REPLAY_STREAM_ID}, batch_poll limit {opts.fragment_limit} + batch.records(dtype)"
    )
    channel = (
        f" but for the channel: {opts.java_channel}"
        if opts.java_channel
        else f", their channel {SAMPLE_CHANNEL} (16 MiB terms, recorded by a spy)"
    )
    info["Aeron Java setup"] = (
        "the samples' defaults (ArchivingMediaDriver, DEDICATED threads, spies simulate "
        "connection, 128 MiB segments, stream 10, replay to aeron:ipc stream 101 with fragment "
        f"limit 10){channel}; aeron.dir in /dev/shm, aeron.archive.dir in the temp dir; recording: "
        "one JVM per run; replay: one JVM, --repeats + 1 iterations, the first dropped (JIT "
        "warm-up)"
    )
    info["repeats"] = f"{args.repeats} (median shown)"
    info["page cache"] = "written out (os.sync) before every timed run" if opts.sync else "as is"

    cells: list[Cell] = []
    for size, n in zip(sizes, counts, strict=True):
        cells += measure_size(size, n, peers, args.repeats, opts)
        if args.profile and "aeronio" in peers:
            profile_aeronio(size, n, opts, args.profile)
    report = Report(
        "Archive recording and replay: aeronio vs Aeron (Java)",
        ("Archive throughput", ""),
        info,
        table(cells),
        None,
        targets(cells) if "java" in peers and "aeronio" in peers else [],
        NOTES,
    )
    report.print(args, argv, "bench/archive_throughput.py")
    return 0


if __name__ == "__main__":
    run_main(main, interrupted_exit=True)
