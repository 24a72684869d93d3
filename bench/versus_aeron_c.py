#!/usr/bin/env python
"""aeronio against current Aeron's C client and C media driver (pyaeron 0.1.0: Aeron 1.53), the
same workloads side by side in one run, interleaved.

Each side runs in child processes on an interpreter of its own: aeronio's on --python (a path, or
3.11 / 3.12 / 3.13: the repository's .venv-3.12 etc. when there, else pyenv's), pyaeron's on
--pyaeron-python (default $AERONIO_PYAERON_PYTHON, else --python when it imports pyaeron, else a
temporary virtual environment with pyaeron from the registry, as the aeron_c tests make it).
The aeronio side imports aeronio from this repository, so its interpreter needs the core built for
it: a virtual environment per Python with `pip install -e ".[bench,bench-aeron-c]"` (see
docs/benchmarks.md).

Rows (32-byte messages by default, each carrying its number - u64, little-endian - in its first
8 bytes, checked at the receiver: a gap, a reorder or a missing message fails the run, which the
table shows as an error, never as a number):

  ipc-3p-a    IPC, 3 processes (a fresh standalone driver, a publisher, a subscriber):
              try_offer (pyaeron: offer) in a spinning loop -> poll(handler, limit)
  ipc-3p-b    the same with `await pub.offer(msg)` -> `async for message in sub` (aeronio only)
  ipc-1t-a    IPC, publisher and subscriber in one thread of one process (on a fresh standalone
              driver): offer up to --burst messages, poll up to --burst, again
  ipc-1t-b    the same with a task awaiting offer and `async for` (aeronio only)
  rtt         IPC round trip, ping and pong processes busy-polling (a fresh standalone driver):
              median and p99 (microseconds)
  one-call    in one process: offer alone in a loop (chunks the publication window holds
              whole), then poll(handler, 1) alone until the chunk is read
  udp-standalone  UDP over 127.0.0.1, publisher and subscriber processes, each on a fresh
              standalone driver of its own
  udp-embedded    the same, each process with its driver embedded (aeronio's on its loop;
              Aeron's in its own agent thread, SHARED threading)

UDP rows run at each --windows setting: `default` (both sides' defaults: Aeron's receiver window,
128 KiB) and a size W (e.g. 2m: rcv-wnd, so-rcvbuf and so-sndbuf set to W in the channel URIs of
both sides - Aeron's C driver and aeronio's take the same channel parameters).

Each cell is the median of --repeats runs (the range beside it); the runs are interleaved: every
repeat runs every row once on each side, alternating which side goes first. The ratio is aeronio
over pyaeron (messages per second), or aeronio's time over pyaeron's (round trips).

    python bench/versus_aeron_c.py                       # aeronio on this Python
    python bench/versus_aeron_c.py --python 3.12 --json versus-312.json
    python bench/versus_aeron_c.py --rows ipc-3p-a,udp-embedded --count 100000 --repeats 1
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from basics import (
    FAILURES,
    REPOSITORY,
    STREAM_ID,
    BenchError,
    require_positive,
    run_main,
    split_modes,
)
from children import Scope, free_port, progress, unwind_on_sigterm
from java_peer import ping_pong_spec
from one_process_workers import ROLES as ONE_PROCESS_ROLES
from reports import load_average, machine_info, md_table
from runs import latency_run, run_spec, throughput_run, worker_limit
from udp_processes import parse_windows, udp_channels
from worker_protocol import Pace
from zmq_workers import worker_main

from aeronio._core import LOOP_TURN_NS
from aeronio.driver.context import STANDALONE_DEFAULTS, DriverContext
from tests.support.aeron_c import PyaeronPython

SCRIPT = os.path.abspath(__file__)
C_WORKERS = os.path.join(os.path.dirname(SCRIPT), "aeron_c_workers.py")
IPC = "aeron:ipc"
SPIN_YIELD = 1000  # aeronio's spinning loops: idle spins between looks at the loop's turn
SPIN = {"idle_yield": SPIN_YIELD, "turns": True}  # with standalone drivers (take_turns)
EMBEDDED_UDP = {"idle_yield": 1, "send_yield": 256}  # udp_processes': the driver shares the loop
GRACE = 20.0
MAX_UNFRAGMENTED = 1408 - 32  # the largest message one frame carries at both sides' MTU

ROWS: dict[str, str] = {
    "ipc-3p-a": "IPC, 3 processes: (a) try_offer → poll",
    "ipc-3p-b": "IPC, 3 processes: (b) await offer → async for",
    "ipc-1t-a": "IPC, one thread: (a) try_offer → poll",
    "ipc-1t-b": "IPC, one thread: (b) await offer → async for",
    "rtt": "IPC round trip, busy poll",
    "udp-rtt": "UDP round trip, standalone drivers, busy poll",
    "one-call": "one call",
    "udp-standalone": "UDP, 2 processes, standalone drivers",
    "udp-embedded": "UDP, 2 processes, drivers embedded",
}
AERONIO_ONLY = {"ipc-3p-b", "ipc-1t-b"}  # pyaeron has no awaitable API
DEFAULT_ROWS = [row for row in ROWS if row != "udp-rtt"]  # issue 28's table
SIDES = ("pyaeron", "aeronio")

# -- the two sides' processes ---------------------------------------------------------------


@dataclass
class Side:
    """How one side starts its processes: its interpreter, its workers' argv, its driver."""

    name: str  # "aeronio" or "pyaeron"
    python: str

    @property
    def prefix(self) -> str:
        """Its worker roles' prefix (bench/aeron_workers.py's, bench/aeron_c_workers.py's)."""
        return "aeron" if self.name == "aeronio" else "c"

    def worker_argv(self, spec: dict) -> list[str]:
        if self.name == "aeronio":
            return [self.python, SCRIPT, "--worker", json.dumps(spec)]
        return [self.python, C_WORKERS, json.dumps(spec)]

    def start_driver(self, scope: Scope, kind: str) -> tuple[str, int]:
        """A fresh standalone driver at its defaults on a new /dev/shm directory, once it is
        up: (its dir, its pid)."""
        dir = scope.shm_dir(f"{self.name}-{kind}")
        if self.name == "aeronio":
            argv = [self.python, "-m", "aeronio.cli", "driver", "--dir", dir]
            ready = "aeronio driver pid"
        else:
            argv = [self.python, C_WORKERS, "--driver", dir]
            ready = "aeron c driver pid"
        driver = scope.child(f"{self.name} driver ({kind})", argv)
        driver.expect(ready, 30.0)
        return dir, driver.pid


