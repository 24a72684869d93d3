"""The command line of the cross-process benchmarks and the measuring of their cells."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from basics import check_counts, per_size_counts, sizes_and_counts
from children import progress, unwind_on_sigterm
from reports import INCOMPLETE, RttCell, TputCell, noted_row
from zmq_workers import worker_main

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
    """--markdown and --out (what write_markdown reads), --json (what Report.print writes)."""
    parser.add_argument("--markdown", action="store_true", help="also print a markdown report")
    parser.add_argument("--out", metavar="FILE", help="write the markdown report to FILE")
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="write the report's tables as JSON (bench/plots.py draws them)",
    )


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
    """Each (cell, warmup) of `plan` measured, a progress line first, interleaved: each of the
    `repeats` rounds runs every cell once, in the plan's order and then in reverse, so no
    peer always runs first or on a machine the others warmed. Aeron Java once (its first
    round): its run gives its per-second rates and a note, and a skipped or failed run is
    noted in the cell. An incomplete run is noted (its rate kept, and left out of the ratios)
    and ends the cell's repeats, and so does, with `aeron_noted`, a failed aeronio run (any
    other failed run fails the benchmark)."""
    planned = list(plan)
    cells = [cell for cell, _ in planned]
    for round_ in range(repeats):
        for cell, warmup in planned if round_ % 2 == 0 else planned[::-1]:
            kind = runs.kind(cell.mode)
            if cell.note or (kind == "java" and round_):
                continue  # noted (incomplete, failed, or Aeron Java's one run): done
            run = getattr(runs, kind)
            window = f", window {cell.window}" if cell.window else ""
            progress(
                f"round {round_ + 1}/{repeats}: {names[cell.mode]}{window}, {cell.size} B, "
                f"N={cell.count:,} (warmup {warmup:,})"
            )
            if kind == "java":
                with noted_row(cell):
                    cell.rates, cell.note = run(cell, warmup, opts)
                    progress(f"    {cell.rate:>14,.0f} msgs/s ({cell.note})")
                continue
            noted = aeron_noted and kind == "aeron"
            with noted_row(cell) if noted else contextlib.nullcontext():
                rates = run(cell, warmup, opts)
                if rates["incomplete"]:
                    cell.note = f"{INCOMPLETE}: {rates['incomplete']}"
                    if rates["rate"]:
                        cell.rates.append(rates["rate"])
                else:
                    cell.rates.append(rates["rate"])
                    cell.e2e_rates.append(rates["e2e"])
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
                cell.note = f"{INCOMPLETE}: {cell.stats['incomplete']}"
    return cells
