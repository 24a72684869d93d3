"""The market-data example in one command: a standalone driver, the feed (IPC and UDP multicast),
a consumer per channel, the archive recording the feed, the dashboard and the Spark bars, for
N seconds, with a table of rates every second and a check of every figure at the end.

    python examples/market_data/run.py [--seconds 60] [--symbols 50] [--rate 20000]
        [--speed 30] [--port 8050] [--multicast 224.10.20.1:0] [--work DIR] [--no-spark]

Ctrl-C (or SIGTERM) ends the feed early and the end goes on as usual (a second one stops at
once): the consumers drain, the Spark pipeline takes the whole recording, every process stops
and the driver removes its directory. What the run writes stays in --work (default: a new
temporary directory): the archive, the bars (Parquet), the consumers' books (JSON), spark.log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from options import add_market_options, multicast, number
from rates import HEADER, ROWS_PER_HEADER, Lags, row
from ticks import symbol_names

HERE = Path(__file__).parent
DRAIN_S = 30  # for the consumers and the archive to take the last ticks
SPARK_S = 300  # for Spark to start, then to finish the bars
PR_SET_PDEATHSIG = 1


class RunError(Exception):
    """A process did not do what the run needs (said on stderr, exit status 1)."""


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM me if run.py dies, even by kill -9 (no orphans: each
    stops as at the end of a run, and Spark takes its JVM down with it, which SIGKILL would
    leave running)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Proc:
    """A process of the run, its stdout lines (`<tag> <json>`, status.py) read as they come:
    `status` is the latest `status` payload, `expect(tag)` waits for another tag's."""

    def __init__(self, name: str, process: asyncio.subprocess.Process):
        self.name = name
        self.process = process
        self.status: dict = {}
        self.said: dict[str, object] = {}
        self.changed = asyncio.Condition()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls, name: str, argv: list[str], cwd: Path, stdin: bool = False, stderr=None
    ) -> Proc:
        """Start `argv` in `cwd` (stdin a pipe for `send` with `stdin`), in a session of its
        own."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,  # Ctrl-C reaches run.py alone: it stops the others in turn
            preexec_fn=_die_with_parent,
        )
        return cls(name, process)

    async def _read(self) -> None:
        async for raw in self.process.stdout:
            tag, _, text = raw.decode().strip().partition(" ")
            try:
                payload = json.loads(text) if text else None
            except json.JSONDecodeError:
                payload = text
            async with self.changed:
                if tag == "status":
                    self.status = payload
                else:
                    self.said[tag] = payload
                self.changed.notify_all()
        await self.process.wait()
        async with self.changed:
            self.changed.notify_all()

    async def expect(self, tag: str, timeout: float = 30):
        """The payload of this process's `tag` line; RunError if it exits or takes longer."""
        try:
            async with asyncio.timeout(timeout), self.changed:
                while tag not in self.said:
                    if self.reader.done():
                        raise RunError(
                            f"{self.name} exited (status {self.process.returncode}) before "
                            f"saying {tag!r}"
                        )
                    await self.changed.wait()
        except TimeoutError:
            raise RunError(f"{self.name} did not say {tag!r} within {timeout:g} s") from None
        return self.said[tag]

    def send(self, line: str) -> None:
        """Write a line to its stdin."""
        self.process.stdin.write(line.encode() + b"\n")

    async def stop(self, grace: float = 0, timeout: float = 20) -> int:
        """After `grace` seconds for it to exit by itself, SIGTERM, and SIGKILL if it is still
        there after `timeout` seconds more; its exit status."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.process.wait()
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout):
                    await self.process.wait()
            except TimeoutError:
                print(f"{self.name} ignored SIGTERM for {timeout:g} s: killed", file=sys.stderr)
                self.process.kill()
                await self.process.wait()
        await self.reader
        return self.process.returncode


def script(name: str, *args: object) -> list[str]:
    """The command line of one of the example's scripts, with this Python."""
    return [sys.executable, str(HERE / name), *map(str, args)]


