"""What every benchmark script shares: failure, the streams, command-line value helpers and
the exit status of a run. Importing it puts the repository on sys.path (the scripts run as
`python bench/<script>.py`), for the helpers the benchmarks share with the tests
(tests/support: the one Child, the reference Aeron's launcher)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NoReturn

import numpy as np

REPOSITORY = str(Path(__file__).resolve().parents[1])
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

from tests.support.child import ChildError  # noqa: E402


class BenchError(RuntimeError):
    """A run delivered the wrong messages, stalled or a process failed: no number to report."""


class Stalled(BenchError):
    """A receiving loop ran out of time (a failure, unless the run accepts a partial result)."""


FAILURES = (BenchError, ChildError)  # a run that went wrong: a child did not answer, too


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


def run_main(main: Callable[[], int], interrupted_exit: bool = False) -> NoReturn:
    """Exit with main()'s status, or 1 after `BENCHMARK FAILED: ...` when a run went wrong; with
    `interrupted_exit`, 130 after `interrupted` on KeyboardInterrupt."""
    try:
        sys.exit(main())
    except FAILURES as e:
        print(f"BENCHMARK FAILED: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        if not interrupted_exit:
            raise
        print("interrupted", file=sys.stderr)
        sys.exit(130)


# the streams of every run, aeronio's and Aeron Java's alike: throughput, pings, pongs
STREAM_ID = 1001
PING_STREAM_ID = 1002
PONG_STREAM_ID = 1003
