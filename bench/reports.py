"""The report of a benchmark: the machine header, the cells and rows of its throughput and
latency tables (text and markdown), medians, ratios and targets."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import zmq
from basics import FAILURES, Skipped
from children import progress

import aeronio
from tests.support import reference_aeron

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


# -- cells and rows of the report -----------------------------------------------------------


@dataclass
class TputCell:
    mode: str
    size: int
    count: int
    window: str = ""  # the receiver window setting (UDP)
    rates: list[float] = field(default_factory=list)
    e2e_rates: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def rate(self) -> float | None:
        return median_or_none(self.rates)

    @property
    def e2e(self) -> float | None:
        return median_or_none(self.e2e_rates)

    @property
    def mb(self) -> float | None:
        r = self.rate
        return None if r is None else r * self.size / 1e6

    @property
    def spread(self) -> str:
        return span(self.rates)


@dataclass
class RttCell:
    mode: str
    size: int
    count: int
    stats: dict | None = None
    note: str = ""


def fmt_x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


@contextlib.contextmanager
def noted_row(cell: TputCell | RttCell):
    """A row that may be skipped or fail without failing the run: noted in the cell (and on
    stderr) and the run goes on."""
    try:
        yield
    except Skipped as e:
        cell.note = f"skipped: {e}"
        progress(f"    {cell.note}")
    except FAILURES as e:
        cell.note = f"failed: {e}".splitlines()[0]
        progress(f"    {e}")


def rtt_rows(cells: list[RttCell], names: dict[str, str], peer: str = "zmq") -> list[list[str]]:
    """The latency table's rows (`names`: each mode's path); vs pyzmq = the `peer` mode's median
    over this one's."""
    zmq_median = {
        c.size: c.stats["median"] for c in cells if c.mode == peer and c.stats and c.stats.get("n")
    }
    rows = []
    for c in cells:
        s = c.stats or {}
        if "raw" in s:
            rows.append([names[c.mode], str(c.size), f"{c.count:,}"] + [""] * 6 + [s["raw"]])
            continue
        ratio = ""
        if c.mode != peer and s.get("median") and zmq_median.get(c.size):
            ratio = f"{zmq_median[c.size] / s['median']:.2f}x"
        rows.append(
            [
                names[c.mode],
                str(c.size),
                f"{c.count:,}" if s.get("n") is None else f"{s['n']:,}",
                fmt(s.get("median"), ",.2f"),
                fmt(s.get("p99"), ",.2f"),
                fmt(s.get("p999"), ",.2f"),
                fmt(s.get("mean"), ",.2f"),
                fmt(s.get("max"), ",.0f"),
                ratio,
                c.note,
            ]
        )
    return rows


RTT_HEADERS = [
    "path",
    "size B",
    "round trips",
    "median us",
    "p99 us",
    "p99.9 us",
    "mean us",
    "max us",
    "vs pyzmq",
    "note",
]
RTT_RIGHT = {1, 2, 3, 4, 5, 6, 7, 8}


Table = tuple[list[str], list[list[str]], set[int]]  # headers, rows, right-aligned columns


def rtt_table(cells: list[RttCell], names: dict[str, str]) -> Table | None:
    """The latency table (`names`: each mode's path), None when nothing was measured."""
    return (RTT_HEADERS, rtt_rows(cells, names), RTT_RIGHT) if cells else None


AERON_TPUT = ("a", "b", "c")  # the aeronio throughput modes (z: pyzmq, j: Aeron Java)
INCOMPLETE = "INCOMPLETE"  # a cell's note when a run lost messages or stalled


def tput_table(
    cells: list[TputCell],
    names: dict[str, str],
    note_header: str,
    note: Callable[[TputCell], str],
    windows: bool = False,
) -> Table | None:
    """The throughput table (`names`: each mode's path; with `windows`, a window column after
    it; `note(cell)` under `note_header` last), None when nothing was measured. vs pyzmq: an
    aeronio mode's rate over pyzmq's of the same size; vs Aeron: over Aeron Java's of the same
    size and window. An incomplete run's rate is shown, never in a ratio."""
    if not cells:
        return None
    whole = [c for c in cells if not c.note.startswith(INCOMPLETE)]
    zmq_rate = {c.size: c.rate for c in whole if c.mode == "z"}
    java_rate = {(c.size, c.window): c.rate for c in whole if c.mode == "j"}
    rows = []
    for c in cells:
        vs_zmq = vs_java = ""
        if c.mode in AERON_TPUT and c.rate and c in whole:
            if zmq_rate.get(c.size):
                vs_zmq = fmt_x(c.rate / zmq_rate[c.size])
            if java_rate.get((c.size, c.window)):
                vs_java = fmt_x(c.rate / java_rate[(c.size, c.window)])
        rows.append(
            [
                names[c.mode],
                *([c.window or "-"] if windows else []),
                str(c.size),
                "-" if c.mode == "j" else f"{c.count:,}",
                fmt(c.rate, ",.0f"),
                fmt(c.mb, ",.1f"),
                "-" if c.mode == "j" else fmt(c.e2e, ",.0f"),
                vs_zmq,
                vs_java,
                note(c),
            ]
        )
    headers = ["path", *(["window"] if windows else []), "size B", "N", "msgs/s", "MB/s"]
    headers += ["e2e msgs/s", "vs pyzmq", "vs Aeron", note_header]
    return headers, rows, set(range(2 if windows else 1, len(headers) - 1))


