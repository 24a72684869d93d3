"""`aeronio archive ...`: run an archive (`serve`) and read an archive directory with no archive
running (`list`, `describe`, `verify`, `dump`), as the reference's ArchivingMediaDriver,
CatalogTool and SegmentInspector do."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from aeronio.archive import segments
from aeronio.archive.catalog import CATALOG_FILE_NAME, Catalog, CatalogError
from aeronio.archive.codecs import RecordingDescriptor
from aeronio.archive.context import ArchiveContext
from aeronio.errors import AeronError, ConfigurationError, dir_problem

if TYPE_CHECKING:
    from aeronio.client.aeron import Aeron

_SERVE_OPTIONS = (
    "control_channel",
    "control_stream_id",
    "local_control_channel",
    "local_control_stream_id",
    "recording_events_channel",
    "recording_events_stream_id",
    "segment_file_length",
    "file_sync_level",
    "catalog_file_sync_level",
    "max_catalog_entries",
)


class ToolError(Exception):
    """A failure reported as one line on stderr."""


def add_commands(commands: argparse._SubParsersAction) -> None:
    archive = commands.add_parser("archive", help="run or inspect an archive")
    actions = archive.add_subparsers(dest="action", required=True)
    serve = actions.add_parser("serve", help="run an archive (and a driver) until SIGINT/SIGTERM")
    serve.add_argument("--dir", required=True, help="archive directory")
    serve.add_argument("--driver-dir", help="a running driver's directory (default: embedded)")
    for name in _SERVE_OPTIONS:
        kind = str if "channel" in name and "stream" not in name else int
        serve.add_argument("--" + name.replace("_", "-"), dest=name, type=kind)
    listing = actions.add_parser("list", help="print every recording descriptor")
    listing.add_argument("--dir", required=True, help="archive directory")
    verify = actions.add_parser(
        "verify", help="recover recordings left active by a dead archive, check every segment"
    )
    verify.add_argument("--dir", required=True, help="archive directory")
    verify.add_argument(
        "--segments", action="store_true", help="a line for every segment, sound ones too"
    )
    describe = actions.add_parser("describe", help="one recording and its segment files")
    describe.add_argument("--dir", required=True, help="archive directory")
    describe.add_argument("recording_id", type=int)
    dump = actions.add_parser(
        "dump", help="the frames of a recording's segment, like SegmentInspector"
    )
    dump.add_argument("--dir", required=True, help="archive directory")
    dump.add_argument("recording_id", type=int)
    dump.add_argument("--segment", type=int, default=0, help="segment index (default 0)")
    dump.add_argument("--max-frames", type=int, default=100)


def run(
    args: argparse.Namespace, connect: Callable, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """Run an `archive` action; `serve` attaches to a driver with `connect(driver_dir)` (the
    top level's `aeronio.connect`, which launches an embedded driver when the dir is None).
    `list` and `verify` return 1 when they found something wrong (a corrupt catalog entry is
    reported, on `err` by `list`, and the others still listed and checked)."""
    try:
        if args.action == "serve":
            return _serve(args, connect)
        if not Path(args.dir).is_dir():
            raise ToolError(f"no archive directory {args.dir}")
        if args.action == "verify":
            return _verify(args.dir, args.segments, out)
        with Catalog(args.dir, readonly=True) as catalog:
            if args.action == "list":
                corrupt = 0
                for _, entry in catalog.entries():
                    if isinstance(entry, CatalogError):
                        print(f"aeronio archive list: {entry}", file=err)
                        corrupt += 1
                    else:
                        print(_describe(entry), file=out)
                return 1 if corrupt else 0
            elif args.action == "describe":
                _describe_one(catalog, args.recording_id, out)
            elif args.action == "dump":
                _dump(catalog, args.recording_id, args.segment, args.max_frames, out)
    except (CatalogError, segments.SegmentError, ConfigurationError, OSError) as e:
        raise ToolError(str(e)) from None
    return 0


def _describe(d: RecordingDescriptor) -> str:
    return (
        f"recordingId={d.recording_id} startPosition={d.start_position} "
        f"stopPosition={d.stop_position} startTimestamp={d.start_timestamp} "
        f"stopTimestamp={d.stop_timestamp} initialTermId={d.initial_term_id} "
        f"segmentFileLength={d.segment_file_length} termBufferLength={d.term_buffer_length} "
        f"mtuLength={d.mtu_length} sessionId={d.session_id} streamId={d.stream_id} "
        f"strippedChannel={d.stripped_channel} originalChannel={d.original_channel} "
        f"sourceIdentity={d.source_identity}"
    )


def _describe_one(catalog: Catalog, recording_id: int, out: TextIO) -> None:
    print(_describe(catalog.descriptor(recording_id)), file=out)
    layout = catalog.layout(recording_id)
    for index in segments.segment_indices(catalog.archive_dir, recording_id):
        path = catalog.archive_dir / layout.file_name(index)
        print(
            f"  {path.name}: positions [{layout.segment_base_position(index)}, "
            f"{layout.segment_base_position(index + 1)}), {path.stat().st_size} bytes",
            file=out,
        )


def _dump(catalog: Catalog, recording_id: int, index: int, max_frames: int, out: TextIO) -> None:
    layout = catalog.layout(recording_id)
    path = catalog.archive_dir / layout.file_name(index)
    start = layout.segment_offset(layout.start_position) if index == 0 else 0
    print(f"{path} from segment offset {start}:", file=out)
    for count, frame in enumerate(segments.iter_frame_headers(path, start)):
        if count == max_frames:
            print("...", file=out)
            break
        print(
            f"  offset={frame.segment_offset} frameLength={frame.frame_length} "
            f"type={frame.type} flags=0x{frame.flags:02x} termOffset={frame.term_offset} "
            f"sessionId={frame.session_id} streamId={frame.stream_id} termId={frame.term_id}",
            file=out,
        )


def _verify(archive_dir: str, every_segment: bool, out: TextIO) -> int:
    """Recover active recordings (needs the catalog unlocked: no archive running), then check
    every catalog entry and every segment of each recording: `recordingId=N OK`, or what is
    wrong and a line per damaged segment (per segment with `every_segment`); returns 1 if
    anything is wrong."""
    if not (Path(archive_dir) / CATALOG_FILE_NAME).exists():  # never make one here
        raise ToolError(f"no catalog at {Path(archive_dir) / CATALOG_FILE_NAME}")
    with Catalog(archive_dir, lock=True) as catalog:
        for recording_id in catalog.recover(_now_ms()):
            stop = catalog.stop_position(recording_id)
            print(f"recordingId={recording_id} recovered: stopPosition={stop}", file=out)
        faulty = 0
        for recording_id, entry in catalog.entries():
            if isinstance(entry, CatalogError):
                print(f"recordingId={recording_id} {entry}", file=out)
                faulty += 1
                continue
            reports = segments.check_segments(
                archive_dir, catalog.layout(recording_id), entry.stop_position
            )
            damaged = sum(report.files for report in reports if report.problem is not None)
            total = sum(report.files for report in reports)
            summary = f"{damaged} of {total} segments damaged" if damaged else "OK"
            print(f"recordingId={recording_id} {summary}", file=out)
            for report in reports:
                if report.problem or every_segment:
                    print(
                        f"  {report.file_name} positions [{report.first}, {report.end}): "
                        f"{report.problem or 'OK'}",
                        file=out,
                    )
            faulty += damaged > 0
    return 1 if faulty else 0


def _serve(args: argparse.Namespace, connect: Callable) -> int:
    options = {n: getattr(args, n) for n in _SERVE_OPTIONS if getattr(args, n) is not None}
    try:
        ctx = ArchiveContext(archive_dir=args.dir, **options)
    except ConfigurationError as e:
        raise ToolError(str(e)) from None
    try:
        asyncio.run(_serve_until_signal(ctx, connect(args.driver_dir)))
    except KeyboardInterrupt:
        pass
    except (AeronError, CatalogError) as e:
        raise ToolError(str(e)) from None
    except OSError as e:
        if (problem := dir_problem(e, args.dir)) is None:
            raise
        raise ToolError(f"--dir {args.dir}: {problem}") from None
    return 0


async def _serve_until_signal(
    ctx: ArchiveContext, connection: contextlib.AbstractAsyncContextManager[Aeron]
) -> None:
    from aeronio.archive.archive import Archive  # the service: imported only when run

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with connection as aeron:
        async with Archive(aeron, ctx) as service:
            print(
                f"aeronio archive pid {os.getpid()} on {ctx.archive_dir} "
                f"(driver {aeron.driver_dir}, control {ctx.control_channel} "
                f"stream {ctx.control_stream_id})",
                flush=True,
            )
            # until a signal, or the archive ends by itself (its driver lost: raised)
            waits = [
                asyncio.ensure_future(stop.wait()),
                asyncio.ensure_future(service.wait_ended()),
            ]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            if waits[1].done() and not waits[1].cancelled():
                waits[1].result()
    print("aeronio archive stopped", file=sys.stderr, flush=True)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
