"""The `aeronio` command. On a driver: `driver` (run a standalone media driver), `stat` (its
counters), `streams` (per-stream positions, backlogs and log memory), `errors` (its
distinct-error log), `loss` (its loss report) and `clean` (remove what dead drivers left).
Messages: `demo` (IPC publisher and subscriber on an embedded driver), `ping` and `pong` (round
trips with latency percentiles) and `rate` (messages/s arriving). Files: `archive ACTION` (serve,
list, describe, verify or dump an archive) and `logdump FILE` (a log buffer's metadata and
frames)."""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, TextIO

import aeronio
from aeronio import samples
from aeronio.archive import tool as archive_tool
from aeronio.cnc import CNC_FILE, CncFile, CncFileError, version_text
from aeronio.concurrent.error_log import read_error_log
from aeronio.counters import CountersFileError, CountersReader
from aeronio.counters.stream_stat import format_streams, streams
from aeronio.driver.context import (
    STANDALONE_DEFAULTS,
    DriverContext,
    env_var_name,
    option_names,
    parse_option_value,
)
from aeronio.driver.directories import YOUNG_S, default_base, is_live, remove_dead_driver_dirs
from aeronio.driver.loss_report import LossReportError, load_loss_report
from aeronio.errors import AeronError, ConfigurationError, dir_problem
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.logbuffer.logdump import dump_log
from aeronio.protocol import limits
from aeronio.protocol.layout import LOCK_FILE, LOSS_REPORT_FILE

STAT_RULE = "=" * 70


