#!/usr/bin/env python
"""One publisher to many receivers over UDP loopback: multicast and multi-destination-cast (MDC)
against unicast to one receiver, in the same run (issue 5).

Each run of a cell starts a fresh set of worker processes, each with its own embedded media
driver (`aeronio.MediaDriver.launch` on its event loop, its own directory under /dev/shm), as
the aeronio rows of bench/udp_processes.py do, and with the same worker roles (bench/py:
aeron-pub, aeron-sub) and yield policy:

  unicast    1 publisher -> 1 subscriber   aeron:udp?endpoint=127.0.0.1:<p>
  multicast  1 publisher -> 3 subscribers  aeron:udp?endpoint=224.20.30.1:<p>|interface=127.0.0.1
             (always interface=127.0.0.1: the traffic stays on loopback; control on 224.20.30.2)
  mdc        1 publisher -> 3 subscribers  publication
             aeron:udp?control=127.0.0.1:<c>|control-mode=dynamic, subscriptions
             aeron:udp?endpoint=127.0.0.1:<p_i>|control=127.0.0.1:<c> (dynamic: the receivers
             add themselves with their status messages, no add_destination)

The one-to-many publications carry `fc=min,g:/3` by default (--fc min): the slowest receiver
paces the sender, so every receiver gets every message, and the publication only counts as
connected once all 3 receivers answer. `--fc max` (or `--fc min,max`) adds cells with Aeron's
default strategy for one-to-many, where the fastest receiver paces the sender and a slower one
may fall behind; those rows report what each receiver got (INCOMPLETE when one did not get
everything in time). Whatever the strategy, the publisher starts only once its flow control
tracks every receiver (the fc-receivers counter, type 17), so none joins late.

Each cell runs for every receiver window setting (--windows, as in bench/udp_processes.py):
`default` (aeronio's defaults: receiver window 128 KiB, the OS's socket buffers), or a size W:
`rcv-wnd=W|so-rcvbuf=W|so-sndbuf=W` on every subscription, `so-rcvbuf=W|so-sndbuf=W` on the
publication. With min flow control the sender may run ahead of the slowest receiver by that
receiver's window only, so the window matters more here than for unicast.

Every receiver checks each message's u64 sequence number (its first 8 bytes) in order, and the
count and the last message's length; each times itself from the end of the warmup to its last
message. Per cell (--repeats runs):

  msgs/s per rcv   the median over every receiver of every run (min..max of those in the note)
  slowest rcv      the slowest receiver of each run, median over the runs
  vs unicast       msgs/s per rcv / the unicast cell's (same size, mode and window, same run)
  sum msgs/s       the receivers' rates added up (messages delivered per second, all receivers)
  e2e msgs/s       N / (the last receiver's last message - the publisher's first timed send)
  CPU s pub/sub    CPU seconds (user + system: the process with its embedded driver) over the
                   timed window, the publisher's and the median receiver's
  wall s           the median receiver's timed window

Modes (--modes; the throughput paths of bench/udp_processes.py, same worker code):

  a  try_offer loop          -> poll(handler, limit) loop  (yield to the loop on every empty poll)
  b  await pub.offer(msg)    -> async for message in sub   (default NotifyingIdleStrategy)
  c  try_offer_batch(2-D u8) -> batch_poll + batch.records(dtype) numpy views

The default is (b). A one-to-many cell runs 4 processes, each with its driver on its event
loop; in (a) and (c) every one of them spins (it yields to its own loop, never to the OS), so
on a 2-core machine they take turns at the scheduler's pace and a receiver with data waits for
a core held by one spinning on nothing. (b) parks when there is nothing to do and leaves the
cores to the processes that have work. Measured on the 2-core machine of this benchmark
(200,000 x 32 B and 60,000 x 1 KiB, one run each, other jobs running), per receiver msgs/s,
(a) vs (b): 32 B multicast 95 k vs 169 k, MDC 375 k vs 204 k; 1 KiB multicast 12.7 k vs 26 k,
MDC 10.8 k vs 37.6 k, while unicast was (a) 1.22 M vs (b) 0.83 M at 32 B and 65 k vs 59 k at
1 KiB: (a) is faster only for unicast, where 2 processes fit 2 cores. `--modes a,b` measures
both.

Every run is bounded by --timeout: a receiver that runs out of time reports what it received,
in order, as an INCOMPLETE row (its rate over what arrived); a wrong or out-of-order message or
a worker that fails fails the row (noted, the run goes on).

    python bench/one_to_many.py --quick
    python bench/one_to_many.py
    python bench/one_to_many.py --modes a,b --fc min,max --markdown --out one_to_many.md
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from basics import FAILURES, STREAM_ID, require_positive, run_main, split_modes
from children import Scope, free_port, free_ports, progress
from command_line import (
    add_report_arguments,
    add_run_arguments,
    counts_and_warmups,
    parse_command_line,
)
from reports import (
    Report,
    Table,
    TputCell,
    counted,
    fmt,
    fmt_x,
    load_average,
    machine_info,
    median_or_none,
    noted_row,
)
from runs import pct, run_spec, worker_limit
from udp_processes import GRACE, IDLE_YIELD, SEND_YIELD, parse_windows

WORKER = os.path.abspath(__file__)
MULTICAST_GROUP = "224.20.30.1"  # the data group (odd last byte); control goes to 224.20.30.2
INTERFACE = "127.0.0.1"  # multicast stays on loopback

MODES: dict[str, str] = {
    "a": "(a) try_offer -> poll",
    "b": "(b) await offer -> async for",
    "c": "(c) offer_batch -> batch_poll",
}
KINDS = ("unicast", "multicast", "mdc")
FCS = ("min", "max")


@dataclass
class Options:
    timeout: float
    send_yield: int
    fragment_limit: int
    batch_rows: int


@dataclass
class GroupCell(TputCell):
    """A cell: `kind` (unicast, multicast, mdc) with `receivers` and flow control `fc` ("" for
    unicast). `rates` holds every receiver's rate of every run; per run, the slowest receiver's
    rate, the sum of the receivers' rates, the publisher's CPU seconds and the last receiver's
    e2e rate; every receiver's CPU seconds and timed window."""

    kind: str = "unicast"
    fc: str = ""
    receivers: int = 1
    slowest_rates: list[float] = field(default_factory=list)
    sum_rates: list[float] = field(default_factory=list)
    pub_cpu: list[float] = field(default_factory=list)
    sub_cpu: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)

    @property
    def slowest(self) -> float | None:
        return median_or_none(self.slowest_rates)

    @property
    def total(self) -> float | None:
        return median_or_none(self.sum_rates)

    @property
    def label(self) -> str:
        if self.kind == "unicast":
            return "unicast 1->1"
        return f"{self.kind} 1->{self.receivers}"


