"""Which of aeronio's files a message and a recording cross: a trace, not a benchmark.

    python bench/walk.py message      # IPC: await offer in one process, async for in another
    python bench/walk.py recording    # start_recording -> segment file -> a Spark source row

Every process involved runs under a profile hook that notes the file of each Python function
of aeronio's that runs (what runs while a module is imported, once, left out). The compiled
core (cython_core/*.pxi, one module) is not seen by the hook: a walk that shows no Python file
for a phase ran in the core alone. Each role reports its files per phase: `setup` (connect,
add, wait for the other side), `data` (the messages) or `record` and `spark`, and `close`.
The message walk runs a standalone driver, a publisher and a subscriber as three processes; the
recording walk runs an embedded driver and archive, then the Python Spark source's planning and
reading in the same process (no SparkSession: the same code a Python worker runs).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import subprocess
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

import aeronio

ROOT = Path(aeronio.__file__).resolve().parent.parent
N = 200
STREAM = 1001


def _importing(frame) -> bool:
    """Whether `frame` runs inside the import of a module (a module body other than this
    script's below it)."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_code.co_filename != __file__:
            return True
        frame = frame.f_back
    return False


class Trace:
    """Files seen per phase, through sys.setprofile on this and later threads."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.seen: dict[str, set[str]] = defaultdict(set)
        self._package = str(ROOT / "aeronio")

    def _hook(self, frame, event, arg) -> None:
        if event == "call":
            code = frame.f_code
            # Functions only, and not while a module is imported: what runs on import runs once.
            if code.co_flags & inspect.CO_OPTIMIZED and code.co_filename.startswith(self._package):
                name = str(Path(code.co_filename).relative_to(ROOT))
                if name not in self.seen[self.phase] and not _importing(frame):
                    self.seen[self.phase].add(name)

    def start(self) -> None:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)

    def stop(self) -> dict[str, list[str]]:
        sys.setprofile(None)
        threading.setprofile(None)
        return {phase: sorted(files) for phase, files in self.seen.items()}


# -- the message walk: three processes ------------------------------------------------------------


async def _publisher(directory: str, trace: Trace) -> None:
    async with aeronio.connect(dir=directory) as aeron:
        publication = await aeron.add_publication("aeron:ipc", STREAM)
        while not publication.is_connected:
            await asyncio.sleep(0.01)
        trace.phase = "data"
        for i in range(N):
            await publication.offer(i.to_bytes(8, "little"))
        trace.phase = "close"


async def _subscriber(directory: str, trace: Trace) -> None:
    async with aeronio.connect(dir=directory) as aeron:
        subscription = await aeron.add_subscription("aeron:ipc", STREAM)
        print("ready", flush=True)
        received = 0
        async for message in subscription:
            if trace.phase == "setup":
                trace.phase = "data"
            assert int.from_bytes(message.data, "little") == received
            received += 1
            if received == N:
                break
        trace.phase = "close"


def _role(role: str, directory: str) -> None:
    trace = Trace()
    if role == "driver":
        trace.phase = "all"
    trace.start()
    try:
        if role == "driver":
            from aeronio.cli import main

            main(["driver", "--dir", directory])
        else:
            asyncio.run((_publisher if role == "publisher" else _subscriber)(directory, trace))
    finally:
        seen = trace.stop()
    print(json.dumps(seen), flush=True)


def walk_message() -> dict[str, dict[str, list[str]]]:
    with tempfile.TemporaryDirectory(prefix="aeronio-walk-") as tmp:
        directory = str(Path(tmp) / "driver")
        me = [sys.executable, __file__, "--role"]
        driver = subprocess.Popen([*me, "driver", directory], stdout=subprocess.PIPE, text=True)
        while not (Path(directory) / "cnc.dat").exists():
            if driver.poll() is not None:
                raise SystemExit("the driver exited")
            threading.Event().wait(0.05)
        subscriber = subprocess.Popen(
            [*me, "subscriber", directory], stdout=subprocess.PIPE, text=True
        )
        assert subscriber.stdout.readline().strip() == "ready"
        publisher = subprocess.run(
            [*me, "publisher", directory], capture_output=True, text=True, check=True
        )
        out = {"publisher": json.loads(publisher.stdout.splitlines()[-1])}
        out["subscriber"] = json.loads(subscriber.communicate(timeout=60)[0].splitlines()[-1])
        driver.terminate()
        out["driver"] = json.loads(driver.communicate(timeout=60)[0].splitlines()[-1])
        return out


# -- the recording walk: one process ---------------------------------------------------------------


async def _record(archive_dir: str, trace: Trace) -> None:
    from aeronio import archive

    driver_dir = str(Path(archive_dir).parent / "driver")
    async with aeronio.connect(dir=driver_dir, dir_delete_on_shutdown=True) as aeron:
        async with archive.Archive.launch(aeron, archive_dir=archive_dir, **archive.LOCAL_ARCHIVE):
            async with archive.connect(aeron, **archive.LOCAL) as client:
                publication = await aeron.add_publication("aeron:ipc", STREAM)
                trace.phase = "record"
                await client.start_recording("aeron:ipc", STREAM)
                for i in range(N):
                    await publication.offer(i.to_bytes(8, "little"))
                recording = (await client.list_recordings())[0]
                while (
                    await client.get_recording_position(recording.recording_id)
                    < publication.position
                ):
                    await asyncio.sleep(0.01)
                await client.stop_recording("aeron:ipc", STREAM)
                trace.phase = "close"


def walk_recording() -> dict[str, dict[str, list[str]]]:
    from aeronio.spark.source import AeronioDataSource

    with tempfile.TemporaryDirectory(prefix="aeronio-walk-") as tmp:
        archive_dir = str(Path(tmp) / "archive")
        trace = Trace()
        trace.start()
        try:
            asyncio.run(_record(archive_dir, trace))
            trace.phase = "spark"
            source = AeronioDataSource({"archive": archive_dir})
            reader = source.reader(source.schema())
            rows = [row for part in reader.partitions() for row in _rows(reader.read(part))]
        finally:
            seen = trace.stop()
        assert len(rows) == N, len(rows)
        return {"archive and Spark source": seen}


def _rows(batches):
    for batch in batches:
        yield from (batch.to_pylist() if hasattr(batch, "to_pylist") else [batch])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("walk", nargs="?", choices=["message", "recording"])
    parser.add_argument("--role", nargs=2, metavar=("ROLE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        _role(*args.role)
        return
    result = walk_message() if args.walk == "message" else walk_recording()
    everything: set[str] = set()
    for role, phases in result.items():
        for phase, files in phases.items():
            everything.update(files)
            print(f"{role} / {phase}: {len(files)} files")
            for name in files:
                print(f"    {name}")
    print(f"all roles and phases: {len(everything)} distinct files")


if __name__ == "__main__":
    main()
