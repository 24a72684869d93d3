"""Remote reads (option archive_control): an archive in a process of its own (`aeronio archive
serve`), reached only over UDP on 127.0.0.1, and a Spark cluster whose executors are processes
of their own (`local-cluster[2,1,1024]`): the planner lists recordings through the archive
client, and each partition is replayed into an embedded driver of the executor that reads it.
Every row is what was published, byte for byte; messages are neither split nor read twice where
partitions or position bounds fall inside them; errors name the channel or the recording."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import aeronio
from aeronio import archive
from tests.spark.conftest import (
    TERM,
    TEST_CONF,
    Recorded,
    _spark_or_skip,
    frames_length,
    rows_of,
)
from tests.support.child import Child
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

SEGMENT = 2 * TERM
IPC = f"aeron:ipc?term-length={TERM}"
MTU = 1408  # an IPC publication's
RECORD = np.dtype([("ts", "<i8"), ("symbol", "<i4"), ("price", "<f8"), ("qty", "<i4")])
FIXED_SCHEMA = "ts long, symbol int, price double, qty int"
RAW = ("recording_id", "session_id", "stream_id", "channel", "position", "length")


# -- the archive, in a process of its own --------------------------------------------------------


class Publisher:
    """A client of the archive process's driver (on a loop in a thread): starts recordings
    (through the archive's local control channel), publishes, stops them."""

    def __init__(self, driver_dir: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self._start(driver_dir))

    def run(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self, driver_dir: str) -> None:
        self.aeron = await aeronio.connect(driver_dir)
        self.client = await archive.connect(self.aeron, **archive.LOCAL)

    async def record(self, stream_id: int, payloads, stop: bool = True) -> Recorded:
        await self.client.start_recording("aeron:ipc", stream_id)
        publication = await self.aeron.add_exclusive_publication(IPC, stream_id)
        rid = -1
        async with asyncio.timeout(10):
            while rid < 0:
                with contextlib.suppress(archive.ArchiveError):  # (an empty catalog, at first)
                    rid = await self.client.find_last_matching_recording(
                        0, "aeron:ipc", stream_id, publication.session_id
                    )
                await asyncio.sleep(0.005)
        rows = []
        for payload in payloads:
            end = await publication.offer(payload)
            rows.append((end - frames_length(len(payload), MTU), 0, bytes(payload)))
        async with asyncio.timeout(20):
            while await self.client.get_recording_position(rid) < publication.position:
                await asyncio.sleep(0.002)
        end = publication.position
        if stop:
            await self.client.stop_recording("aeron:ipc", stream_id)
            await publication.close()
        else:
            self.live = publication
        return Recorded(rid, publication.session_id, stream_id, "aeron:ipc", rows, end)

    def close(self) -> None:
        async def _close():
            await self.client.close()
            await self.aeron.close()

        with contextlib.suppress(Exception):
            self.run(_close(), 20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def varied(count: int, seed: int) -> list[bytes]:
    """Small messages and some over the MTU (fragmented), so that terms end in PADs."""
    rng = random.Random(seed)
    return [
        i.to_bytes(4, "little") + rng.randbytes(rng.choice([0, 28, 100, 500, 1400, 3000, 8000]))
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(control channel, publisher, recordings): `aeronio archive serve` with its control
    channel on UDP 127.0.0.1, and what the test recorded through its driver."""
    archive_dir = tmp_path_factory.mktemp("remote") / "archive"
    control = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    child = Child(
        [
            sys.executable, "-m", "aeronio.cli", "archive", "serve", "--dir", str(archive_dir),
            "--control-channel", control, "--recording-events-channel", "aeron:ipc",
            "--segment-file-length", str(SEGMENT),
        ],
        "archive",
    )  # fmt: skip
    publisher = None
    try:
        ready = child.expect("aeronio archive pid", timeout=20)
        driver_dir = ready.split("(driver ", 1)[1].split(",", 1)[0]
        publisher = Publisher(driver_dir)
        recorded = {"a": publisher.run(publisher.record(101, varied(700, 1)))}
        records = np.zeros(3000, RECORD)
        rng = np.random.default_rng(3)
        records["ts"] = np.arange(3000) * 1000 + 1_700_000_000_000
        records["symbol"] = rng.integers(0, 50, 3000)
        records["price"] = rng.random(3000) * 100
        records["qty"] = rng.integers(-1000, 1000, 3000)
        recorded["records"] = records
        recorded["fixed"] = publisher.run(publisher.record(102, [r.tobytes() for r in records]))
        recorded["archive_dir"] = archive_dir  # for the JVM read of the files
        recorded["live"] = publisher.run(publisher.record(103, varied(200, 4), stop=False))
        yield control, publisher, recorded
    finally:
        if publisher is not None:
            publisher.close()
        child.stop()


# -- a cluster of executor processes -------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, local_spark):
    """A SparkSession on `local-cluster[2,1,1024]` (two executors, processes of their own, run
    from the pyspark package), with the aeronio format and the probe (tests/spark/probe.py); the
    shared local session stops first (one SparkContext at a time)."""
    _spark_or_skip()
    local_spark.stop()
    import pyspark
    from pyspark import cloudpickle

    import aeronio.spark
    from tests.spark import probe

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    session = aeronio.spark.local_session(
        "local-cluster[2,1,1024]", "aeronio-remote-tests", conf=TEST_CONF
    )
    context = session.sparkContext
    work = None
    try:
        home = context._jvm.java.lang.System.getenv("SPARK_HOME")
        work = Path(home or ".") / "work"
        cloudpickle.register_pickle_by_value(probe)
        probe.ProbeSource.probe_dir = str(tmp_path_factory.mktemp("probe"))
        session.dataSource.register(probe.ProbeSource)
        deadline = time.monotonic() + 180  # two JVMs to start, on a busy host
        while context._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver, 2 executors
            assert time.monotonic() < deadline, "the executors did not register within 180 s"
            time.sleep(0.1)
        yield session
    finally:
        app = context.applicationId
        session.stop()
        if work is not None:  # the executors' directories, made in SPARK_HOME/work
            shutil.rmtree(work / app, ignore_errors=True)
            with contextlib.suppress(OSError):
                work.rmdir()


def read(spark, control: str, fmt: str = "aeronio", **options):
    reader = spark.read.format(fmt).option("archive_control", control)
    schema = options.pop("schema", None)
    if schema is not None:
        reader = reader.schema(schema)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def raw_rows(recorded: Recorded) -> list[tuple]:
    return [(*r[:6], r[7]) for r in rows_of(recorded)]


# -- reads ---------------------------------------------------------------------------------------


def test_rows_are_replayed_in_executor_processes(cluster, served):
    from tests.spark import probe

    control, _, recorded = served
    a = recorded["a"]
    probe_dir = Path(probe.ProbeSource.probe_dir)
    df = read(cluster, control, "aeronio_probe", recording_ids=a.recording_id)
    df = df.select(*RAW, "data")
    assert df.rdd.getNumPartitions() == -(-a.end // SEGMENT)  # a partition per segment
    assert rows(df) == raw_rows(a)
    assert any(len(d) > MTU for _, _, d in a.rows)  # fragmented messages among them
    notes = probe.notes(probe_dir)
    assert sorted(n[3:] for n in notes) == [
        (low, min(low + SEGMENT, a.end)) for low in range(0, a.end, SEGMENT)
    ]
    pids = {n[0] for n in notes}
    executors = {n[1] for n in notes}
    driver_jvm = cluster.sparkContext._gateway.proc.pid
    assert os.getpid() not in pids
    assert len(executors) == 2, notes  # two executor JVMs read partitions
    assert driver_jvm not in executors and 0 not in executors
    assert len(pids) >= 2  # and their Python workers are processes of their own


def test_partitions_of_whole_terms_and_several_recordings(cluster, served):
    control, _, recorded = served
    fixed, live = recorded["fixed"], recorded["live"]
    ids = f"{fixed.recording_id},{live.recording_id}"
    df = read(cluster, control, recording_ids=ids, max_partition_bytes="64k")
    assert df.rdd.getNumPartitions() == -(-fixed.end // TERM) + -(-live.end // TERM)
    assert rows(df.select(*RAW, "data")) == sorted(raw_rows(fixed) + raw_rows(live))


def test_fixed_layout(cluster, served):
    control, _, recorded = served
    fixed, records = recorded["fixed"], recorded["records"]
    df = read(
        cluster, control, schema=f"position long, {FIXED_SCHEMA}", layout="fixed",
        metadata_columns="position", stream_id=102,
    )  # fmt: skip
    got = df.orderBy("position").toPandas()
    assert list(got["position"]) == [p for p, _, _ in fixed.rows]
    for name in RECORD.names:
        assert np.array_equal(got[name].to_numpy(), records[name]), name


def test_bounds_inside_messages_neither_split_nor_repeat_them(cluster, served):
    """Bounds that fall inside fragmented messages: each message is read by the range where it
    starts, whole (the replay reads on past the end), and by no other."""
    control, _, recorded = served
    a = recorded["a"]
    every = raw_rows(a)
    inside = [
        p + MTU + 64 for p, _, d in a.rows if len(d) > 2 * (MTU - 32) and p % TERM < TERM // 2
    ]
    cuts = sorted({0, inside[3], TERM * 5 + 32, inside[-5], a.end})
    got = []
    for low, high in zip(cuts, cuts[1:], strict=False):
        part = rows(
            read(
                cluster, control, recording_ids=a.recording_id, start_position=low,
                end_position=high,
            ).select(*RAW, "data")
        )  # fmt: skip
        assert part == [r for r in every if low <= r[4] < high]
        got += part
    assert sorted(got) == every
    # the same through a filter on position (Spark's)
    low, high = cuts[1], cuts[2]
    df = read(cluster, control, recording_ids=a.recording_id).select(*RAW, "data")
    assert rows(df.where(f"position >= {low} and position < {high}")) == [
        r for r in every if low <= r[4] < high
    ]


def test_an_active_recording_is_read_to_its_recorded_position(cluster, served):
    control, _, recorded = served
    live = recorded["live"]
    df = read(cluster, control, stream_id=live.stream_id).select(*RAW, "data")
    assert rows(df) == raw_rows(live)


# -- errors --------------------------------------------------------------------------------------


def jobs_started(spark, group: str) -> list[int]:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_an_unreachable_archive_fails_on_the_driver(cluster):
    nowhere = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    cluster.sparkContext.setJobGroup("unreachable", "an unreachable archive")
    try:
        expected = f"no archive answers on archive control channel '{nowhere}' stream 10"
        with pytest.raises(Exception, match=re.escape(expected)):
            read(cluster, nowhere, archive_timeout="1").collect()
    finally:
        cluster.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert jobs_started(cluster, "unreachable") == []  # no task ran


def test_a_recording_that_does_not_exist(cluster, served):
    control, _, _ = served
    cluster.sparkContext.setJobGroup("unknown", "an unknown recording")
    try:
        with pytest.raises(
            Exception, match=r"recording 99 is not in the archive on archive control channel"
        ):
            read(cluster, control, recording_ids="0,99").collect()
    finally:
        cluster.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert jobs_started(cluster, "unknown") == []


def test_a_replay_the_archive_refuses_names_the_recording(served):
    """What a task meets when a planned recording is gone: the archive's refusal, named."""
    from aeronio.spark import remote
    from aeronio.spark.decode import Decoder, raw_schema
    from aeronio.spark.reader import Part
    from aeronio.spark.recordings import Recording, SourceError

    control, _, _ = served
    gone = Recording(77, 1, 1, "aeron:ipc", 0, TERM, 0, TERM, SEGMENT, MTU)
    part = Part(gone, 0, 0, TERM, TERM)
    where = remote.Remote(control, 10, 5.0)
    with pytest.raises(SourceError, match="recording 77 on archive control channel .* refused"):
        list(remote.read_part(where, part, Decoder(raw_schema(), "raw")))


def test_a_replay_of_frames_that_make_no_whole_message_fails(served):
    """A segment whose BEGIN flag is lost: the replay's fragments make no message, and the
    task fails naming where (or, with fail_on_data_loss false, skips that message alone)."""
    from aeronio.spark import remote
    from aeronio.spark.decode import Decoder, raw_schema
    from aeronio.spark.reader import split
    from aeronio.spark.recordings import DataLossError, Selection

    control, publisher, recorded = served
    damaged = publisher.run(publisher.record(104, [bytes([i]) * 3000 for i in range(10)]))
    p = damaged.rows[4][0]  # 3000 bytes: three frames
    path = recorded["archive_dir"] / f"{damaged.recording_id}-0.rec"
    with open(path, "r+b") as f:
        f.seek(p + 5)
        f.write(b"\x00")
    where = remote.Remote(control, 10, 10.0)
    (r,), _ = remote.list_recordings(where, Selection(frozenset([damaged.recording_id])))
    (part,) = split(r, r.start_position, r.stop_position, r.stop_position, None)
    decoder = Decoder(raw_schema(), "raw")
    with pytest.raises(DataLossError) as e:
        list(remote.read_part(where, part, decoder))
    assert str(e.value) == (
        f"recording {r.recording_id}: the frames at position {p} of the replay from "
        f"{where.where()} are not a whole message (a fragment without its first or last, or a "
        "frame of unknown type): the segment is damaged (option fail_on_data_loss false skips "
        "it)"
    )
    batches = list(remote.read_part(where, part, decoder, fail_on_data_loss=False))
    got = [q for b in batches for q in b.column("position").to_pylist()]
    assert got == [q for q, _, _ in damaged.rows if q != p]


def test_remote_options_are_checked():
    from aeronio.spark.options import read_options
    from aeronio.spark.recordings import SourceError

    control = "aeron:udp?endpoint=127.0.0.1:8010"
    options = read_options({"archive_control": control}, streaming=False)
    assert options.remote == (control, 10, 10.0)
    with pytest.raises(SourceError, match="give one of them"):
        read_options({"archive_control": control, "archive": "/data"}, streaming=False)
    with pytest.raises(SourceError, match="option driver_dir is for an archive directory"):
        read_options({"archive_control": control, "driver_dir": "/dev/shm/x"}, streaming=False)
    with pytest.raises(SourceError, match="not a UDP channel with an endpoint"):
        read_options({"archive_control": "aeron:ipc"}, streaming=False)
    with pytest.raises(SourceError, match="archive_timeout is for a remote archive"):
        read_options({"archive": "/data", "archive_timeout": "3"}, streaming=False)
    with pytest.raises(SourceError, match="archive_control are for a batch read"):
        read_options({"archive_control": control}, streaming=True)


def test_the_jvm_read_of_the_files_runs_in_executor_processes(cluster, served):
    """read_fixed on the archive's files: its jar, added to the session, reaches the executor
    JVMs (a local cluster's tasks run only there)."""
    if shutil.which("javac") is None:
        pytest.skip("needs javac (a JDK 17+): apt-get install openjdk-17-jdk-headless")
    import aeronio.spark

    _, _, recorded = served
    f, records = recorded["fixed"], recorded["records"]
    df = aeronio.spark.read_fixed(
        cluster, f"{FIXED_SCHEMA}, position long", recorded["archive_dir"],
        recording_ids=f.recording_id, metadata_columns="position", max_partition_bytes=TERM,
    )  # fmt: skip
    assert df.rdd.getNumPartitions() == -(-f.end // TERM)
    got = rows(df)
    assert [r[:4] for r in got] == [tuple(r) for r in records.tolist()]
    assert [r[4] for r in got] == [p for p, _, _ in f.rows]
