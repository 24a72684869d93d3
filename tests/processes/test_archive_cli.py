"""`aeronio archive ...` as a user runs it: `serve` in a subprocess (its own embedded driver),
a client here recording through that driver, then `list`, `describe`, `dump` and `verify`."""

import asyncio
import re
import signal
import subprocess
import sys

import aeronio
from aeronio import archive
from tests.support.child import Child

ARCHIVE = [sys.executable, "-m", "aeronio.cli", "archive"]
CHANNELS = ["--control-channel", "aeron:ipc", "--recording-events-channel", "aeron:ipc"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ARCHIVE, *args], capture_output=True, text=True, timeout=60)


async def test_serve_then_read_the_directory(tmp_path):
    directory = str(tmp_path / "archive")
    serve = Child(
        [*ARCHIVE, "serve", "--dir", directory, "--segment-file-length", "131072", *CHANNELS],
        "archive serve",
    )
    try:
        ready = await serve.aexpect("aeronio archive pid", timeout=30)
        driver_dir = re.search(r"\(driver (\S+),", ready).group(1)
        async with aeronio.connect(driver_dir) as aeron:
            async with archive.connect(aeron, **archive.LOCAL) as client:
                channel = "aeron:ipc?term-length=65536"
                await client.start_recording(channel, 7)
                publication = await aeron.add_exclusive_publication(channel, 7)
                for i in range(2000):
                    await publication.offer(i.to_bytes(4, "little") * 25)
                async with asyncio.timeout(10):
                    while await client.get_recording_position(0) < publication.position:
                        await asyncio.sleep(0.01)
                await client.stop_recording(channel, 7)
                end = publication.position
        refused = run("verify", "--dir", directory)
        assert refused.returncode == 1
        assert "in use by a running archive" in refused.stderr
    finally:
        serve.send_signal(signal.SIGTERM)
    assert serve.wait(30) == 0, serve.describe()

    listed = run("list", "--dir", directory)
    assert listed.returncode == 0, listed.stderr
    assert re.fullmatch(
        rf"recordingId=0 startPosition=0 stopPosition={end} .* streamId=7 "
        rf"strippedChannel=aeron:ipc originalChannel={re.escape(channel)} "
        r"sourceIdentity=aeron:ipc\n",
        listed.stdout,
    )
    described = run("describe", "--dir", directory, "0").stdout.splitlines()
    segments = (end + 131071) // 131072
    assert described[1:] == [
        f"  0-{i}.rec: positions [{i * 131072}, {(i + 1) * 131072}), 131072 bytes"
        for i in range(segments)
    ]
    dumped = run("dump", "--dir", directory, "0", "--max-frames", "3").stdout.splitlines()
    assert dumped[1].startswith("  offset=0 frameLength=132 type=1 flags=0xc0 termOffset=0 ")
    assert dumped[2].startswith("  offset=160 frameLength=132 type=1 ")
    assert dumped[4] == "..."
    verified = run("verify", "--dir", directory)
    assert (verified.returncode, verified.stdout) == (0, "recordingId=0 OK\n")


def test_bad_arguments_are_one_line_errors(tmp_path):
    missing = run("list", "--dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 1
    assert missing.stderr == f"aeronio archive list: no archive directory {tmp_path / 'nowhere'}\n"
    (tmp_path / "empty").mkdir()
    no_catalog = run("describe", "--dir", str(tmp_path / "empty"), "0")
    assert no_catalog.returncode == 1 and "no catalog at" in no_catalog.stderr
    bad = run("serve", "--dir", str(tmp_path / "a"), "--segment-file-length", "1000")
    assert bad.returncode == 1
    assert "segment_file_length 1000 must be a power of two" in bad.stderr