# -- channels and runs ----------------------------------------------------------------------


def fc_value(fc: str, receivers: int) -> str:
    """The publication's fc= value: min waits for the whole group (g:/n) to count as connected."""
    return f"min,g:/{receivers}" if fc == "min" else fc


def base_channels(cell: GroupCell) -> tuple[str, list[str]]:
    """(the publication's channel, each subscriber's channel) on fresh ports of 127.0.0.1."""
    n = cell.receivers
    if cell.kind == "unicast":
        channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
        return channel, [channel]
    if cell.kind == "multicast":
        channel = f"aeron:udp?endpoint={MULTICAST_GROUP}:{free_port()}|interface={INTERFACE}"
        return f"{channel}|fc={fc_value(cell.fc, n)}", [channel] * n
    control, *ports = free_ports(n + 1)
    pub = f"aeron:udp?control=127.0.0.1:{control}|control-mode=dynamic|fc={fc_value(cell.fc, n)}"
    return pub, [f"aeron:udp?endpoint=127.0.0.1:{p}|control=127.0.0.1:{control}" for p in ports]


def channels(cell: GroupCell) -> tuple[str, list[str]]:
    """The cell's channels with its window setting, as bench/udp_processes.py sets it: nothing
    for `default`; a size W: `so-rcvbuf=W|so-sndbuf=W` on the publication and
    `rcv-wnd=W|so-rcvbuf=W|so-sndbuf=W` on every subscription."""
    pub, subs = base_channels(cell)
    if cell.window == "default":
        return pub, subs
    buffers = f"|so-rcvbuf={cell.window}|so-sndbuf={cell.window}"
    return pub + buffers, [f"{sub}|rcv-wnd={cell.window}{buffers}" for sub in subs]


