#!/usr/bin/env python
"""Charts of benchmark runs: each JSON report that a benchmark wrote with --json
(bench/ipc_processes.py, bench/udp_processes.py, bench/one_to_many.py,
bench/archive_throughput.py) becomes PNG charts (matplotlib):

  <name>-throughput.png  messages per second of each path, a panel per message size (and
                         receiver window), aeronio beside pyzmq and the reference Aeron
  <name>-latency.png     the round-trip distribution of each path: median, p99, p99.9, max

    python bench/ipc_processes.py --json ipc.json
    python bench/udp_processes.py --json udp.json
    python bench/plots.py ipc.json udp.json --out docs/pictures/benchmarks

<name> is the JSON file's name without its suffix.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

PERCENTILES = (("median us", "median"), ("p99 us", "p99"), ("p99.9 us", "p99.9"), ("max us", "max"))


def number(text: str) -> float | None:
    """A table cell as a number ("1,234.5" -> 1234.5), None if it is not one ("n/a", "")."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def records(table: dict) -> list[dict[str, str]]:
    return [dict(zip(table["headers"], row, strict=True)) for row in table["rows"]]


AERONIO_COLOURS = ("tab:blue", "tab:purple", "tab:cyan", "navy", "tab:brown", "tab:pink")


def colours(paths: list[str]) -> list[str]:
    """pyzmq orange, the reference Aeron ("Aeron Java ...") green, aeronio's paths in blues and
    purples (the same path the same colour in every chart)."""
    aeronio = sorted({p for p in paths if "pyzmq" not in p and "Aeron " not in p})
    return [
        "tab:orange" if "pyzmq" in p
        else "tab:green" if "Aeron " in p
        else AERONIO_COLOURS[aeronio.index(p) % len(AERONIO_COLOURS)]
        for p in paths
    ]  # fmt: skip


def throughput_chart(report: dict, out: Path) -> Path | None:
    """Bars of msgs/s by path, a panel per (size, window); None without throughput rows."""
    if not report.get("throughput"):
        return None
    panels: dict[str, list[tuple[str, float, bool]]] = defaultdict(list)
    for row in records(report["throughput"]):
        rate = number(row["msgs/s"])
        if rate is None:
            continue
        window = row.get("window", "-")
        panel = f"{row['size B']} B" + ("" if window in ("-", "") else f", window {window}")
        incomplete = any("INCOMPLETE" in str(value) for value in row.values())
        panels[panel].append((row["path"], rate, incomplete))
    if not panels:
        return None
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.5 * len(panels), 4.8), squeeze=False, sharey=False
    )
    for ax, (panel, bars) in zip(axes[0], panels.items(), strict=True):
        paths = [path for path, _, _ in bars]
        values = [rate / 1e6 for _, rate, _ in bars]
        positions = range(len(bars))
        hatches = ["//" if incomplete else "" for _, _, incomplete in bars]  # messages lost
        ax.bar(positions, values, color=colours(paths), hatch=hatches)
        labels = [path + " (INCOMPLETE)" * incomplete for path, _, incomplete in bars]
        ax.set_xticks(list(positions), labels, rotation=35, ha="right", fontsize=7)
        ax.set_title(panel, fontsize=10)
        ax.set_ylabel("million messages/s")
        for x, value in zip(positions, values, strict=True):
            ax.annotate(f"{value:.2f}", (x, value), ha="center", va="bottom", fontsize=7)
    fig.suptitle(f"{report['title']} - throughput\n{report['info'].get('date', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def latency_chart(report: dict, out: Path) -> Path | None:
    """Each path's round trip at the median, p99, p99.9 and max (log scale); None without
    latency rows."""
    if not report.get("latency"):
        return None
    lines = []
    for row in records(report["latency"]):
        points = [(label, number(row.get(column, ""))) for column, label in PERCENTILES]
        points = [(label, value) for label, value in points if value]
        if points:
            lines.append((f"{row['path']} ({row['size B']} B)", points))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for (label, points), line_colour in zip(
        lines, colours([name for name, _ in lines]), strict=True
    ):
        peer = "pyzmq" in label or "Aeron " in label
        ax.plot(
            [p for p, _ in points], [v for _, v in points], marker="o", label=label,
            color=line_colour, linestyle="--" if peer else "-",
        )  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylabel("round trip, microseconds (log)")
    ax.set_xlabel("percentile of the round trips")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{report['title']} - round trips\n{report['info'].get('date', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot(path: Path, out_dir: Path) -> list[Path]:
    """The charts of one JSON report, written to `out_dir`."""
    report = json.loads(path.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    made = [
        throughput_chart(report, out_dir / f"{path.stem}-throughput.png"),
        latency_chart(report, out_dir / f"{path.stem}-latency.png"),
    ]
    return [p for p in made if p is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports (--json FILE)")
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for the PNGs")
    args = parser.parse_args(argv)
    for report in args.reports:
        for png in plot(report, args.out):
            print(png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