def free_udp_port() -> int:
    """A UDP port nobody uses now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


class Run:
    """The processes, started in order and stopped in reverse, and the table while they run."""

    def __init__(self, args: argparse.Namespace, work: Path):
        self.args, self.work = args, work
        self.procs: list[Proc] = []
        self.stop = asyncio.Event()
        self.spark: Proc | None = None

    async def start(self, name: str, argv: list[str], **kwargs) -> Proc:
        """Proc.start in the work directory, remembered for `close`. (Not in the current one:
        in a checkout, `python -m` there, as the driver and Spark's workers are started, would
        import the source tree's aeronio rather than the one installed.)"""
        proc = await Proc.start(name, argv, self.work, **kwargs)
        self.procs.append(proc)
        return proc

    async def main(self) -> bool:
        """The whole run; True when every figure checks."""
        await self.start_all()
        table = asyncio.create_task(self.table())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), self.args.seconds)
        table.cancel()
        await self.feed.stop()
        done = await self.feed.expect("done")
        await self.drain(done)
        print(f"the feed stopped; the books and the archive have all {done['ipc']['count']:,} "
              "ticks", flush=True)  # fmt: skip
        bars = None
        if self.spark is not None:
            print("Spark: the live bars take the rest of the recording, then the batch bars "
                  "take it all", flush=True)  # fmt: skip
            await self.spark.expect("ready", SPARK_S)
            self.spark.send("finish")
            bars = await self.spark.expect("bars", SPARK_S)
            await self.spark.stop(grace=60)
        finals = []
        for book in self.books:
            await book.stop()
            finals.append(await book.expect("final"))
        return report(done, finals, self.recorder.status, bars, self.work, self.args.symbols)

    async def start_all(self) -> None:
        """The driver, Spark (slow to start: it then waits for the recording), the subscribers,
        then the feed once they are all subscribed (so they get every tick)."""
        args, work = self.args, self.work
        group, port = args.multicast
        group_option = f"--multicast={group}:{port or free_udp_port()}"
        driver = await self.start("driver", [sys.executable, "-m", "aeronio.cli", "driver"])
        dir = (await driver.expect("aeronio")).rpartition(" on ")[2]  # "... on DIR"
        self.driver_dir = dir
        archive = f"--archive={work / 'archive'}"
        if args.spark:
            with open(work / "spark.log", "wb") as log:
                bars = script("bars.py", archive, f"--driver-dir={dir}", f"--out={work / 'bars'}")
                self.spark = await self.start("spark", bars, stdin=True, stderr=log)
        self.recorder = await self.start("archive", script("recorder.py", f"--dir={dir}", archive))
        ipc = script("consumer.py", f"--dir={dir}", f"--summary={work / 'book-ipc.json'}")
        udp = script("consumer.py", f"--dir={dir}", group_option,
                     f"--summary={work / 'book-multicast.json'}")  # fmt: skip
        self.books = [
            await self.start("book (IPC)", ipc),
            await self.start("book (multicast)", udp),
        ]
        self.dashboard = await self.start("dashboard", script(
            "dashboard.py", f"--dir={dir}", f"--symbols={args.symbols}", f"--port={args.port}"
        ))  # fmt: skip
        ready = [await p.expect("ready") for p in (*self.books, self.recorder, self.dashboard)]
        self.subscriptions = [r["subscription"] for r in ready]
        print(f"driver: {dir}\ndashboard: {ready[-1]['url']}", flush=True)
        if self.spark is None:
            print("Spark: off (--no-spark)", flush=True)
        market = [f"--{k}={getattr(args, k)}" for k in ("symbols", "rate", "speed", "seed")]
        self.feed = await self.start(
            "feed", script("feed.py", f"--dir={dir}", group_option, *market)
        )
        await self.feed.expect("ready")

    async def table(self) -> None:
        """A row every second until cancelled."""
        lags = Lags(self.driver_dir)
        started = time.monotonic()
        try:
            for printed in range(sys.maxsize):
                await asyncio.sleep(1)
                if printed % ROWS_PER_HEADER == 0:
                    print(HEADER)
                lag = lags.read()
                spark = self.spark.status if self.spark else {}
                statuses = [self.feed.status, *(b.status for b in self.books),
                            self.recorder.status, self.dashboard.status, spark]  # fmt: skip
                line = row(
                    time.monotonic() - started, statuses, [lag.get(s) for s in self.subscriptions]
                )
                print(line, flush=True)
        finally:
            lags.close()

    async def drain(self, done: dict) -> None:
        """Until each consumer has every tick of its channel and the archive has recorded them."""
        wanted = [done["ipc"]["count"], done["udp"]["count"]]

        def drained() -> bool:
            counts = [b.status.get("count") for b in self.books]
            return counts == wanted and self.recorder.status["position"] >= done["ipc"]["position"]

        try:
            async with asyncio.timeout(DRAIN_S):
                while not drained():
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise RunError(
                f"not drained in {DRAIN_S} s: the feed sent {wanted}, the books have "
                f"{[b.status.get('count') for b in self.books]}, the archive {self.recorder.status}"
            ) from None

    async def close(self) -> None:
        """Stop whatever still runs, the driver last (it removes its directory)."""
        for proc in reversed(self.procs):
            await proc.stop()