def why(e: Exception) -> str:
    """A worker's failure in one line: what the parent saw, and the last line of the worker's
    stderr (its exception) when there is one."""
    lines = [line.strip() for line in str(e).strip().splitlines()]
    return lines[0] if len(lines) < 2 else f"{lines[0]}: {lines[-1]}"


def rate_of(result: dict) -> float | None:
    n, wall = result.get("count", 0), result.get("elapsed", 0.0)
    return n / wall if n and wall > 0 else None


def group_run(cell: GroupCell, warmup: int, opts: Options) -> dict:
    """One run: the subscribers (each its own process and driver), once all are READY the
    publisher; every receiver's result, then the publisher's once released (stopped instead
    when a receiver failed or ran out of time). Per receiver: its result, or {"failed": why}."""
    pub_channel, sub_channels = channels(cell)
    with Scope(WORKER) as scope:
        base = run_spec(
            cell.size,
            cell.count,
            warmup,
            opts.timeout,
            mode=cell.mode,
            channel=pub_channel,
            stream=STREAM_ID,
            idle_yield=IDLE_YIELD,
            send_yield=opts.send_yield,
            fragment_limit=opts.fragment_limit,
            batch_rows=opts.batch_rows,
            partial=True,
            grace=GRACE,
        )
        subs = [
            scope.worker(
                f"aeronio subscriber {i}",
                {
                    **base,
                    "role": "aeron-sub",
                    "sub_channel": channel,
                    "dirs": {"aeron-sub": scope.shm_dir(f"sub{i}")},
                },
            )
            for i, channel in enumerate(sub_channels, 1)
        ]
        for sub in subs:
            sub.expect("READY", 30.0)
        pub = scope.worker(
            "aeronio publisher",
            {
                **base,
                "role": "aeron-pub",
                "dirs": {"aeron-pub": scope.shm_dir("pub")},
                "receivers": 0 if cell.kind == "unicast" else cell.receivers,
            },
        )
        received = []
        for sub in subs:
            try:
                received.append(sub.expect_json("RESULT", worker_limit(base), peer=pub))
            except FAILURES as e:
                received.append({"failed": why(e)})
        sent = pub_failed = None
        if all("failed" not in r and not r.get("incomplete") for r in received):
            pub.expect("SENT", 30.0)
            pub.release()
            sent = pub.expect_json("RESULT", 30.0)
            pub.wait(30.0)
        else:
            try:  # did the publisher start sending? (a receiver's result may not say)
                pub.expect("READY", 0.5)
            except FAILURES as e:
                pub_failed = why(e)
            pub.stop()
        for sub, got in zip(subs, received, strict=True):
            if "failed" not in got:
                sub.wait(30.0)
        return {"received": received, "sent": sent, "pub_failed": pub_failed}