class CommandError(Exception):
    """A failure reported as one line on stderr with exit status `status`."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


async def run_demo(
    count: int,
    size: int,
    stream_id: int,
    channel: str = "aeron:ipc",
    out: TextIO = sys.stdout,
) -> None:
    """Publish `count` messages of `size` bytes over `channel` and receive them all. The
    publisher and the subscriber are tasks: the first to fail ends both, with its error."""
    async with aeronio.connect() as aeron:
        subscription = await aeron.add_subscription(channel, stream_id)
        publication = await aeron.add_publication(channel, stream_id)
        if size > publication.max_message_length:
            raise CommandError(
                f"--size {size} is over the max message length {publication.max_message_length} "
                f"of {channel} (an eighth of its term length {publication.term_length})",
                2,
            )
        await subscription.wait_connected(timeout=10)
        print(f"driver dir {aeron.driver_dir}, channel {channel}", file=out)
        print(
            f"publication session {publication.session_id} stream {stream_id}, "
            f"term length {publication.term_length}, initial term id {publication.initial_term_id}",
            file=out,
        )
        payload = bytearray(size)

        async def publish() -> None:
            for i in range(count):
                payload[:8] = i.to_bytes(8, "little")
                await publication.offer(payload)

        async def receive() -> None:
            received = 0
            async for message in subscription:
                if int.from_bytes(message.data[:8], "little") != received:
                    raise RuntimeError(f"message {received} arrived out of order")
                received += 1
                if received == count:
                    return

        start = time.perf_counter()
        tasks = (asyncio.create_task(publish()), asyncio.create_task(receive()))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            if not task.cancelled():
                task.result()  # the first failure, if any
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0.01)  # let the conductor run a duty cycle: it samples pub-pos
        image = subscription.images[0]
        rate = count / elapsed
        print(
            f"{count} messages of {size} B in {elapsed:.3f} s: {rate / 1e6:.2f} M msg/s, "
            f"{rate * size / 1e6:.1f} MB/s (await offer + async for, one loop)",
            file=out,
        )
        print(
            f"positions: pub-pos {publication.position}, sub-pos {image.position}, "
            f"pub-lmt {publication.position_limit}",
            file=out,
        )
        assert aeron.counters is not None  # a connected client has its driver's counters
        for info in aeron.counters.for_each():
            if info.type_id != 0 or info.value:
                print(f"{info.id:4d}: {info.value:>16,} - {info.label}", file=out)


def _add_sample_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """ping, pong and rate (aeronio/samples.py), with Aeron's samples' default channels."""
    for name, help in (
        ("ping", "round trips to a pong, with latency percentiles (like Aeron's Ping)"),
        ("pong", "echo a ping's messages back (like Aeron's Pong)"),
    ):
        sample = commands.add_parser(name, help=help)
        sample.add_argument("--dir", help="a driver's directory (default: an embedded driver)")
        sample.add_argument("--ping-channel", default=samples.PING_CHANNEL)
        sample.add_argument("--ping-stream", type=int, default=samples.PING_STREAM)
        sample.add_argument("--pong-channel", default=samples.PONG_CHANNEL)
        sample.add_argument("--pong-stream", type=int, default=samples.PONG_STREAM)
        sample.add_argument("--count", type=int, default=10_000 if name == "ping" else None)
        if name == "ping":
            sample.add_argument("--size", type=int, default=32, help="message size (>= 8)")
            sample.add_argument("--warmup", type=int, default=1_000, help="untimed round trips")
            sample.add_argument(
                "--timeout", type=float, default=30.0,
                help="seconds to wait for the pong, and for each answer (default 30)",
            )  # fmt: skip
    rate = commands.add_parser("rate", help="messages/s and MB/s arriving (like RateSubscriber)")
    rate.add_argument("--dir", help="a driver's directory (default: an embedded driver)")
    rate.add_argument("--channel", default="aeron:udp?endpoint=localhost:40123")
    rate.add_argument("--stream", type=int, default=1001)
    rate.add_argument("--interval", type=float, default=1.0, help="seconds between reports")
    rate.add_argument("--reports", type=int, help="stop after this many (default: never)")


def check_stream_ids(args: argparse.Namespace, *flags: str) -> None:
    """The stream ids of `flags` (e.g. "--ping-stream") are signed 32-bit integers, or a
    CommandError names the flag (the driver's refusal would name its API parameter)."""
    for flag in flags:
        value = getattr(args, flag[2:].replace("-", "_"))
        if not limits.INT32_MIN <= value <= limits.INT32_MAX:
            raise CommandError(f"{flag} {value} must be a signed 32-bit integer", 2)


def run_until_stopped(main: Coroutine[Any, Any, object], *, endless: bool) -> None:
    """Run a command's coroutine under `aeronio.run`: SIGINT and SIGTERM unwind it, so its
    embedded driver removes its directory. Stopped so, a command that runs until stopped
    (`endless`) ends well; any other was cut short: "interrupted" (130) or "terminated" (143)."""
    try:
        aeronio.run(main)
    except KeyboardInterrupt:
        if not endless:
            raise CommandError("interrupted", 130) from None
    except SystemExit:  # aeronio.run's answer to SIGTERM
        if not endless:
            raise CommandError("terminated", 128 + signal.SIGTERM) from None


def run_sample(args: argparse.Namespace) -> int:
    check_stream_ids(args, "--ping-stream", "--pong-stream")
    if args.command == "ping" and not args.timeout > 0:
        raise CommandError("--timeout must be positive", 2)
    if args.command == "ping" and args.warmup < 0:
        raise CommandError("--warmup must be at least 0", 2)
    if args.count is not None and args.count < 1:  # pong's None: for ever
        raise CommandError("--count must be at least 1", 2)
    streams = (args.ping_channel, args.ping_stream, args.pong_channel, args.pong_stream)
    try:
        if args.command == "ping":
            run_until_stopped(
                samples.ping(
                    args.dir, *streams, args.count, args.size, args.warmup, timeout=args.timeout
                ),
                endless=False,
            )
        elif args.command == "pong":
            run_until_stopped(
                samples.pong(args.dir, *streams, args.count), endless=args.count is None
            )
    except (TimeoutError, ValueError, AeronError) as e:
        raise CommandError(f"{type(e).__name__}: {e}") from None
    return 0


def run_rate(args: argparse.Namespace) -> int:
    check_stream_ids(args, "--stream")
    if args.interval <= 0:
        raise CommandError("--interval must be positive", 2)
    if args.reports is not None and args.reports < 1:  # None: for ever
        raise CommandError("--reports must be at least 1", 2)
    try:
        run_until_stopped(
            samples.rate(args.dir, args.channel, args.stream, args.interval, args.reports),
            endless=args.reports is None,
        )
    except AeronError as e:
        raise CommandError(str(e)) from None
    return 0


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def driver_dir(dir: str | None) -> str:
    """--dir, else $AERONIO_DIR."""
    dir = dir or os.environ.get("AERONIO_DIR")
    if not dir:
        raise CommandError("no driver directory: pass --dir or set AERONIO_DIR")
    return dir


def label_filter(text: str | None) -> Callable[[str], bool]:
    """Keep labels containing text, or matching the regex after a `re:` prefix."""
    if text is None:
        return lambda label: True
    if text.startswith("re:"):
        try:
            pattern = re.compile(text[3:])
        except re.error as e:
            raise CommandError(f"bad --filter regex {text[3:]!r}: {e}", 2) from None
        return lambda label: pattern.search(label) is not None
    return lambda label: text in label


# A driver without aeronio's lock (Aeron's) counts as running while its heartbeat is younger than
# this: Aeron's clients' default driver timeout.
DRIVER_TIMEOUT_MS = 10_000


def open_cnc(dir: str) -> CncFile:
    """The cnc.dat of the driver on `dir`, or a CommandError saying why not."""
    try:
        return CncFile.map(os.path.join(dir, CNC_FILE))
    except FileNotFoundError:
        raise CommandError(f"no media driver in {dir} ({CNC_FILE} missing)") from None
    except (CncFileError, OSError) as e:
        raise CommandError(f"no media driver in {dir}: {e}") from None


def open_counters(dir: str) -> CountersReader:
    """The counters of the driver on `dir`, or a CommandError saying why not."""
    cnc = open_cnc(dir)
    try:
        return CountersReader.of(cnc)
    except CountersFileError as e:
        cnc.close()
        raise CommandError(f"no media driver counters in {dir}: {e}") from None


def stat_snapshot(dir: str, keep: Callable[[str], bool] = lambda label: True) -> list[str]:
    """AeronStat-style lines: a header (time, driver pid, heartbeat age), a rule, one line per
    allocated counter whose label `keep` accepts."""
    reader = open_counters(dir)
    assert reader.cnc is not None  # open_counters maps them from the cnc.dat
    try:
        now_ms = time.time_ns() // 1_000_000
        age_ms = now_ms - reader.driver_heartbeat_ms
        closed = reader.cnc.driver_closed  # it marked its heartbeat so as it closed
        header = (
            f"{time.strftime('%H:%M:%S', time.localtime(now_ms / 1000))} - aeronio stat "
            f"(CnC {version_text(reader.cnc.cnc_version)}), pid {reader.driver_pid}, "
            + ("driver closed" if closed else f"heartbeat age {age_ms}ms")
        )
        lines = [header, STAT_RULE]
        if closed:
            lines.insert(1, f"DRIVER NOT RUNNING: it closed (pid {reader.driver_pid})")
        elif os.path.exists(os.path.join(dir, LOCK_FILE)):  # aeronio's driver: its lock says
            if not is_live(dir):
                lines.insert(1, f"DRIVER NOT RUNNING: its lock is free; the last heartbeat was "
                                f"{age_ms / 1000:.1f} s ago (pid {reader.driver_pid})")  # fmt: skip
        elif age_ms > DRIVER_TIMEOUT_MS:  # another driver (Aeron's): judged by its heartbeat
            lines.insert(1, f"DRIVER NOT RUNNING: no heartbeat for {age_ms / 1000:.1f} s, more "
                            f"than the {DRIVER_TIMEOUT_MS / 1000:g} s Aeron's clients allow "
                            f"(pid {reader.driver_pid})")  # fmt: skip
        for c in reader.for_each():
            if keep(c.label):
                lines.append(f"{c.id:3}: {c.value:>20,} - {c.label}")
    finally:
        reader.close()
    return lines


def run_streams(dir: str, out: TextIO | None = None) -> int:
    """Per-stream positions, backlogs and log memory, like Aeron's StreamStat/BacklogStat."""
    out = out or sys.stdout
    reader = open_counters(dir)
    try:
        lines = format_streams(streams(reader, dir))
    finally:
        reader.close()
    print("\n".join(lines) if lines else "no streams", file=out)
    return 0


def run_stat(
    dir: str,
    filter: str | None = None,
    watch: float | None = None,
    iterations: int | None = None,
    out: TextIO | None = None,
) -> int:
    """Print the counters once, or every `watch` seconds until Ctrl-C or `iterations`."""
    out = out or sys.stdout
    keep = label_filter(filter)
    printed = 0
    try:
        while True:
            if printed:
                print(file=out)
            print("\n".join(stat_snapshot(dir, keep)), file=out, flush=True)
            printed += 1
            if watch is None or (iterations is not None and printed >= iterations):
                return 0
            time.sleep(watch)
    except KeyboardInterrupt:
        return 0


def _iso(epoch_ms: int) -> str:
    when = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).astimezone()
    return when.isoformat(timespec="milliseconds")


