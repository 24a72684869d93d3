"""The sink through Spark: rows published through a driver directory or an embedded driver per
task, recorded, and read back byte for byte; the streaming writer; commit messages; errors."""

import multiprocessing
import random

import pytest

from tests.spark.conftest import TERM, frames_length
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

IPC = f"aeron:ipc?term-length={TERM}"


def payloads(count: int, seed: int, sizes=(0, 1, 31, 100, 1376, 1377, 3000, 7000)) -> list[bytes]:
    rng = random.Random(seed)
    return [
        seed.to_bytes(2, "little") + i.to_bytes(4, "little") + rng.randbytes(rng.choice(sizes))
        for i in range(count)
    ]


def recorded(spark, host, stream_id: int):
    df = spark.read.format("aeronio").option("stream_id", stream_id).load(str(host.archive_dir))
    return df.orderBy("recording_id", "position").collect()


def wait_recorded(spark, host, stream_id: int, count: int, timeout: float = 20) -> list:
    import time

    deadline = time.monotonic() + timeout
    while True:
        got = recorded(spark, host, stream_id)
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def write(df, mode="append", **options):
    writer = df.write.format("aeronio").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def test_rows_published_through_a_driver_dir_are_recorded_byte_for_byte(spark, host):
    host.run(host.client.start_recording(IPC, 301))
    data = payloads(600, 1)
    df = spark.createDataFrame([(i, d) for i, d in enumerate(data)], "n int, data binary")
    write(df.repartition(1), channel=IPC, stream_id=301, driver_dir=host.driver_dir)
    got = wait_recorded(spark, host, 301, len(data))
    assert [r.data for r in got] == data  # one task: its rows in order, on one session
    assert len({r.session_id for r in got}) == 1
    # several tasks, string data, rows of one size (offered as one block of records)
    same = [f"{i:08d}".encode() * 4 for i in range(2000)]
    df = spark.createDataFrame([(d.decode(),) for d in same], "data string").repartition(3)
    write(df, channel=IPC, stream_id=301, driver_dir=host.driver_dir)
    got = wait_recorded(spark, host, 301, len(data) + len(same))
    assert sorted(r.data for r in got) == sorted(data + same)
    host.run(host.client.stop_recording(IPC, 301))


def test_an_embedded_driver_per_task_over_udp(spark, host):
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length={TERM}"
    from aeronio.archive import SourceLocation

    host.run(host.client.start_recording(channel, 302, SourceLocation.REMOTE))
    data = payloads(300, 2)
    df = spark.createDataFrame([(d,) for d in data], "data binary").repartition(2)
    write(df, channel=channel, stream_id=302, timeout=20)
    got = wait_recorded(spark, host, 302, len(data))
    assert sorted(r.data for r in got) == sorted(data)
    assert len({r.recording_id for r in got}) == 2  # a publication (a session) per task
    host.run(host.client.stop_recording(channel, 302))