class SideScope(Scope):
    """A run's scope whose workers are `side`'s; a spec with `role_dirs` gives each role its own
    standalone driver's dir (and pid)."""

    def __init__(self, side: Side) -> None:
        super().__init__(SCRIPT)
        self.side = side

    def worker(self, name: str, spec: dict):
        if "role_dirs" in spec:
            dir, pid = spec["role_dirs"][spec["role"]]
            spec = {**spec, "dir": dir, "driver_pid": pid}
        return self.child(name, self.side.worker_argv(spec))


def pair(side: Side, first: str, second: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The (name, role) of a run's two workers: the receiver (or pong), then the sender."""
    p = side.prefix
    return (f"{side.name} {first}", f"{p}-{first}"), (f"{side.name} {second}", f"{p}-{second}")


# -- one run of a row on one side -----------------------------------------------------------


@dataclass
class Settings:
    size: int
    count: int
    udp_count: int
    rtt_count: int
    rtt_warmup: int
    one_call_count: int
    chunk: int
    burst: int
    fragment_limit: int
    timeout: float
    udp_rate: float = 0.0  # udp-standalone's publishers' pace, messages a second (0: none)
    loop_turn_ns: int | None = None  # aeronio's turn interval (None: the library's)

    def warmup(self, count: int) -> int:
        return min(200_000, count // 5)


def common(s: Settings, count: int, **spec) -> dict:
    if s.loop_turn_ns is not None:
        spec["loop_turn_ns"] = s.loop_turn_ns
    return run_spec(
        s.size, count, s.warmup(count), s.timeout, stream=STREAM_ID, grace=GRACE,
        fragment_limit=s.fragment_limit, batch_rows=1, **spec,
    )  # fmt: skip


@dataclass
class Measured:
    """One run's figures (by Line.key), the messages (or round trips) its receiver counted of
    those it was to count and, across processes, each process's CPU per message (ns)."""

    values: dict[str, float]
    counted: int
    expected: int
    cpu_ns: dict[str, float] = field(default_factory=dict)


def throughput(scope: SideScope, spec: dict, roles) -> Measured:
    """A throughput run (bench/runs.py) of the receiver and the sender `roles`."""
    rates = throughput_run(scope, spec, *roles)
    expected = spec["warmup"] + spec["count"]
    return Measured({"rate": rates["rate"]}, rates["received"], expected, rates["cpu_ns"])


def ipc_processes(side: Side, s: Settings, mode: str) -> Measured:
    """(a) or (b) across three processes: msgs/s."""
    with SideScope(side) as scope:
        dir, pid = side.start_driver(scope, "ipc")
        spec = common(s, s.count, mode=mode, dir=dir, driver_pid=pid, channel=IPC, **SPIN,
                      send_yield=0)  # fmt: skip
        return throughput(scope, spec, pair(side, "sub", "pub"))


def single_worker(side: Side, spec: dict, role: str) -> dict:
    """The result of one worker (the messages it counted in `received`) on a fresh standalone
    driver."""
    with SideScope(side) as scope:
        dir, _ = side.start_driver(scope, "ipc")
        spec = {**spec, "dir": dir, "role": f"{side.prefix}-{role}"}
        worker = scope.worker(f"{side.name} {role}", spec)
        result = worker.expect_json("RESULT", worker_limit(spec))
        worker.wait(30.0)
    return result


def one_thread(side: Side, s: Settings, mode: str) -> Measured:
    """(a) or (b) in one thread: msgs/s."""
    spec = common(s, s.count, mode=mode, channel=IPC, burst=s.burst, **SPIN)
    result = single_worker(side, spec, "one-thread")
    rate = result["count"] / result["elapsed"]
    progress(f"    {rate:>14,.0f} msgs/s   cpu {100 * result['cpu_s'] / result['elapsed']:.0f}%")
    return Measured({"rate": rate}, result["received"], spec["warmup"] + spec["count"])


def one_call(side: Side, s: Settings) -> Measured:
    """Offers alone and polls of one alone: calls/s."""
    spec = {**common(s, s.one_call_count, channel=IPC), "warmup": s.chunk, "chunk": s.chunk}
    result = single_worker(side, spec, "one-call")
    offer, poll = result["count"] / result["offer_s"], result["count"] / result["poll_s"]
    progress(f"    offer {offer:,.0f} /s, poll(h, 1) {poll:,.0f} /s")
    return Measured({"offer": offer, "poll": poll}, result["received"], s.chunk + s.one_call_count)


def round_trip(side: Side, s: Settings, udp: bool = False) -> Measured:
    """Median and p99 of the timed round trips (each pong's number checked): microseconds. IPC
    through one standalone driver, or `udp` over 127.0.0.1 between two, one for each worker."""
    with SideScope(side) as scope:
        spec = run_spec(
            s.size, s.rtt_count, s.rtt_warmup, s.timeout, mode="spin", **SPIN,
            send_yield=0, grace=GRACE,
        )  # fmt: skip
        if s.loop_turn_ns is not None:
            spec["loop_turn_ns"] = s.loop_turn_ns
        roles = pair(side, "pong", "ping")
        if udp:
            ping, pong = (f"aeron:udp?endpoint=127.0.0.1:{free_port()}" for _ in range(2))
            spec.update(ping_pong_spec(ping, pong))
            spec["role_dirs"] = {role: side.start_driver(scope, role) for _, role in roles}
        else:
            dir, pid = side.start_driver(scope, "ipc")
            spec.update(ping_pong_spec(IPC, IPC), dir=dir, driver_pid=pid)
        stats = latency_run(scope, spec, *roles)
    values = {"median": stats.get("median", 0.0), "p99": stats.get("p99", 0.0)}
    return Measured(values, stats["n"], s.rtt_count)


def udp(side: Side, s: Settings, embedded: bool, window: str) -> Measured:
    """(a) over UDP between two processes, each on a standalone driver of its own or with its
    driver embedded: msgs/s."""
    pub_channel, sub_channel = udp_channels(free_port(), window)
    (sub_name, sub_role), (pub_name, pub_role) = roles = pair(side, "sub", "pub")
    with SideScope(side) as scope:
        spec = common(s, s.udp_count, mode="a", channel=pub_channel, sub_channel=sub_channel)
        if s.udp_rate:
            spec["rate"] = s.udp_rate
        if embedded:
            spec.update(EMBEDDED_UDP, dirs={r: scope.shm_dir(r) for r in (sub_role, pub_role)})
        else:
            spec.update(SPIN, send_yield=0)
            spec["role_dirs"] = {r: side.start_driver(scope, r) for r in (sub_role, pub_role)}
        return throughput(scope, spec, roles)


# -- the table ------------------------------------------------------------------------------


@dataclass
class Line:
    """A line of the table: what each run on each side measured (or why it did not)."""

    test: str
    key: str  # the run's result to show: rate, offer, poll, median, p99
    time: bool = False  # microseconds (lower is better) rather than msgs/s
    values: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    counted: dict[str, list[list[int]]] = field(default_factory=lambda: {s: [] for s in SIDES})
    cpu_ns: dict[str, list[dict[str, float]]] = field(
        default_factory=lambda: {s: [] for s in SIDES}
    )
    errors: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in SIDES})
    absent: set[str] = field(default_factory=set)  # sides without such an API

    def median(self, side: str) -> float | None:
        v = self.values[side]
        return statistics.median(v) if v else None

    def cell(self, side: str) -> str:
        if side in self.absent:
            return "—"
        if self.errors[side]:
            said = self.errors[side][0]
            return said if said.startswith("skipped") else f"error: {said}"
        v = self.values[side]
        if not v:
            return "n/a"
        if self.time:
            text = f"{statistics.median(v):.2f} µs"
            span = f" ({min(v):.2f}..{max(v):.2f})"
        else:
            text = f"{statistics.median(v) / 1e6:.2f} M"
            span = f" ({min(v) / 1e6:.2f}..{max(v) / 1e6:.2f})"
        return text + (span if len(v) > 1 else "")

    def ratio(self) -> float | None:
        a, c = self.median("aeronio"), self.median("pyaeron")
        if a is None or c is None or self.errors["aeronio"] or self.errors["pyaeron"]:
            return None
        return a / c

    def ratio_text(self) -> str:
        r = self.ratio()
        if r is None:
            return "—" if self.absent else "n/a"
        text = f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"
        return f"{text}× the time" if self.time else f"{text}×"

    def row(self) -> list[str]:
        return [self.test, self.cell("pyaeron"), self.cell("aeronio"), self.ratio_text()]

    def cpu_row(self, side: str) -> list[str] | None:
        """The side's CPU per message in each process (medians of the runs, ns) and all four
        together (the median of each run's sum); None without such figures."""
        runs = self.cpu_ns[side]
        if not runs:
            return None
        cells = []
        for process in CPU_PROCESSES:
            taken = [run[process] for run in runs if process in run]
            cells.append(f"{statistics.median(taken):.0f}" if taken else "—")
        total = statistics.median(sum(run.values()) for run in runs)
        return [self.test, side, *cells, f"{total:.0f}"]

    def as_json(self) -> dict:
        return {
            "test": self.test,
            "unit": "us" if self.time else "msgs/s",
            **{
                side: {
                    "values": self.values[side],
                    "counted": self.counted[side],  # [counted, expected] of each run
                    "cpu_ns": self.cpu_ns[side],  # each run's CPU per message, by process
                    "median": self.median(side),
                    "errors": self.errors[side],
                    "absent": side in self.absent,
                }
                for side in SIDES
            },
            "ratio": self.ratio(),
        }


