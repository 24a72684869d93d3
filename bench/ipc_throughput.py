#!/usr/bin/env python
"""IPC throughput of aeronio against pyzmq inproc://, measured in the same run.

Modes (publisher and subscriber in one process, payload bytes only in MB/s, MB = 10**6 B):

  a   try_offer + poll loops interleaved on one event loop (sleep(0) only when idle)
  a2  try_offer in a threading.Thread, poll loop on the event loop
  b   `await pub.offer(msg)` producer task + `async for message in sub` consumer
  bv  the same with `async for message in sub.messages(copy=False)` (views into the log)
  bb  the same with `async for batch in sub.batches()` (lists of messages)
  c   try_offer_batch(2-D uint8 records) + batch_poll(handler) with batch.records(dtype)
  d   pyzmq PUSH/PULL over inproc://: a thread sock.send(msg), the main thread sock.recv()
  d1  pyzmq PUSH/PULL over inproc:// in one thread: send --burst messages, receive them (as a)
  d2  (with --zmq-nocopy) d with copy=False on both sides

pyzmq runs at its best ordinary settings: bytes messages, default high-water marks, no receive
timeout. Each cell is the median of --repeats runs; every run checks that exactly N messages
(and the right bytes) arrived. Ratios are aeronio msgs/s over the fastest pyzmq mode of the run
at the same size.

    python bench/ipc_throughput.py --quick
    python bench/ipc_throughput.py --sizes 32,1024 --repeats 5 --markdown --out bench.md
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field

from basics import (
    check_counts,
    per_size_counts,
    require_positive,
    run_main,
    sizes_and_counts,
    split_modes,
)
from in_process_loops import AeronSetup, NotApplicable, aeronio_run, zmq_burst_run, zmq_run
from reports import fmt, machine_info, md_table, median_or_none, span, text_table, write_markdown

CHANNEL = "aeron:ipc"
STREAM_ID = 1001
LINK_DELAY_S = 0.05

MODES: dict[str, str] = {
    "a": "(a) try_offer+poll",
    "a2": "(a2) threads",
    "b": "(b) await offer/async for",
    "bv": "(bv) b, messages(copy=False)",
    "bb": "(bb) b, batches()",
    "c": "(c) offer_batch/batch_poll",
    "d": "(d) pyzmq inproc",
    "d1": "(d1) pyzmq inproc 1 thread",
    "d2": "(d2) pyzmq copy=False",
}
AERONIO_MODES = ("a", "a2", "b", "bv", "bb", "c")
ZMQ_MODES = ("d", "d1", "d2")


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
        return median_or_none(self.times)

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
        return span(self.count / t for t in self.times)


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
        default="a,a2,b,bv,bb,c,d,d1",
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
        "--burst",
        type=int,
        default=256,
        help="(a, d1) messages offered (and polled) per round",
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
    sizes, counts = sizes_and_counts(parser, args, INT_ERRORS)
    if any(s < 8 for s in sizes):
        parser.error("--sizes: every size must be at least 8 bytes (the records carry a u64 seq)")
    max_message = min(args.term_length // 8, 16 * 1024 * 1024)
    if any(s > max_message for s in sizes):
        parser.error(f"--sizes: max message length for this term length is {max_message}")
    check_counts(parser, counts, sizes)
    if args.quick:
        counts = [50_000]
        args.repeats = 1
    counts = per_size_counts(counts, sizes)
    modes = split_modes(parser, args.modes, MODES, "--modes", noun="mode(s) ")
    if args.zmq_nocopy and "d2" not in modes:
        modes.append("d2")
    if args.thread_backoff < 0:
        parser.error("--thread-backoff must not be negative")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    require_positive(parser, args, ("repeats", "burst", "fragment_limit", "batch_rows"))
    return sizes, counts, modes


def ratio(cell: Cell, peer: Cell | None) -> str:
    if cell.mode in ZMQ_MODES or peer is None:
        return ""
    if cell.msgs_per_s is None or peer.msgs_per_s is None:
        return "n/a"
    return f"{cell.msgs_per_s / peer.msgs_per_s:.2f}x"


def rows_of(cells: list[Cell]) -> list[list[str]]:
    peers = best_pyzmq(cells)
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


def best_pyzmq(cells: list[Cell]) -> dict[int, Cell]:
    """The fastest pyzmq cell of each size."""
    best: dict[int, Cell] = {}
    for cell in cells:
        if cell.mode in ZMQ_MODES and cell.msgs_per_s is not None:
            if cell.size not in best or cell.msgs_per_s > best[cell.size].msgs_per_s:
                best[cell.size] = cell
    return best


def targets(cells: list[Cell]) -> list[str]:
    """The async-speed issue's one-process targets, met or not, from this run."""
    out = []
    for size in sorted({c.size for c in cells}):
        rate = {c.mode: c.msgs_per_s for c in cells if c.size == size}
        for label, mode, peer, floor in (
            ("(b) >= 0.8x (a)", "b", "a", 0.8),
            ("(a) >= 2x pyzmq one thread (d1)", "a", "d1", 2.0),
        ):
            if rate.get(mode) and rate.get(peer):
                x = rate[mode] / rate[peer]
                out.append(f"{size} B {label}: {x:.2f}x -> {'met' if x >= floor else 'NOT met'}")
    return out


HEADERS = ["mode", "size B", "N", "msgs/s", "MB/s", "vs pyzmq", "min..max msgs/s"]
RIGHT = {1, 2, 3, 4, 5}


def text_report(info: dict[str, str], cells: list[Cell], repeats: int) -> str:
    out = [f"{k:>13}: {v}" for k, v in info.items()]
    out.append(f"{'repeats':>13}: {repeats} (median shown; MB = 10^6 payload bytes)")
    out.append("")
    out.extend(text_table(HEADERS, rows_of(cells), RIGHT))
    out.append("")
    out.append("vs pyzmq = aeronio msgs/s / the fastest pyzmq mode's msgs/s at the same size")
    out.extend(targets(cells))
    return "\n".join(out)


def markdown_report(info: dict[str, str], cells: list[Cell], repeats: int, argv: str) -> str:
    out = ["## IPC throughput: aeronio vs pyzmq inproc", ""]
    out.extend(f"- **{k}**: {v}" for k, v in info.items())
    out.append(f"- **repeats**: {repeats} (median shown; MB = 10^6 payload bytes)")
    out.append(f"- **command**: `{argv}`")
    out.append("")
    out.extend(md_table(HEADERS, rows_of(cells), RIGHT))
    out.append("")
    out.append(
        "`vs pyzmq` = aeronio msgs/s ÷ the fastest pyzmq mode's msgs/s at the same size "
        "(bytes messages, default high-water marks, no receive timeout)."
    )
    out.append("")
    out.extend(f"- {line}" for line in targets(cells))
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
    info = machine_info()
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
                    elif mode == "d1":
                        elapsed = zmq_burst_run(size, n, args.burst, timeout=args.timeout)
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
    write_markdown(
        args,
        argv,
        "bench/ipc_throughput.py",
        lambda command: markdown_report(info, cells, args.repeats, command),
    )
    return 0


if __name__ == "__main__":
    run_main(main)
