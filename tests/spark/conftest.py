"""Fixtures for the Spark tests: one local SparkSession shared by the modules, and a media driver
with an archive on an event loop in a thread of the test process (Spark's Python workers, other
processes, read the archive's files and attach to the driver's directory)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import pytest

import aeronio
from aeronio import archive
from tests.support.procs import wait_recorded

TERM = 64 * 1024
SEGMENT = 128 * 1024  # two terms: recordings span many segment files
EVENTS = {"recording_events_channel": "aeron:ipc", "recording_events_stream_id": 30}
TEST_CONF = {  # beside aeronio.spark.LOCAL_CONF
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.worker.faulthandler.enabled": "true",
}


def _spark_or_skip():
    pytest.importorskip("pyarrow", reason='needs pyarrow: pip install -e ".[spark]"')
    pytest.importorskip("pyspark.sql.datasource", reason='needs PySpark: pip install -e ".[spark]"')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("needs Java 17 for Spark: apt-get install openjdk-17-jdk-headless")


class LocalSpark:
    """The local SparkSession the modules share (a SparkContext and its Python workers started
    for each would cost seconds), made when first asked for; `stop` ends it for a module that
    needs a SparkContext of its own (a process holds one at a time), and the next module that
    asks makes a new one."""

    def __init__(self) -> None:
        self.session = None

    def get(self):
        if self.session is None:
            _spark_or_skip()
            # this interpreter's aeronio, whatever is set
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
            import aeronio.spark

            self.session = aeronio.spark.local_session(app_name="aeronio-tests", conf=TEST_CONF)
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.session = None


@pytest.fixture(scope="session")
def local_spark():
    """The shared LocalSpark, stopped at the session's end."""
    shared = LocalSpark()
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def spark(local_spark):
    """A local SparkSession with the aeronio format registered, shared by the modules (a test
    unsets the settings it sets); a streaming query a failed test left is stopped."""
    session = local_spark.get()
    yield session
    for query in session.streams.active:
        query.stop()


class Recorded(NamedTuple):
    recording_id: int
    session_id: int
    stream_id: int
    channel: str
    rows: list[tuple[int, int, bytes]]  # (position of the message, reserved value, payload)
    end: int


def frames_length(length: int, mtu: int) -> int:
    """Bytes of the frames of a message of `length` bytes (fragmented over `mtu`)."""
    payload = mtu - 32
    if length <= payload:
        return (32 + length + 31) & ~31
    full, rest = divmod(length, payload)
    return full * mtu + ((32 + rest + 31) & ~31 if rest else 0)


class Host:
    """A driver and an archive on a loop in a thread; `run` runs a coroutine there."""

    def __init__(self, archive_dir: Path, segment_length: int = SEGMENT):
        self.archive_dir = Path(archive_dir)
        self.segment_length = segment_length
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.publications: dict[int, object] = {}
        self.run(self._start())

    def run(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        self.aeron = await aeronio.connect(publication_linger_ns=10_000_000)
        self.archive = archive.Archive.launch(
            self.aeron, archive_dir=self.archive_dir, segment_file_length=self.segment_length,
            control_channel="aeron:ipc", **EVENTS,
        )  # fmt: skip
        await self.archive.start()
        self.client = await archive.connect(self.aeron, **(archive.LOCAL | EVENTS))

    @property
    def driver_dir(self) -> str:
        return self.aeron.driver_dir

    async def start(self, channel: str, stream_id: int):
        """Start recording, and an exclusive publication; returns (recording id, publication)."""
        await self.client.start_recording(channel, stream_id)
        return await self.add_publisher(channel, stream_id)

    async def add_publisher(self, channel: str, stream_id: int):
        """An exclusive publication on a stream being recorded (a new session: a new
        recording); returns (recording id, publication)."""
        publication = await self.aeron.add_exclusive_publication(channel, stream_id)
        async with asyncio.timeout(10):
            while True:
                rid = await self.client.find_last_matching_recording(
                    0, channel.split("?")[0], stream_id, publication.session_id
                )
                if rid >= 0:
                    break
                await asyncio.sleep(0.005)
        self.publications[rid] = publication
        return rid, publication

    async def publish(self, rid: int, payloads, reserved: int = 0) -> list[tuple[int, int, bytes]]:
        """Offer the payloads, wait until they are recorded; returns their rows."""
        publication = self.publications[rid]
        mtu = self.archive.catalog.descriptor(rid).mtu_length
        rows = []
        for payload in payloads:
            end = await publication.offer(payload)
            rows.append((end - frames_length(len(payload), mtu), reserved, bytes(payload)))
        await wait_recorded(self.client, rid, publication.position, 20)
        return rows

    async def stop(self, rid: int, channel: str, stream_id: int) -> None:
        await self.client.stop_recording(channel, stream_id)
        publication = self.publications.pop(rid)
        await publication.close()

    async def record(self, channel: str, stream_id: int, payloads, stop: bool = True) -> Recorded:
        rid, publication = await self.start(channel, stream_id)
        rows = await self.publish(rid, payloads)
        end = publication.position
        if stop:
            await self.stop(rid, channel, stream_id)
        return Recorded(rid, publication.session_id, stream_id, channel, rows, end)

    def close(self) -> None:
        async def _close():
            for publication in self.publications.values():
                await publication.close()
            await self.client.close()
            await self.archive.close()
            await self.aeron.close()

        self.run(_close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def host(request, tmp_path_factory):
    """A driver and an archive (Host) for the module."""
    h = Host(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "archive")
    yield h
    h.close()


def rows_of(recorded: Recorded) -> list[tuple]:
    """The rows the raw layout gives for a recording, in position order."""
    r = recorded
    return [
        (r.recording_id, r.session_id, r.stream_id, r.channel, p, len(d), rv, d)
        for p, rv, d in r.rows
    ]


# Queries on one DataFrame, in an order where each follows each other one somewhere: count,
# filtered count, min and max position, rows, filtered rows.
ORDER = "CWRWMWFWCRMRFRCMFMCFC"


def scoped_queries(df, expected: list[tuple], filtered: str, position: int) -> None:
    """ORDER's queries on `df`, each answering as the unfiltered rows `expected` and Spark's
    filter `filtered` (which keeps the rows at `position` and after) do."""
    from pyspark.sql.functions import max as max_
    from pyspark.sql.functions import min as min_

    name = df.columns.index("position")
    kept = sorted(r for r in expected if r[name] >= position)
    answers = {
        "C": (df.count, len(expected)),
        "F": (lambda: df.where(filtered).count(), len(kept)),
        "M": (
            lambda: tuple(df.agg(min_("position"), max_("position")).first()),
            (min(r[name] for r in expected), max(r[name] for r in expected)),
        ),
        "R": (lambda: sorted(tuple(r) for r in df.collect()), sorted(expected)),
        "W": (lambda: sorted(tuple(r) for r in df.where(filtered).collect()), kept),
    }
    assert len(set(zip(ORDER, ORDER[1:], strict=False))) == len(answers) * (len(answers) - 1)
    for i, query in enumerate(ORDER):
        ask, want = answers[query]
        assert ask() == want, f"query {i} ({query}) of {ORDER}"