def test_a_stream_from_the_archive_into_the_archive(spark, host, tmp_path):
    source = host.run(host.record(f"{IPC}|alias=src", 303, payloads(500, 3)))
    host.run(host.client.start_recording(f"{IPC}|alias=dst", 304))
    df = spark.readStream.format("aeronio").option("stream_id", 303).load(str(host.archive_dir))
    query = (
        df.writeStream.format("aeronio")
        .option("channel", f"{IPC}|alias=dst")
        .option("stream_id", 304)
        .option("driver_dir", host.driver_dir)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = wait_recorded(spark, host, 304, len(source.rows))
    assert sorted(r.data for r in got) == sorted(d for _, _, d in source.rows)
    host.run(host.client.stop_recording(f"{IPC}|alias=dst", 304))


def _write_in_child(driver_dir: str, data: list[bytes]):
    """BatchWriter.write as a Spark task runs it (in another process, as tasks are)."""
    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StructField, StructType

    from aeronio.spark.options import write_options
    from aeronio.spark.sink import BatchWriter

    schema = StructType([StructField("data", BinaryType())])
    options = write_options({"channel": IPC, "stream_id": "305", "driver_dir": driver_dir}, False)
    batches = [pa.record_batch([pa.array(data[:100], pa.binary())], names=["data"])]
    batches.append(pa.record_batch([pa.array(data[100:], pa.binary())], names=["data"]))
    return BatchWriter(options, schema).write(iter(batches))


def test_commit_messages_report_what_was_written(spark, host):
    host.run(host.client.start_recording(IPC, 305))
    data = payloads(250, 5)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        commit = pool.apply(_write_in_child, (host.driver_dir, data))
    got = wait_recorded(spark, host, 305, len(data))
    assert [r.data for r in got] == data
    assert commit.messages == len(data) and commit.bytes == sum(map(len, data))
    assert commit.session_id == got[0].session_id and commit.stream_id == 305
    last = got[-1]
    assert commit.end_position == last.position + frames_length(last.length, 1408)
    host.run(host.client.stop_recording(IPC, 305))


def test_bad_writes(spark, host):
    df = spark.createDataFrame([(b"x",)], "data binary")
    cases = [
        ({"stream_id": 1}, "option channel is required"),
        ({"channel": IPC}, "option stream_id is required"),
        ({"channel": "aeron:bogus", "stream_id": 1}, "option channel: .*aeron:bogus"),
        ({"channel": IPC, "stream_id": 1}, "needs option driver_dir"),
        (
            {"channel": IPC, "stream_id": 1, "driver_dir": "d", "linger": 1},
            "unknown option.*linger",
        ),
        ({"channel": IPC, "stream_id": 1, "driver_dir": "d", "timeout": "soon"}, "option timeout"),
        (
            {"channel": IPC, "stream_id": 1, "driver_dir": "d", "timeout": "nan"},
            "option timeout: 'nan' must be a positive, finite number of seconds",
        ),
        (
            {"channel": IPC, "stream_id": 1, "driver_dir": "d", "timeout": "inf"},
            "option timeout: 'inf' must be a positive, finite number of seconds",
        ),
    ]
    for options, message in cases:
        with pytest.raises(Exception, match=message):
            write(df, **options)
    with pytest.raises(Exception, match='"Append" or "Overwrite" mode'):
        df.write.format("aeronio").option("channel", IPC).option("stream_id", 1).save()
    with pytest.raises(Exception, match="nothing to overwrite: use mode append"):
        write(df, "overwrite", channel=IPC, stream_id=1, driver_dir="d")
    with pytest.raises(Exception, match="need a data column"):
        write(spark.createDataFrame([(1,)], "n int"), channel=IPC, stream_id=1, driver_dir="d")
    with pytest.raises(Exception, match="column data must be binary or string, not int"):
        write(spark.createDataFrame([(1,)], "data int"), channel=IPC, stream_id=1, driver_dir="d")
    nulls = spark.createDataFrame([(b"x",), (None,)], "data binary").coalesce(1)
    with pytest.raises(Exception, match="column data is null in row 1 of the task"):
        write(nulls, channel=IPC, stream_id=306, driver_dir=host.driver_dir, timeout=5)
    nobody = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length={TERM}"
    with pytest.raises(Exception, match="offer timed out \\(not connected\\)"):
        write(df.repartition(1), channel=nobody, stream_id=307, timeout=1)


def test_a_task_held_back_past_its_timeout_says_how_many_rows_it_offered(spark, host):
    """Back-pressured past the timeout in its third chunk of rows, the task said only how many
    of that chunk went ("offer_batch: K of 1024"), not how many rows it had published in all,
    nor in which session."""
    import re

    channel = "aeron:ipc?term-length=256k"
    reader = host.run(host.aeron.add_subscription(channel, 309))  # never polled: a 128 KiB window
    try:
        data = [i.to_bytes(4, "little") * 4 for i in range(3000)]  # 64-byte frames: 2048 fit
        df = spark.createDataFrame([(d,) for d in data], "data binary").coalesce(1)
        with pytest.raises(Exception) as e:
            write(df, channel=channel, stream_id=309, driver_dir=host.driver_dir, timeout=1)
        found = re.search(
            r"offer_batch: 0 of 952 messages appended; offer timed out \(back-pressured\) at "
            r"position 131072, limit 131072; "
            r"the task offered 2048 row\(s\) in all \(session (-?\d+)\)",
            str(e.value),
        )
        assert found, str(e.value)

        async def drained() -> tuple[int, list[bytes]]:  # on the host's loop, as it polls
            got: list[bytes] = []
            reader.poll(lambda buffer, header: got.append(bytes(buffer)), 4096)
            return reader.images[0].session_id, got

        assert host.run(drained()) == (int(found[1]), data[:2048])
    finally:
        host.run(reader.close())


def test_a_row_that_cannot_be_written_names_it_and_what_the_task_offered(spark, host):
    """A null or too long a value fails the task naming its row, and how many rows the task
    offered before it (they stay published: what is recorded is exactly those)."""
    import re

    host.run(host.client.start_recording(IPC, 308))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
    try:
        data = [b"r%d" % i for i in range(5)]
        nulls = spark.createDataFrame([(d,) for d in data] + [(None,)], "data binary").coalesce(1)
        with pytest.raises(Exception) as e:
            write(nulls, channel=IPC, stream_id=308, driver_dir=host.driver_dir, timeout=5)
        found = re.search(
            r"column data is null in row 5 of the task: nothing to send; the task offered its 4 "
            r"row\(s\) before it \(session (-?\d+), to position (\d+)\)",
            str(e.value),
        )
        assert found, str(e.value)
        got = wait_recorded(spark, host, 308, 4)
        assert [r.data for r in got] == data[:4]
        assert int(found[1]) == got[0].session_id
        assert int(found[2]) == got[-1].position + frames_length(got[-1].length, 1408)
        big = spark.createDataFrame([(b"a",), (bytes(TERM // 8 + 1),)], "data binary").coalesce(1)
        with pytest.raises(Exception) as e:
            write(big, channel=IPC, stream_id=308, driver_dir=host.driver_dir, timeout=5)
        assert (
            f"column data in row 1 of the task is {TERM // 8 + 1} bytes, more than the stream's "
            f"max message length {TERM // 8} (a term length / 8); the task offered its 0 row(s) "
            "before it"
        ) in str(e.value)
        assert [r.data for r in recorded(spark, host, 308)] == data[:4]
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        host.run(host.client.stop_recording(IPC, 308))