def run_errors(dir: str, out: TextIO | None = None) -> int:
    """Print the driver's distinct-error log, like Aeron's ErrorStat."""
    out = out or sys.stdout
    if not os.path.isdir(dir):
        raise CommandError(f"no media driver directory {dir}")
    with open_cnc(dir) as cnc:
        try:
            observations = read_error_log(cnc.error_log_buffer)
        except ValueError as e:
            raise CommandError(f"the error log in {dir}/{CNC_FILE} is corrupt: {e}") from None
    for o in observations:
        print(
            f"{o.count} observations from {_iso(o.first_ms)} to {_iso(o.last_ms)} for:\n {o.text}",
            file=out,
        )
        print(file=out)
    print(f"{len(observations)} distinct errors observed.", file=out)
    return 0


LOSS_COLUMNS = (
    "OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, SESSION_ID, "
    "STREAM_ID, CHANNEL, SOURCE"
)


def run_loss(dir: str, out: TextIO | None = None) -> int:
    """Print the driver's loss report as CSV, like Aeron's LossStat: per image that lost data,
    its gaps (each NAKed, or filled when unreliable), their bytes, the first and last times."""
    out = out or sys.stdout
    path = os.path.join(dir, LOSS_REPORT_FILE)
    if not os.path.isdir(dir):
        raise CommandError(f"no media driver directory {dir}")
    try:
        entries = load_loss_report(path)
    except FileNotFoundError:
        raise CommandError(f"no loss report in {dir} ({LOSS_REPORT_FILE} missing)") from None
    except (LossReportError, OSError) as e:
        raise CommandError(f"cannot read {path}: {e}") from None
    print("#" + LOSS_COLUMNS, file=out)
    rows = csv.writer(out, lineterminator="\n")
    for entry in entries:
        rows.writerow((
            entry.observation_count, entry.total_bytes_lost, _iso(entry.first_observation_ms),
            _iso(entry.last_observation_ms), entry.session_id, entry.stream_id, entry.channel,
            entry.source,
        ))  # fmt: skip
    print(f"{len(entries)} entries read", file=out)
    return 0