HEADERS = ["test", "pyaeron (C)", "aeronio", "aeronio ÷ pyaeron"]
CPU_PROCESSES = ("receiver", "receiver's driver", "sender", "sender's driver")


@dataclass
class Task:
    """A row's run on a side (`run(side)` -> results) and the lines its results go to."""

    name: str
    lines: list[Line]
    run: Callable[[Side], Measured]


def plan(rows: list[str], windows: list[str], s: Settings) -> list[Task]:
    tasks = []
    for row in rows:
        title = ROWS[row]
        if row.startswith("ipc-3p") or row.startswith("ipc-1t"):
            mode = row[-1]
            run = ipc_processes if row.startswith("ipc-3p") else one_thread
            line = Line(title, "rate", absent={"pyaeron"} if row in AERONIO_ONLY else set())
            tasks.append(Task(title, [line], lambda side, r=run, m=mode: r(side, s, m)))
        elif row in ("rtt", "udp-rtt"):
            lines = [Line(f"{title}: median", "median", True), Line(f"{title}: p99", "p99", True)]
            over_udp = row == "udp-rtt"
            tasks.append(Task(title, lines, lambda side, u=over_udp: round_trip(side, s, u)))
        elif row == "one-call":
            lines = [
                Line(f"{title}: offer alone", "offer"),
                Line(f"{title}: poll(h, 1) alone", "poll"),
            ]
            tasks.append(Task(title, lines, lambda side: one_call(side, s)))
        else:
            embedded = row == "udp-embedded"
            for w in windows:
                name = f"{title}, window {'128 KiB (default)' if w == 'default' else w}"
                if s.udp_rate:
                    name += f", paced at {s.udp_rate:,.0f} msgs/s"
                tasks.append(
                    Task(name, [Line(name, "rate")],
                         lambda side, e=embedded, w=w: udp(side, s, e, w))
                )  # fmt: skip
    return tasks


