"""What the benchmark scripts share: failure, the machine header, command-line helpers, medians
and the text and markdown tables of the report.

The scripts run as `python bench/<script>.py`, which puts this directory first on sys.path, so
they import this module as `common`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
from collections.abc import Callable, Iterable
from typing import NoReturn

import numpy as np
import zmq

import aeronio


class BenchError(RuntimeError):
    """A run delivered the wrong messages, stalled or a process failed: no number to report."""


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


# -- the report ---------------------------------------------------------------------------------


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_info(with_load: bool = False) -> dict[str, str]:
    """The report's header: when, on what, with which versions (and the load average at the
    start, `with_load`)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    info = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical, {usable} usable",
    }
    if with_load:
        info["load average"] = f"{load_average()} (at start)"
    info.update(
        {
            "platform": platform.platform(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "numpy": np.__version__,
            "pyzmq": f"{zmq.__version__} (libzmq {zmq.zmq_version()})",
            "aeronio": aeronio.__version__,
        }
    )
    return info


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def span(rates: Iterable[float]) -> str:
    """`min..max` of the rates of the repeats, or "" with fewer than two."""
    rates = list(rates)
    if len(rates) < 2:
        return ""
    return f"{min(rates):,.0f}..{max(rates):,.0f}"


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def text_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned columns (those in `right` right-aligned) under a dashed rule."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def md_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    align = ["---:" if i in right else "---" for i in range(len(headers))]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    out.extend("| " + " | ".join(v.replace("|", "\\|") for v in r) + " |" for r in rows)
    return out


def write_markdown(
    args: argparse.Namespace,
    argv: list[str] | None,
    script: str,
    report: Callable[[str], str],
) -> None:
    """With --markdown or --out: the markdown report (made by `report` from the command line
    that ran `script`) printed, written to the --out file, or both."""
    if not (args.markdown or args.out):
        return
    command = " ".join(["python", script, *(argv or sys.argv[1:])])
    text = report(command)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"\nmarkdown written to {args.out}")
    if args.markdown:
        print()
        print(text, end="")


def run_main(main: Callable[[], int], interrupted_exit: bool = False) -> NoReturn:
    """Exit with main()'s status, or 1 after `BENCHMARK FAILED: ...` when a run went wrong; with
    `interrupted_exit`, 130 after `interrupted` on KeyboardInterrupt."""
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"BENCHMARK FAILED: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        if not interrupted_exit:
            raise
        print("interrupted", file=sys.stderr)
        sys.exit(130)