def record(cell: GroupCell, run: dict) -> str | None:
    """Add one run's figures to the cell and print them; what went wrong, if anything."""
    received, sent = run["received"], run["sent"]
    rates = [rate_of(r) for r in received]
    problems = [f"failed: {run['pub_failed']}"] if run["pub_failed"] else []
    for i, r in enumerate(received, 1):
        who = "" if cell.receivers == 1 else f"rcv {i}: "
        if "failed" in r:
            problems.append(f"failed: {who}{r['failed']}")
        elif r.get("incomplete"):
            problems.append(f"INCOMPLETE: {who}{r['incomplete']} ({r['received']:,} received)")
    measured = [x for x in rates if x]
    cell.rates += measured
    if len(measured) == len(rates):
        cell.slowest_rates.append(min(measured))
        cell.sum_rates.append(sum(measured))
    cell.sub_cpu += [r["cpu_s"] for r in received if "cpu_s" in r and r.get("elapsed")]
    cell.walls += [r["elapsed"] for r in received if r.get("elapsed")]
    e2e = None
    if sent is not None:
        cell.pub_cpu.append(sent["cpu_s"])
        last = max(r["t_last"] for r in received)
        e2e = cell.count / (last - sent["t_first"])
        cell.e2e_rates.append(e2e)
    shown = " / ".join("n/a" if x is None else f"{x:,.0f}" for x in rates)
    tail = "" if e2e is None else f", e2e {e2e:,.0f}"
    cpu = ", ".join(f"{pct(r['cpu_s'], r['elapsed'])}" for r in received if r.get("elapsed"))
    if sent is not None:
        cpu = f"pub {pct(sent['cpu_s'], sent['elapsed'])} of {sent['elapsed']:.2f} s, sub {cpu}"
    progress(f"    msgs/s per receiver: {shown}{tail}   cpu (+driver): {cpu or 'n/a'}")
    for p in problems:
        progress(f"    {p}")
    if not problems:
        return None
    failed = [p for p in problems if p.startswith("failed")]
    return (failed or problems)[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")


def measure(plan: list[tuple[GroupCell, int]], repeats: int, opts: Options) -> list[GroupCell]:
    """Each (cell, warmup) of `plan` `repeats` times, a progress line first; a failed or
    incomplete run is noted in the cell (its receivers' rates kept) and ends its repeats."""
    cells = []
    for cell, warmup in plan:
        cells.append(cell)
        fc = f" fc={fc_value(cell.fc, cell.receivers)}" if cell.fc else ""
        progress(
            f"{cell.label}{fc} {MODES[cell.mode]}, window {cell.window}, {cell.size} B, "
            f"N={cell.count:,} (warmup {warmup:,})"
        )
        for _ in range(repeats):
            with noted_row(cell):
                problem = record(cell, group_run(cell, warmup, opts))
                if problem:
                    cell.note = problem
            if cell.note:
                break
    return cells


# =========================================================================================
# Report
# =========================================================================================


def unicast_of(cells: list[GroupCell], cell: GroupCell) -> GroupCell | None:
    return next(
        (
            c
            for c in cells
            if c.kind == "unicast"
            and (c.size, c.mode, c.window) == (cell.size, cell.mode, cell.window)
        ),
        None,
    )


def ratio(rate: float | None, base: GroupCell | None, cell: GroupCell) -> float | None:
    """rate / the unicast cell's rate, when both cells count (not failed nor incomplete)."""
    if rate is None or base is None or not base.rate:
        return None
    if not (counted(cell) and counted(base)):
        return None
    return rate / base.rate


def cpu_text(cell: GroupCell) -> str:
    pub, sub = median_or_none(cell.pub_cpu), median_or_none(cell.sub_cpu)
    return f"{fmt(pub, '.2f')}/{fmt(sub, '.2f')}"


def table(cells: list[GroupCell]) -> Table | None:
    if not cells:
        return None
    rows = []
    for c in cells:
        base = unicast_of(cells, c)
        vs = "" if c.kind == "unicast" else fmt_x(ratio(c.rate, base, c))
        note = "; ".join(x for x in (c.note, c.spread) if x)
        rows.append(
            [
                c.label,
                c.mode,
                c.window,
                fc_value(c.fc, c.receivers) if c.fc else "-",
                str(c.size),
                f"{c.count:,}",
                fmt(c.rate, ",.0f"),
                fmt(c.mb, ",.1f"),
                fmt(c.slowest, ",.0f"),
                vs,
                fmt(c.total, ",.0f"),
                fmt(c.e2e, ",.0f"),
                cpu_text(c),
                fmt(median_or_none(c.walls), ".2f"),
                note,
            ]
        )
    headers = [
        "cell",
        "mode",
        "window",
        "fc",
        "size B",
        "N",
        "msgs/s per rcv",
        "MB/s per rcv",
        "slowest rcv msgs/s",
        "vs unicast",
        "sum msgs/s",
        "e2e msgs/s",
        "CPU s pub/sub",
        "wall s",
        "note / min..max msgs/s per rcv",
    ]
    return headers, rows, set(range(4, len(headers) - 1))


def summary(cells: list[GroupCell]) -> list[str]:
    """Per size and mode: each one-to-many cell's per-receiver and slowest-receiver rates over
    unicast's (n/a when either failed or was incomplete)."""
    out = []
    for c in cells:
        if c.kind == "unicast":
            continue
        base = unicast_of(cells, c)
        per, slow = ratio(c.rate, base, c), ratio(c.slowest, base, c)
        fc = fc_value(c.fc, c.receivers)
        out.append(
            f"{c.size} B ({c.mode}) window {c.window}, {c.label} fc={fc}: per receiver "
            f"{fmt(c.rate if counted(c) else None, ',.0f')} msgs/s = "
            f"{fmt_x(per)} unicast, slowest {fmt_x(slow)}"
            + ("" if base is None else f" (unicast {fmt(base.rate, ',.0f')} msgs/s)")
        )
    return out


NOTES = [
    "Every cell is a fresh set of processes per run, each with its own embedded driver "
    "(aeronio.MediaDriver.launch on the process's event loop, its own /dev/shm directory): "
    "1 publisher and 1 (unicast) or 3 (multicast, MDC) subscribers, all over 127.0.0.1 "
    "(multicast with interface=127.0.0.1, group 224.20.30.1). MB = 10^6 payload bytes.",
    "fc=min,g:/3: the slowest receiver paces the sender, so every receiver gets every message, "
    "and the publication is connected only once all 3 receivers answer; with fc=max (--fc max) "
    "the fastest paces and a slower receiver may fall behind (its row says what it got). The "
    "publisher starts only once its fc-receivers counter shows every receiver.",
    "msgs/s per rcv: each receiver times itself from the end of the warmup to its last message "
    "(every message's u64 sequence number checked in order); the median over every receiver of "
    "every run, min..max in the last column. slowest rcv: the slowest receiver of each run, "
    "median over the runs. vs unicast: per-receiver msgs/s over the unicast 1->1 cell's of the "
    "same size, mode and window in this run. sum: the receivers' rates added up. e2e: N over "
    "the time from the publisher's first timed send to the last receiver's last message.",
    "window: `default` is aeronio's defaults (receiver window 128 KiB, the OS's socket "
    "buffers); a size W sets rcv-wnd, so-rcvbuf and so-sndbuf to W on every subscription and "
    "so-rcvbuf, so-sndbuf on the publication. With fc=min the sender runs ahead of the slowest "
    "receiver by that receiver's window at most.",
    "CPU s pub/sub: CPU seconds (user + system, the whole process with its embedded driver) "
    "over the timed window, the publisher's and the median receiver's (median over the runs); "
    "wall s: the median receiver's timed window. A one-to-many cell runs 4 processes on this "
    "machine's cores (see cores above).",
    "Mode (b) is the default: in (a) and (c) every process spins (yielding to its own event "
    "loop, never to the OS), which starves the others when 4 processes share 2 cores; "
    "--modes a,b measures both.",
    "INCOMPLETE: a receiver ran out of --timeout; its rate is over the messages that arrived "
    "(all in order) and the row counts for no ratio. failed: a worker failed (the first error "
    "shown); the run goes on.",
]

QUICK_NOTE = (
    "--quick: a smoke test. Runs of 20,000 messages last milliseconds and fit in the windows "
    "and socket buffers, so their rates say little; run without --quick for figures."
)


def setup_line(opts: Options, receivers: int) -> str:
    return (
        f"1 publisher -> 1 (unicast) or {receivers} (multicast, MDC) subscribers, each process "
        "with its own embedded driver (its own /dev/shm dir), UDP over 127.0.0.1, default term "
        f"(16 MiB) and MTU (1408); fragment limit {opts.fragment_limit}, batch "
        f"rows {opts.batch_rows}; spinning loops yield on every empty poll or refused offer and "
        f"after every {opts.send_yield} messages offered; --timeout {opts.timeout:g} s per run"
    )


TITLE = "One to many over UDP loopback: multicast and MDC vs unicast (aeronio)"
TABLE_TITLES = ("Throughput per receiver (UDP over loopback, one publisher)", "")


# =========================================================================================
# Main
# =========================================================================================


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="One publisher to 3 receivers over UDP loopback (multicast and MDC, min "
        "flow control) against unicast to 1 receiver in the same run: msgs/s per receiver, "
        "each process with its own embedded aeronio driver.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--modes", default="b", help=f"paths, from {','.join(MODES)} (see the docstring)"
    )
    parser.add_argument("--cells", default=",".join(KINDS), help=f"cells, from {','.join(KINDS)}")
    parser.add_argument(
        "--fc",
        default="min",
        help="flow control of the one-to-many cells: min (fc=min,g:/N: every receiver gets "
        "everything), max (Aeron's default: the fastest paces), or min,max for both",
    )
    parser.add_argument(
        "--windows",
        default="default,2m",
        help="receiver window settings: `default`, or a size (e.g. 2m) for the receiver window "
        "and both socket buffers (as in bench/udp_processes.py)",
    )
    parser.add_argument("--receivers", type=int, default=3, help="subscribers of one-to-many")
    parser.add_argument("--fragment-limit", type=int, default=4096, help="(a, c) poll limit")
    parser.add_argument("--batch-rows", type=int, default=1024, help="(c) records per offer")
    parser.add_argument(
        "--send-yield",
        type=int,
        default=SEND_YIELD,
        help="(a) messages offered between yields to the loop; (c) yields after every offer; "
        "0: yield only when back-pressured",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds a run's receivers may receive (then INCOMPLETE)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: 20,000 messages, 1 repeat, --timeout 10"
    )
    add_report_arguments(parser)
    return parser