def run_clean(base: str | None, out: TextIO | None = None) -> int:
    """Remove the directories dead drivers left (aeronio.driver.directories) and say so."""
    out = out or sys.stdout
    if base is not None and not os.path.isdir(base):
        raise CommandError(f"--base {base} is not a directory", 2)
    found = remove_dead_driver_dirs(base)
    for path, size in found.removed:
        print(f"removed {path} ({size / 1e6:.1f} MB): its driver is gone", file=out)
    for path, pid in found.live:
        print(f"kept {path}: its driver (pid {pid}) is running", file=out)
    for path in found.young:
        print(f"kept {path}: made less than {YOUNG_S:g} s ago", file=out)
    if not found.removed:
        print(f"nothing to remove under {base or default_base()}", file=out)
    return 0


def _add_driver_options(parser: argparse.ArgumentParser) -> None:
    """One --kebab-case option per DriverContext field, plus --config FILE."""
    parser.add_argument("--config", metavar="FILE", help="TOML or JSON file of driver options")
    defaults = DriverContext.__struct_defaults__
    for name, default in zip(option_names(), defaults, strict=True):
        default = STANDALONE_DEFAULTS.get(name, default)
        shown = "a fresh directory under /dev/shm" if name == "dir" else repr(default)
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            metavar="VALUE",
            default=argparse.SUPPRESS,
            help=f"(env {env_var_name(name)}; default {shown})",
        )