def report(
    done: dict, finals: list[dict], recorded: dict, bars: dict | None, work: Path, symbols: int
) -> bool:
    """Print the end figures and whether they agree; True if they all do."""
    ok = True

    def check(good: bool, text: str) -> None:
        nonlocal ok
        ok &= good
        print(f"  {'ok ' if good else 'BAD'} {text}")

    print("\nat the end:")
    for (channel, name), final in zip((("ipc", "IPC"), ("udp", "multicast")), finals, strict=True):
        sent = done[channel]
        check(
            final["count"] == sent["count"] and final["crc"] == sent["crc"] and not final["breaks"],
            f"book ({name}): {final['count']:,} ticks, CRC-32 {final['crc']:08x}, "
            f"{final['breaks']} sequence breaks; the feed sent {sent['count']:,}, "
            f"CRC-32 {sent['crc']:08x}",
        )
    check(
        recorded.get("position", 0) >= done["ipc"]["position"],
        f"archive: recording {recorded.get('recording')} to position "
        f"{recorded.get('position', 0):,} (the feed's IPC stream ends at "
        f"{done['ipc']['position']:,}) in {work / 'archive'}",
    )
    if bars is not None:
        check(
            bars["ticks"] == done["ipc"]["count"],
            f"Spark: {bars['ticks']:,} ticks read from the recording; {bars['live']:,} bars of "
            f"closed minutes live, {bars['batch']:,} bars of {bars['minutes']} minutes in batch "
            f"({work / 'bars'})",
        )
        name = symbol_names(symbols)[bars["last"][0]["symbol"]] if bars["last"] else "-"
        print(f"\nthe last bars of the busiest symbol, {name}:")
        print(" minute     open     high      low    close     volume       vwap  ticks")
        for b in bars["last"]:
            print(
                f"  {b['minute']} {b['open']:8.2f} {b['high']:8.2f} {b['low']:8.2f} "
                f"{b['close']:8.2f} {b['volume']:10,} {b['vwap']:10.4f} {b['ticks']:6,}"
            )
    print(f"\nwork directory: {work}")
    return ok


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=number(float, 0), default=60.0, help="how long the feed runs (60)"
    )
    add_market_options(parser)
    parser.add_argument(
        "--port", type=number(int, 0, 65535), default=8050, help="the dashboard's (8050; 0: any)"
    )
    parser.add_argument(
        "--multicast",
        type=multicast(any_port=True),
        default="224.10.20.1:0",
        metavar="GROUP:PORT",
        help="the feed's multicast group and port, on loopback (224.10.20.1:0; port 0: any free)",
    )
    parser.add_argument("--work", type=Path, help="where the run's files go (a new temp dir)")
    parser.add_argument("--no-spark", dest="spark", action="store_false", help="no Spark bars")
    args = parser.parse_args(argv)
    missing = [
        m
        for m in ("aiohttp",) + (("pyspark", "pyarrow", "pandas") if args.spark else ())
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        parser.error(f'missing {", ".join(missing)}: pip install ".[examples]"')
    if args.spark and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        parser.error("Spark needs Java 17 (apt-get install openjdk-17-jdk-headless), or --no-spark")
    if args.work is not None:
        try:
            args.work.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            parser.error(f"--work {args.work}: {e.strerror}")
    return args


async def amain(args: argparse.Namespace) -> int:
    """The run, its exit status; the processes stopped whatever happens."""
    work = (args.work or Path(tempfile.mkdtemp(prefix="aeronio-market-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    run = Run(args, work)
    loop, task = asyncio.get_running_loop(), asyncio.current_task()

    def on_signal() -> None:  # the first ends the feed, the second the run
        if run.stop.is_set():
            task.cancel()
        else:
            print("stopping: the feed ends, the rest drains (again to stop at once)", flush=True)
            run.stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    try:
        return 0 if await run.main() else 1
    except RunError as error:
        print(f"run.py: {error}", file=sys.stderr)
        return 1
    finally:
        await asyncio.shield(run.close())


if __name__ == "__main__":
    with contextlib.suppress(asyncio.CancelledError):
        sys.exit(asyncio.run(amain(parse_args())))
    sys.exit(130)