QUICK = dict(count=20_000, repeats=1, timeout=10.0)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, sizes, counts = parse_command_line(parser, argv)
    modes = split_modes(parser, args.modes, MODES, "--modes")
    windows = parse_windows(parser, args.windows)
    kinds = split_modes(parser, args.cells, dict.fromkeys(KINDS, ""), "--cells")
    fcs = split_modes(parser, args.fc, dict.fromkeys(FCS, ""), "--fc")
    if not modes or not kinds or not fcs:
        parser.error("give at least one mode, cell and flow control")
    require_positive(
        parser, args, ("repeats", "receivers", "fragment_limit", "batch_rows", "timeout")
    )
    counts, warmups = counts_and_warmups(parser, args, sizes, counts, QUICK)
    if args.send_yield < 0:
        parser.error("--send-yield must not be negative")
    opts = Options(args.timeout, args.send_yield, args.fragment_limit, args.batch_rows)
    warmup = ", ".join(f"{w:,} msgs before {s} B runs" for s, w in zip(sizes, warmups, strict=True))
    info = {
        **machine_info(with_load=True),
        "aeronio setup": setup_line(opts, args.receivers),
        "repeats": f"{args.repeats} (median shown)",
        "warmup": warmup,
    }

    plan = []
    for size, n, w in zip(sizes, counts, warmups, strict=True):
        for mode in modes:
            for window in windows:
                for kind in kinds:
                    if kind == "unicast":
                        plan.append((GroupCell(mode, size, n, window), w))
                        continue
                    for fc in fcs:
                        cell = GroupCell(
                            mode, size, n, window, kind=kind, fc=fc, receivers=args.receivers
                        )
                        plan.append((cell, w))
    cells = measure(plan, args.repeats, opts)
    info["load average"] += f"; {load_average()} (at end)"
    report = Report(
        TITLE,
        TABLE_TITLES,
        info,
        table(cells),
        None,
        summary(cells),
        [QUICK_NOTE, *NOTES] if args.quick else NOTES,
        summary="Per receiver vs unicast",
    )
    report.print(args, argv, "bench/one_to_many.py")
    return 0


if __name__ == "__main__":
    run_main(main, interrupted_exit=True)