def measure(tasks: list[Task], sides: list[Side], repeats: int) -> None:
    """Every task on every side (that has its API), `repeats` times, interleaved: each repeat
    runs each task once per side, alternating which side goes first."""
    for r in range(repeats):
        order = sides if r % 2 == 0 else sides[::-1]
        for task in tasks:
            for side in order:
                if all(side.name in line.absent for line in task.lines):
                    continue
                progress(f"[{r + 1}/{repeats}] {task.name}: {side.name} ({side.python})")
                try:
                    result = task.run(side)
                    if result.counted != result.expected:
                        raise BenchError(f"counted {result.counted} of {result.expected}")
                except FAILURES as e:
                    said = str(e).strip().splitlines() or [type(e).__name__]
                    message = said[0][:160] + (f" … {said[-1][:160]}" if len(said) > 1 else "")
                    progress(f"    FAILED: {e}")
                    for line in task.lines:
                        line.errors[side.name].append(message)
                    continue
                for line in task.lines:
                    line.values[side.name].append(result.values[line.key])
                    line.counted[side.name].append([result.counted, result.expected])
                    if result.cpu_ns:
                        line.cpu_ns[side.name].append(result.cpu_ns)


# -- interpreters ---------------------------------------------------------------------------

VERSION = re.compile(r"^3\.\d+(\.\d+)?$")