def run_driver(args: argparse.Namespace) -> int:
    """Run a standalone media driver with options from the command line, env and a file, over
    a standalone driver's defaults (STANDALONE_DEFAULTS)."""
    try:
        options = {
            name: parse_option_value(name, getattr(args, name), "--" + name.replace("_", "-"))
            for name in option_names()
            if hasattr(args, name)
        }
        ctx = DriverContext.from_sources(
            STANDALONE_DEFAULTS, config_file=args.config, env=os.environ, **options
        )
    except ConfigurationError as e:
        raise CommandError(str(e), 2) from None
    from aeronio.driver import standalone  # the driver process; imported only when run

    try:
        asyncio.run(standalone.run(ctx))
    except KeyboardInterrupt:
        pass
    except AeronError as e:
        raise CommandError(str(e), 1) from None
    except OSError as e:
        if (problem := dir_problem(e, ctx.dir)) is None:
            raise
        raise CommandError(f"--dir {ctx.dir}: {problem}", 1) from None
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `aeronio` command's parser, and its subcommands' parsers by name."""
    parser = argparse.ArgumentParser(prog="aeronio", description=__doc__)
    parser.add_argument("--version", action="version", version=f"aeronio {aeronio.__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of failures")
    commands = parser.add_subparsers(dest="command", required=True)
    driver = commands.add_parser(
        "driver",
        help="run a standalone media driver",
        description="Run a media driver until SIGINT/SIGTERM. Options: command line > "
        "AERONIO_* environment variables > --config file > defaults.",
    )
    _add_driver_options(driver)
    stat = commands.add_parser("stat", help="print a driver's counters, like AeronStat")
    stat.add_argument("--dir", help="driver directory (default: $AERONIO_DIR)")
    stat.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS")
    stat.add_argument("--filter", metavar="TEXT", help="labels containing TEXT (re:REGEX)")
    stat.add_argument("--iterations", type=int, metavar="N", help="with --watch: stop after N")
    streams_parser = commands.add_parser(
        "streams", help="per-stream positions, backlogs and log memory (like StreamStat)"
    )
    streams_parser.add_argument("--dir", help="driver directory (default: $AERONIO_DIR)")
    errors = commands.add_parser("errors", help="print a driver's distinct-error log")
    errors.add_argument("--dir", help="driver directory (default: $AERONIO_DIR)")
    loss = commands.add_parser("loss", help="print a driver's loss report, like LossStat")
    loss.add_argument("--dir", help="driver directory (default: $AERONIO_DIR)")
    demo = commands.add_parser("demo", help="IPC publisher and subscriber on an embedded driver")
    demo.add_argument("--count", type=int, default=1_000_000, help="messages to send")
    demo.add_argument("--size", type=int, default=32, help="message size in bytes (>= 8)")
    demo.add_argument("--stream-id", type=int, default=1001)
    demo.add_argument(
        "--udp", action="store_true", help="over UDP unicast on 127.0.0.1 instead of IPC"
    )
    _add_sample_commands(commands)
    archive_tool.add_commands(commands)
    clean = commands.add_parser(
        "clean", help="remove the directories of dead drivers (those whose lock is free)"
    )
    clean.add_argument("--base", help="where embedded drivers make them (default: /dev/shm)")
    logdump = commands.add_parser("logdump", help="print a log buffer's metadata and frames")
    logdump.add_argument("file")
    logdump.add_argument("--max-frames", type=int, default=100, help="frames shown per term")
    logdump.add_argument(
        "--data",
        type=int,
        nargs="?",
        const=64,
        default=0,
        metavar="BYTES",
        help="also show each message's payload, up to BYTES (64) as hex and text",
    )
    return parser, commands.choices


def main(argv: list[str] | None = None) -> int:
    """Run a command; its mistakes are one line on stderr (a traceback only with --debug)."""
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run_command(args, parser, commands["stat"])
    except BrokenPipeError:  # `aeronio stat | head`: the reader left; leave quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except archive_tool.ToolError as e:
        print(f"aeronio archive {args.action}: {e}", file=sys.stderr)
        return 1
    except CommandError as e:
        print(f"aeronio {args.command}: {e}", file=sys.stderr)
        return e.status
    except Exception as e:
        if args.debug:
            raise
        print(f"aeronio {args.command}: {type(e).__name__}: {e} (--debug shows where)",
              file=sys.stderr)  # fmt: skip
        return 1


def _run_command(
    args: argparse.Namespace, parser: argparse.ArgumentParser, stat: argparse.ArgumentParser
) -> int:
    if args.command == "driver":
        return run_driver(args)
    if args.command == "stat":
        if args.watch is not None and args.watch <= 0:
            stat.error("--watch must be a positive number of seconds")
        if args.iterations is not None and (args.watch is None or args.iterations < 1):
            stat.error("--iterations needs --watch and must be at least 1")
        return run_stat(driver_dir(args.dir), args.filter, args.watch, args.iterations)
    if args.command == "errors":
        return run_errors(driver_dir(args.dir))
    if args.command == "loss":
        return run_loss(driver_dir(args.dir))
    if args.command == "streams":
        return run_streams(driver_dir(args.dir))
    if args.command in ("ping", "pong"):
        return run_sample(args)
    if args.command == "rate":
        return run_rate(args)
    if args.command == "clean":
        return run_clean(args.base)
    if args.command == "archive":
        return archive_tool.run(args, aeronio.connect)
    if args.command == "demo":
        if args.size < 8 or args.count < 1:
            parser.error("--size must be at least 8 and --count at least 1")
        check_stream_ids(args, "--stream-id")
        channel = f"aeron:udp?endpoint=127.0.0.1:{_free_udp_port()}" if args.udp else "aeron:ipc"
        run_until_stopped(run_demo(args.count, args.size, args.stream_id, channel), endless=False)
    elif args.command == "logdump":
        return run_logdump(args.file, args.max_frames, args.data)
    return 0


def run_logdump(path: str, max_frames: int, data_bytes: int = 0, out: TextIO | None = None) -> int:
    """Print a log buffer's metadata and frames, like Aeron's LogInspector."""
    try:
        log = LogBuffers.open(path)
    except FileNotFoundError:
        raise CommandError(f"no such file {path}") from None
    except OSError as e:
        raise CommandError(f"{path} is not a log buffer: {e}") from None
    except ValueError as e:  # LogBuffers names the file
        raise CommandError(str(e)) from None
    try:
        dump_log(log, max_frames, out or sys.stdout, data_bytes)
    finally:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
