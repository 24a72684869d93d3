"""The recorder: an aeronio archive on the standalone driver, recording the feed's IPC stream and
the bars stream into segment files (Spark reads them; so can anyone, with no archive running).

    python examples/market_data/recorder.py --dir DRIVER_DIR --archive ARCHIVE_DIR

Says `ready` with the ticks' recording subscription's registration id once recording is on
(before the feed starts, so the recording holds every tick), `status` every second (the ticks'
recording and its position), and stops recording and the archive at SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from status import Meter, run_script, say
from ticks import BARS, BARS_STREAM, IPC_TICKS, TICK, TICKS_STREAM

import aeronio
from aeronio import archive

FRAME = (32 + TICK.itemsize + 31) & ~31  # a tick's frame in the log, header and padding included


async def report_progress(client: archive.ArchiveClient) -> None:
    """`status` every second: the feed's recording (-1 until it exists) and its position."""
    recording_id, meter = -1, Meter()
    while True:
        await asyncio.sleep(1)
        if recording_id < 0:
            found = await client.list_recordings_for_uri("aeron:ipc", TICKS_STREAM)
            recording_id = found[-1].recording_id if found else -1
        position = 0
        if recording_id >= 0:
            position = await client.get_recording_position(recording_id)
            if position == archive.NULL_POSITION:  # stopped: the feed has gone
                position = await client.get_stop_position(recording_id)
        meter.add(position // FRAME - meter.count)
        say("status", {"recording": recording_id, "position": position, "rate": meter.rate()})


async def main(args: argparse.Namespace) -> None:
    """Record until cancelled, then stop recording."""
    async with (
        aeronio.connect(args.dir) as aeron,
        archive.Archive.launch(aeron, archive_dir=args.archive, **archive.LOCAL_ARCHIVE),
        archive.connect(aeron, **archive.LOCAL) as client,
    ):
        subscription_id = await client.start_recording(IPC_TICKS, TICKS_STREAM)
        await client.start_recording(BARS, BARS_STREAM)
        say("ready", {"subscription": subscription_id})
        try:
            await report_progress(client)
        finally:
            await client.stop_recording(IPC_TICKS, TICKS_STREAM)
            await client.stop_recording(BARS, BARS_STREAM)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="the standalone driver's directory")
    parser.add_argument("--archive", type=Path, required=True, help="the archive's directory")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