def resolve_python(parser: argparse.ArgumentParser, text: str) -> str:
    """--python: a path, or a version (3.12): the repository's .venv-3.12 when there, else
    pyenv's newest 3.12.x."""
    if not VERSION.match(text):
        return text
    venv = os.path.join(REPOSITORY, f".venv-{text}", "bin", "python")
    if os.path.exists(venv):
        return venv
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(os.path.join(root, "versions", f"{text}*", "bin", "python")))
    if not found:
        parser.error(f"--python {text}: no {REPOSITORY}/.venv-{text} and no pyenv {text}")
    return found[-1]


def shown(python: str) -> str:
    """An interpreter's path as the report shows it: relative to the repository when inside."""
    inside = os.path.abspath(python).startswith(REPOSITORY + os.sep)
    return os.path.relpath(python, REPOSITORY) if inside else python


PROBE = (
    "import sys, platform; sys.path.insert(0, sys.argv[1]); "
    "import aeronio._core, numpy, zmq; print(platform.python_version())"
)
PYAERON_PROBE = (
    "import platform, pyaeron; "
    "print(platform.python_version(), pyaeron.__version__, pyaeron.aeron_version)"
)


def probe(python: str, code: str, *args: str) -> tuple[bool, str]:
    """(whether `code` ran on `python`, its output or the last line of its error)."""
    try:
        done = subprocess.run(
            [python, "-c", code, *args], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    if done.returncode != 0:
        return False, (done.stderr.strip().splitlines() or ["?"])[-1]
    return True, done.stdout.strip()


def pyaeron_python(given: str | None, aeronio_python: str, made: PyaeronPython) -> str | None:
    """--pyaeron-python, else $AERONIO_PYAERON_PYTHON, else the aeronio side's interpreter when
    it imports pyaeron, else one `made` (a temporary venv; None, with its reason, when none)."""
    if given or os.environ.get("AERONIO_PYAERON_PYTHON"):
        return given or os.environ["AERONIO_PYAERON_PYTHON"]
    if probe(aeronio_python, PYAERON_PROBE)[0]:
        return aeronio_python
    return made.find()


# -- main -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="aeronio vs Aeron 1.53's C client and C media driver (pyaeron), every row "
        "of issue 28's table in one interleaved run; a markdown table on stdout.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter of aeronio's side: a path, or 3.11 / 3.12 / 3.13 (the "
        "repository's .venv-3.12 etc., else pyenv's); it must import aeronio built for it, "
        "numpy and pyzmq",
    )
    parser.add_argument(
        "--pyaeron-python",
        default=None,
        help="the interpreter of pyaeron's side (3.12+ with pyaeron 0.1.0; default "
        "$AERONIO_PYAERON_PYTHON, else --python if it imports pyaeron, else a temporary venv)",
    )
    parser.add_argument(
        "--rows",
        default=",".join(DEFAULT_ROWS),
        help=f"rows to run (comma-separated, of {','.join(ROWS)})",
    )
    parser.add_argument("--windows", default="default,2m", help="UDP receiver window settings")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per cell")
    parser.add_argument(
        "--size", type=int, default=32, help=f"message size in bytes (8 to {MAX_UNFRAGMENTED})"
    )
    parser.add_argument("--count", type=int, default=1_000_000, help="messages per IPC run")
    parser.add_argument("--udp-count", type=int, default=500_000, help="messages per UDP run")
    parser.add_argument(
        "--udp-rate",
        type=float,
        default=0.0,
        help="pace udp-standalone's publishers at this many messages a second, the workers "
        "sleeping while they wait (0: as fast as they can, spinning): the drivers' CPU per "
        "message at a steady rate",
    )
    parser.add_argument("--rtt-count", type=int, default=100_000, help="timed round trips")
    parser.add_argument("--rtt-warmup", type=int, default=10_000, help="untimed round trips")
    parser.add_argument(
        "--one-call-count", type=int, default=1_000_000, help="timed offers (and polls) alone"
    )
    parser.add_argument(
        "--chunk", type=int, default=100_000, help="one call: messages per timed chunk"
    )
    parser.add_argument("--burst", type=int, default=256, help="one thread (a): per round")
    parser.add_argument("--fragment-limit", type=int, default=4096, help="(a) poll limit")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run fails")
    parser.add_argument(
        "--loop-turn-ms",
        type=float,
        help="aeronio's loop turn interval (cython_core/awaitables.pxi; default the library's "
        f"{LOOP_TURN_NS / 1e6:g} ms; 0: every 256 calls; a huge one: none), to measure it",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the table and runs as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.worker is not None:
        return worker_main(args.worker, ONE_PROCESS_ROLES)
    unwind_on_sigterm()
    rows = split_modes(parser, args.rows, ROWS, "--rows", "row ")
    windows = parse_windows(parser, args.windows)
    positive = ("repeats", "count", "udp_count", "rtt_count", "one_call_count", "chunk", "burst")
    require_positive(parser, args, (*positive, "fragment_limit"))
    if args.udp_rate < 0:
        parser.error("--udp-rate must not be negative")
    if args.udp_rate and "udp-embedded" in rows:
        parser.error("--udp-rate paces the standalone drivers' row (udp-standalone) alone")
    if args.size < 8:
        parser.error("--size must be at least 8 bytes (every message carries a u64 sequence)")
    if args.size > MAX_UNFRAGMENTED:
        parser.error(
            f"--size must be at most {MAX_UNFRAGMENTED} bytes: one frame at both sides' MTU of "
            "1408 (the handlers count and check frames, as Aeron's samples do)"
        )
    if args.chunk * ((32 + args.size + 31) // 32 * 32) > 16 * 1024 * 1024:
        parser.error("--chunk: a chunk must fit in 16 MiB of the publication's window")
    # the children import aeronio (and bench's modules) from this repository
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [REPOSITORY, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    aeronio_python = resolve_python(parser, args.python)
    ok, version = probe(aeronio_python, PROBE, REPOSITORY)
    if not ok:
        parser.error(
            f"--python {aeronio_python} cannot import aeronio (built for it), numpy and pyzmq: "
            f"{version}. Make a venv per Python: python3.12 -m venv .venv-3.12 && "
            '.venv-3.12/bin/pip install -e ".[bench,bench-aeron-c]"'
        )
    made = PyaeronPython()
    try:
        c_python = pyaeron_python(args.pyaeron_python, aeronio_python, made)
        sides = [Side("aeronio", aeronio_python)]
        info = machine_info(with_load=True)
        info["python"] += " (this harness's; the sides' below)"
        info["aeronio side"] = f"{shown(aeronio_python)} (Python {version})"
        if c_python is None:
            progress(f"pyaeron's side skipped: {made.skip_reason}")
            info["pyaeron side"] = f"skipped: {made.skip_reason}"
        else:
            c_ok, c_version = probe(c_python, PYAERON_PROBE)
            if not c_ok:
                parser.error(f"--pyaeron-python {c_python} cannot import pyaeron: {c_version}")
            sides.insert(0, Side("pyaeron", c_python))
            info["pyaeron side"] = f"{shown(c_python)} (Python, pyaeron, Aeron: {c_version})"
        settings = Settings(
            args.size, args.count, args.udp_count, args.rtt_count, args.rtt_warmup,
            args.one_call_count, args.chunk, args.burst, args.fragment_limit, args.timeout,
            args.udp_rate,
            None if args.loop_turn_ms is None else round(args.loop_turn_ms * 1e6),
        )  # fmt: skip
        tasks = plan(rows, windows, settings)
        if c_python is None:
            for task in tasks:
                for line in task.lines:
                    line.errors["pyaeron"].append(f"skipped: {made.skip_reason}")
        measure(tasks, sides, args.repeats)
    finally:
        made.close()
    info["load average"] += f", {load_average()} (at end)"
    lines = [line for task in tasks for line in task.lines]
    report(args, argv, info, lines, settings)
    failed = [f"{line.test} ({side})" for line in lines for side in SIDES if line.errors[side]]
    if failed and c_python is not None:
        print(f"\nFAILED: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def setup_notes(s: Settings, args: argparse.Namespace) -> list[str]:
    d = DriverContext.from_sources(STANDALONE_DEFAULTS)  # `aeronio driver`'s
    turn_ns = LOOP_TURN_NS if s.loop_turn_ns is None else s.loop_turn_ns
    return [
        f"Messages: {s.size} B, each carrying its number, checked at the receiver (every message "
        "counted; a gap or reorder fails the run). Runs per cell: "
        f"{args.repeats}, interleaved (each repeat runs every row once per side, alternating "
        "which side goes first); median shown, (min..max) beside it.",
        f"Counts: IPC {s.count:,} messages after {s.warmup(s.count):,} untimed; UDP "
        f"{s.udp_count:,} after {s.warmup(s.udp_count):,}; round trips {s.rtt_count:,} after "
        f"{s.rtt_warmup:,}; one call {s.one_call_count:,} in chunks of {s.chunk:,} after one "
        f"untimed chunk; one thread (a) bursts of {s.burst}; (a) poll limit {s.fragment_limit}.",
        "Aeron's C driver: pyaeron.MediaDriver(dir, threading='shared') alone in its own process "
        "(or, for drivers embedded, in the worker's process, its agent thread beside the "
        "worker's); its defaults otherwise: the shared idle strategy (backoff), IPC term 64 MiB, "
        "UDP term 16 MiB, MTU 1408, receiver window 128 KiB. Aeron's C client pre-touches the "
        "logs it maps (AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY=true; its default is off), as "
        "aeronio maps its logs populated: neither side takes page faults in its timed loops.",
        "aeronio's driver: `python -m aeronio.cli driver --dir DIR` (on the aeronio side's "
        f"interpreter) at its defaults: IPC term {d.ipc_term_length // 2**20} MiB, UDP term "
        f"{d.term_length // 2**20} MiB, MTU {d.mtu_length}, conductor idle spins "
        f"{d.conductor_idle_spins}{' while it serves IPC' * d.conductor_idle_spins_ipc_only}, "
        f"its data path lingering {d.data_path_linger_ns / 1e6:g} ms after work, "
        f"sparse term files {d.term_buffer_sparse_file}; drivers "
        "embedded: aeronio.MediaDriver.launch on the worker's event loop.",
        "Loops: pyaeron's spin (offer until taken, poll until every message came); aeronio's "
        "(a) spin too, giving the event loop a turn as aeronio's awaitables do (every "
        f"{turn_ns / 1e6:g} ms, looked at every {SPIN_YIELD} idle polls or messages sent) with "
        "standalone "
        "drivers, or, with drivers embedded, yielding on every idle poll and after every "
        f"{EMBEDDED_UDP['send_yield']} messages offered (so its driver sends); (b) uses "
        "aeronio's default idle strategy. A fresh driver (or pair) for every run.",
        *(
            [
                f"Paced: the publishers offer a message every 1/{s.udp_rate:,.0f} s (warmup "
                "too), sleeping until it is due; the subscribers sleep "
                f"{Pace.IDLE * 1e6:g} µs after a poll that found nothing (both sides alike: "
                "time.sleep), so the CPU per message below is mostly the drivers'."
            ]
            if s.udp_rate
            else []
        ),
        "UDP windows: `default` leaves both sides at their defaults; a size W adds "
        "`rcv-wnd=W|so-rcvbuf=W|so-sndbuf=W` to the subscription's channel and "
        "`so-rcvbuf=W|so-sndbuf=W` to the publication's, on both sides.",
        "Ratio: aeronio ÷ pyaeron messages per second (higher is better for aeronio), or "
        "aeronio's round-trip time ÷ pyaeron's (lower is better for aeronio). —: no such API.",
    ]


def report(
    args: argparse.Namespace,
    argv: list[str] | None,
    info: dict[str, str],
    lines: list[Line],
    s: Settings,
) -> None:
    command = " ".join(["python", "bench/versus_aeron_c.py", *(argv or sys.argv[1:])])
    out = ["## aeronio vs Aeron's C client (pyaeron)", "", f"    {command}", ""]
    out += [f"- {k}: {v}" for k, v in info.items()]
    out += ["", *md_table(HEADERS, [line.row() for line in lines], {1, 2, 3}), ""]
    out += [f"- {note}" for note in setup_notes(s, args)]
    out += udp_bounds(lines)
    out += cpu_table(lines)
    print("\n".join(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"command": command, "info": info, "rows": [line.as_json() for line in lines]},
                f,
                indent=1,
            )
        progress(f"JSON written to {args.json}")


def udp_bounds(lines: list[Line]) -> list[str]:
    """What no driver can lift aeronio's UDP rows above (none: no lines): its two client loops
    over IPC in the same run (ipc-3p-a: a process each, a core each, the driver idle) do the
    same calls with no network between them and no driver sharing their 2 cores, so their rate
    bounds a UDP row's, and that rate ÷ pyaeron's bounds the UDP row's ratio."""
    ipc = next((line for line in lines if line.test == ROWS["ipc-3p-a"]), None)
    bound = ipc.median("aeronio") if ipc is not None and not ipc.errors["aeronio"] else None
    udp_rows = (ROWS["udp-standalone"], ROWS["udp-embedded"])
    udp = [line for line in lines if line.test.startswith(udp_rows)]
    if bound is None or not udp:
        return []
    out = [
        "",
        f"Bounds of the UDP rows: aeronio's two client loops over IPC ({ROWS['ipc-3p-a']}, "
        f"this run) reached {bound / 1e6:.2f} M msgs/s; a UDP row runs the same loops with two "
        "drivers' work on the same cores, so no driver lifts it above that rate:",
        "",
    ]
    for line in udp:
        pyaeron = line.median("pyaeron")
        if pyaeron and not line.errors["pyaeron"]:
            out.append(f"- {line.test}: at most {bound / pyaeron:.2f}× pyaeron")
    return out


def cpu_table(lines: list[Line]) -> list[str]:
    """Where the CPU of the runs across processes went, a message at a time (none: no lines)."""
    rows = [row for line in lines for side in SIDES if (row := line.cpu_row(side))]
    if not rows:
        return []
    headers = ["test", "side", *CPU_PROCESSES, "all"]
    return [
        "",
        "CPU per message, ns: what each process ran over its own timed window (/proc's "
        "scheduler time), divided by the messages; medians of the runs, and for all of them "
        "the median of each run's sum. A driver both workers "
        "share is the receiver's. Spinning counts: a worker or driver that spins while it "
        "waits takes CPU no message needed, so these are what the processes took of "
        f"{os.cpu_count()} shared cores, not what each message needs.",
        "",
        *md_table(headers, rows, set(range(2, len(headers)))),
    ]


if __name__ == "__main__":
    run_main(main, interrupted_exit=True)