# -- targets --------------------------------------------------------------------------------


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def ratio_target(what: str, rate: float | None, base: float | None, at_least: float) -> str:
    """`what: 1.23x -> met` when rate / base is at least `at_least` (n/a without both)."""
    ratio = rate / base if rate and base else None
    return f"{what}: {fmt_x(ratio)} -> {verdict(None if ratio is None else ratio >= at_least)}"


def counted(cell: TputCell | RttCell | None) -> bool:
    """Whether a cell's figures count for the targets: measured, not failed or incomplete."""
    return cell is not None and not cell.note.startswith(("failed", "INCOMPLETE"))


def tput_rate(
    cells: list[TputCell], mode: str, window: str | None = None, size: int = 32
) -> float | None:
    """The rate of the `mode` cell of `size` (and `window`, unless None) if it counts."""
    cell = next(
        (
            c
            for c in cells
            if c.mode == mode and c.size == size and (window is None or c.window == window)
        ),
        None,
    )
    return cell.rate if counted(cell) else None


def rtt_median(cells: list[RttCell], mode: str) -> float | None:
    """The median round trip of the `mode` cell if it counts."""
    cell = next((c for c in cells if c.mode == mode), None)
    return cell.stats.get("median") if counted(cell) and cell.stats else None


def rtt_targets(cells: list[RttCell], spin_limit: float, zmq: str) -> list[str]:
    """The latency targets: the busy-spin median at most `spin_limit` us, the default idle
    strategy's at most pyzmq's (`zmq`: how the target names it)."""
    spins = [m for m in (rtt_median(cells, "spin"), rtt_median(cells, "spin-invoke")) if m]
    spin = min(spins, default=None)
    default, zmq_rtt = rtt_median(cells, "default"), rtt_median(cells, "zmq")
    ok = None if default is None or zmq_rtt is None else default <= zmq_rtt
    return [
        f"busy-spin RTT median (best busy-spin row) <= {spin_limit:g} us: {fmt(spin, '.2f')} us -> "
        f"{verdict(None if spin is None else spin <= spin_limit)}",
        f"default idle RTT median <= {zmq}: {fmt(default, '.2f')} vs "
        f"{fmt(zmq_rtt, '.2f')} us -> {verdict(ok)}",
    ]


# -- the report -----------------------------------------------------------------------------


@dataclass
class Report:
    """A cross-process benchmark's report: `title` (markdown), the header (`info`), the
    throughput and latency tables (None: not run) under their `titles` in the text report, the
    targets (under the heading `summary`) and the notes."""

    title: str
    titles: tuple[str, str]
    info: dict[str, str]
    tput: Table | None
    rtt: Table | None
    targets: list[str]
    notes: list[str]
    summary: str = "Targets"

    def tables(self, titles: tuple[str, str]) -> list[tuple[str, Table]]:
        """(title, table) of the tables that are there, titled from `titles`."""
        pairs = zip(titles, (self.tput, self.rtt), strict=True)
        return [(title, table) for title, table in pairs if table is not None]

    def text(self) -> str:
        out = [f"{k:>14}: {v}" for k, v in self.info.items()]
        for title, table in self.tables(self.titles):
            out += ["", title, "", *text_table(*table)]
        out += ["", f"{self.summary}:"] + [f"  {x}" for x in self.targets]
        out += [""] + [f"* {x}" for x in self.notes]
        return "\n".join(out)

    def markdown(self, command: str) -> str:
        out = [f"## {self.title}", ""]
        out.extend(f"- **{k}**: {v}" for k, v in self.info.items())
        out.append(f"- **command**: `{command}`")
        for title, table in self.tables(("Throughput", "Round-trip latency")):
            out += ["", f"### {title}", "", *md_table(*table)]
        out += ["", f"### {self.summary}", ""] + [f"- {x}" for x in self.targets]
        out += [""] + [f"- {x}" for x in self.notes]
        return "\n".join(out) + "\n"

    def print(self, args: argparse.Namespace, argv: list[str] | None, script: str) -> None:
        """The text report on stdout, then the markdown one as --markdown and --out say, and
        the JSON one as --json says."""
        print(self.text())
        write_markdown(args, argv, script, self.markdown)
        if getattr(args, "json", None):
            command = " ".join(["python", script, *(argv or sys.argv[1:])])
            with open(args.json, "w") as f:
                json.dump(self.as_json(script, command), f, indent=1)
            print(f"JSON written to {args.json}")

    def as_json(self, script: str, command: str) -> dict:
        """The report as data: its header and each table's headers and rows (the cells as the
        tables show them)."""
        tables = dict(zip(("throughput", "latency"), (self.tput, self.rtt), strict=True))
        return {
            "script": script,
            "command": command,
            "title": self.title,
            "info": self.info,
            **{
                name: None if table is None else {"headers": table[0], "rows": table[1]}
                for name, table in tables.items()
            },
            "targets": self.targets,
        }


def process_info(
    setup: str,
    args: argparse.Namespace,
    sizes: list[int],
    warmups: list[int],
    more: dict[str, str] | None = None,
) -> dict[str, str]:
    """The report's header: the machine (and its load at the start), Java, the aeronio setup,
    `more`, then the repeats and the warmups of the run `args` say."""
    warmup = ", ".join(f"{w:,} msgs before {s} B runs" for s, w in zip(sizes, warmups, strict=True))
    return {
        **machine_info(with_load=True),
        "java": reference_aeron.java_version(),
        "aeronio setup": setup,
        **(more or {}),
        "repeats": f"{args.repeats} (throughput; median shown)",
        "warmup": f"{warmup}; {args.rtt_warmup:,} round trips",
    }
