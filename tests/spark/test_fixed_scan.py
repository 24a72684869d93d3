"""aeronio.spark.read_fixed, the fixed-layout batch read in the JVM: every value what was
published, byte for byte, and every row the one the Python source gives for the same options
(many segments, fragmented records, partitions, positions, metadata columns, pruned columns, an
active recording); errors named on the driver or by the task; the reader compiled once."""

import os
import shutil
import threading

import numpy as np
import pytest

from tests.spark.conftest import SEGMENT, TERM, frames_length, scoped_queries

pytestmark = pytest.mark.slow

IPC = f"aeron:ipc?term-length={TERM}"
MTU = 1408  # an IPC publication's
RECORD = np.dtype(
    [("ts", "<i8"), ("symbol", "<i4"), ("price", "<f8"), ("qty", "<i2"), ("side", "<i1")]
    + [("flag", "?"), ("rate", "<f4"), ("seq", "<i8")]
)
SCHEMA = (
    "ts long, symbol int, price double, qty short, side byte, flag boolean, rate float, seq long"
)
WIDE = np.dtype([(f"v{i}", "<i8") for i in range(200)])  # 1600 bytes: fragmented over the MTU
WIDE_SCHEMA = ", ".join(f"v{i} long" for i in range(200))
METADATA = "recording_id,session_id,stream_id,channel,position,length,reserved_value"
METADATA_SCHEMA = (
    "recording_id long, session_id int, stream_id int, channel string, position long, "
    "length int, reserved_value long"
)


def records(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(n, RECORD)
    out["ts"] = np.arange(n) * 1000 + 1_700_000_000_000
    out["symbol"] = rng.integers(-(2**31), 2**31 - 1, n)
    out["price"] = rng.random(n) * 100
    out["qty"] = rng.integers(-(2**15), 2**15 - 1, n)
    out["side"] = rng.integers(-128, 127, n)
    out["flag"] = rng.random(n) < 0.5
    out["rate"] = rng.random(n).astype(np.float32)
    out["seq"] = rng.integers(-(2**63), 2**63 - 1, n)
    return out


@pytest.fixture(scope="module")
def jvm(spark):
    import aeronio.spark
    from aeronio.spark import jar

    if jar.javac() is None and not jar.SHIPPED.exists():
        pytest.skip("no aeronio-spark.jar was built, and compiling it needs javac (a JDK 17+)")
    return aeronio.spark


@pytest.fixture(scope="module")
def recorded(host):
    """Stopped recordings: many (records over 10 segments), wide (fragmented records) and
    varied (messages of other sizes)."""
    many = records(20_000, 1)
    wide = np.random.default_rng(2).integers(-(2**63), 2**63 - 1, (40, 200)).view(WIDE)[:, 0]
    return {
        "many": many,
        "wide": wide,
        "m": host.run(host.record(f"{IPC}|alias=many", 201, [r.tobytes() for r in many])),
        "w": host.run(host.record(f"{IPC}|alias=wide", 202, [r.tobytes() for r in wide])),
        "v": host.run(host.record(f"{IPC}|alias=varied", 203, [b"x" * n for n in (24, 40, 3000)])),
    }


@pytest.fixture
def small_batches(spark):
    """Columnar batches of 7 rows: every batch filled, the walk resumed between them."""
    spark.conf.set("spark.aeronio.columnarReaderBatchSize", "7")
    yield
    spark.conf.unset("spark.aeronio.columnarReaderBatchSize")


def source(spark, archive, schema: str, name: str = "aeronio_python", **options):
    """The same read through the Python data source (the oracle), or through `name`."""
    reader = (
        spark.read.format(name)
        .option("archive", str(archive))
        .option("layout", "fixed")
        .schema(schema)
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def columns(df, dtype: np.dtype) -> np.ndarray:
    """The DataFrame's rows (ordered by position) as records of `dtype`."""
    pdf = df.toPandas().sort_values("position")
    out = np.zeros(len(pdf), dtype)
    for name in dtype.names:
        out[name] = pdf[name].to_numpy()
    return out


# -- rows ---------------------------------------------------------------------------------


def test_every_value_is_what_was_published(jvm, spark, host, recorded):
    m = recorded["m"]
    assert m.end > 8 * SEGMENT  # many segment files
    df = jvm.read_fixed(
        spark, f"position long, {SCHEMA}", host.archive_dir, stream_id=201,
        metadata_columns="position",
    )  # fmt: skip
    assert df.rdd.getNumPartitions() == -(-m.end // SEGMENT)  # a partition per segment
    got = columns(df, RECORD)
    assert got.tobytes() == recorded["many"].tobytes()
    assert sorted(r[0] for r in df.select("position").collect()) == [p for p, _, _ in m.rows]


def test_fragmented_records_are_reassembled(jvm, spark, host, recorded):
    w = recorded["w"]
    assert frames_length(WIDE.itemsize, MTU) > MTU
    schema = f"position long, {WIDE_SCHEMA}"
    df = jvm.read_fixed(
        spark, schema, str(host.archive_dir), recording_ids=[w.recording_id],
        metadata_columns="position",
    )  # fmt: skip
    assert columns(df, WIDE).tobytes() == recorded["wide"].tobytes()
    # bounds inside messages: each belongs to the partition where it starts, read to its end
    start, end = w.rows[5][0] + 100, w.rows[30][0] + 1000
    options = {
        "recording_ids": w.recording_id, "metadata_columns": "position",
        "max_partition_bytes": TERM, "start_position": start, "end_position": end,
    }  # fmt: skip
    got = rows(jvm.read_fixed(spark, schema, host.archive_dir, **options))
    assert [r[0] for r in got] == [p for p, _, _ in w.rows[6:31]]
    assert got == rows(source(spark, host.archive_dir, schema, **options))


def test_rows_equal_the_python_sources(jvm, spark, host, recorded, small_batches):
    m = recorded["m"]
    schema = f"{SCHEMA}, {METADATA_SCHEMA}"
    start, end = m.rows[3000][0] + 8, m.rows[15000][0] + 1  # not message starts
    for options in (
        {"stream_id": 201},
        {"recording_ids": m.recording_id, "max_partition_bytes": "64k"},
        {"channel": "alias=many", "start_position": start, "end_position": end},
    ):
        options["metadata_columns"] = METADATA
        fast = jvm.read_fixed(spark, schema, host.archive_dir, **options)
        got = rows(fast)
        assert got == rows(source(spark, host.archive_dir, schema, **options)), options
        assert got  # and not trivially
    assert fast.rdd.getNumPartitions() == 1 + (end - 1) // SEGMENT - start // SEGMENT
    assert got[0][12] == m.rows[3001][0] and got[-1][12] == m.rows[15000][0]
    per_term = jvm.read_fixed(
        spark, SCHEMA, host.archive_dir, stream_id=201, max_partition_bytes=TERM
    )
    assert per_term.rdd.getNumPartitions() == -(-m.end // TERM)
    assert len(rows(per_term)) == len(m.rows)


def test_a_filter_is_scoped_to_its_query(jvm, spark, host, recorded):
    """Every query on one DataFrame answers as the unfiltered rows and Spark's filter."""
    m, count = recorded["m"], 3000
    df = jvm.read_fixed(
        spark, SCHEMA + ", position long", host.archive_dir, stream_id=201,
        metadata_columns="position", end_position=m.rows[count][0],
    )  # fmt: skip
    assert df.rdd.getNumPartitions() > 1
    expected = [
        r.tolist() + (p,) for r, (p, _, _) in zip(recorded["many"], m.rows[:count], strict=False)
    ]
    position = m.rows[16][0]
    scoped_queries(df, expected, f"position >= {position}", position)


def test_columns_are_pruned(jvm, spark, host, recorded):
    df = jvm.read_fixed(
        spark, f"position long, {SCHEMA}", host.archive_dir, stream_id=201,
        metadata_columns="position",
    ).select("qty", "position")  # fmt: skip
    plan = df._jdf.queryExecution().executedPlan().toString()
    scan = next(line for line in plan.splitlines() if "BatchScan" in line)
    assert "qty" in scan and "position" in scan and "price" not in scan, scan
    expected = sorted(
        zip(recorded["many"]["qty"].tolist(), (p for p, _, _ in recorded["m"].rows), strict=True)
    )
    assert rows(df) == expected
    assert df.count() == len(expected)


def test_an_active_recording_is_read_to_its_last_whole_frame(jvm, spark, host):
    channel = f"{IPC}|alias=live"
    rid, _ = host.run(host.start(channel, 204))
    try:
        first = records(500, 4)
        host.run(host.publish(rid, [r.tobytes() for r in first]))
        df = jvm.read_fixed(spark, SCHEMA, host.archive_dir, recording_ids=rid)
        assert np.array_equal(np.sort(df.toPandas()["ts"].to_numpy()), first["ts"])
        more = records(100, 5)
        more["ts"] += 10**9
        host.run(host.publish(rid, [r.tobytes() for r in more]))
        again = jvm.read_fixed(
            spark, SCHEMA, host.archive_dir, recording_ids=rid, driver_dir=host.driver_dir
        )
        assert len(rows(again)) == 600
    finally:
        host.run(host.stop(rid, channel, 204))


# -- errors ---------------------------------------------------------------------------------


def test_bad_input_is_named_on_the_driver(jvm, spark, host, recorded, tmp_path):
    from aeronio.spark import SourceError

    archive = host.archive_dir
    with pytest.raises(SourceError, match="unknown option.*recordingids"):
        jvm.read_fixed(spark, SCHEMA, archive, recordingids="1")
    with pytest.raises(SourceError, match="reads the fixed layout, not option layout 'json'"):
        jvm.read_fixed(spark, SCHEMA, archive, layout="json")
    with pytest.raises(SourceError, match="option archive is required"):
        jvm.read_fixed(spark, SCHEMA)
    nowhere = jvm.read_fixed(spark, SCHEMA, tmp_path / "nowhere")  # read at the action
    with pytest.raises(SourceError, match="does not exist"):
        nowhere.collect()
    with pytest.raises(SourceError, match="layout fixed: column 'name' is string"):
        jvm.read_fixed(spark, "name string", archive)
    with pytest.raises(SourceError, match="a remote archive .* is read by"):
        jvm.read_fixed(spark, SCHEMA, archive_control="aeron:udp?endpoint=127.0.0.1:1")
    with pytest.raises(Exception, match='Unsupported data type "NONSENSE"'):
        jvm.read_fixed(spark, "ts nonsense", archive)


def test_a_bad_batch_size_is_named(jvm, spark, host, recorded):
    from aeronio.spark import SourceError

    for value in ("0", "many"):
        spark.conf.set("spark.aeronio.columnarReaderBatchSize", value)
        df = jvm.read_fixed(spark, SCHEMA, host.archive_dir, stream_id=201)
        try:
            with pytest.raises(
                SourceError,
                match=f"spark.aeronio.columnarReaderBatchSize: '{value}' is not a positive integer",
            ):
                df.collect()
        finally:
            spark.conf.unset("spark.aeronio.columnarReaderBatchSize")


def test_a_record_of_the_wrong_size_is_named_by_the_task(jvm, spark, host, recorded):
    v = recorded["v"]
    df = jvm.read_fixed(
        spark, "ts long, symbol int, price double, qty int", host.archive_dir, stream_id=203
    )
    with pytest.raises(  # the first message is a record (24 bytes); the second is named
        Exception,
        match=rf"the message at position 64 of recording {v.recording_id} is 40 bytes, the "
        r"record \(ts, symbol, price, qty\) is 24 bytes",
    ):
        df.collect()


def test_a_missing_or_cut_segment(jvm, spark, host, recorded, tmp_path):
    m = recorded["m"]
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    (copy / f"{m.recording_id}-3.rec").unlink()
    with open(copy / f"{m.recording_id}-5.rec", "r+b") as f:
        f.truncate(SEGMENT // 2 + 100)
    with open(copy / f"{m.recording_id}-7.rec", "r+b") as f:
        f.truncate(100)  # its second term's partition starts after the file's end
    schema = f"position long, {SCHEMA}"
    options = {"recording_ids": m.recording_id, "metadata_columns": "position"}
    df = jvm.read_fixed(spark, schema, copy, **options)
    with pytest.raises(
        Exception, match=f"segment file .*{m.recording_id}-(3.rec is missing|5.rec is cut short)"
    ):
        df.collect()
    options["fail_on_data_loss"] = "false"
    cuts = {5: 5 * SEGMENT + SEGMENT // 2 + 96, 7: 7 * SEGMENT + 96}  # whole 32-byte slots
    frame = frames_length(RECORD.itemsize, MTU)
    kept = [
        p
        for p, _, _ in m.rows
        if p // SEGMENT != 3 and (p // SEGMENT not in cuts or p + frame <= cuts[p // SEGMENT])
    ]
    assert len(kept) < len(m.rows) - 1000
    for per_term in (False, True):
        if per_term:
            options["max_partition_bytes"] = TERM
        got = rows(jvm.read_fixed(spark, schema, copy, **options))
        assert [r[0] for r in got] == kept
        assert got == rows(source(spark, copy, schema, **options))


# -- the reader's jar ---------------------------------------------------------------------------


def test_a_segment_replaced_or_cut_after_a_read_is_read_as_it_is_now(
    jvm, spark, host, recorded, tmp_path
):
    """The JVM keeps a segment's mapping from one query to the next (SegmentMaps) only while
    the file is the same file of the same size: one replaced by another (another inode), cut
    or grown in place is read as it is now."""
    from aeronio.spark import DataLossError

    m = recorded["m"]
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    last = (m.end - 1) // SEGMENT
    first = [p for p, _, _ in m.rows].index(last * SEGMENT)  # the segment's first message
    schema = f"position long, {SCHEMA}"
    options = {"recording_ids": m.recording_id, "metadata_columns": "position"}
    options["start_position"] = last * SEGMENT
    assert columns(source(spark, copy, schema, "aeronio", **options), RECORD).tobytes() == (
        recorded["many"][first:].tobytes()
    )
    segment = copy / f"{m.recording_id}-{last}.rec"
    changed = bytearray(segment.read_bytes())
    seq = 32 + RECORD.fields["seq"][1]  # the segment's first message's: after its header
    changed[seq : seq + 8] = (12345).to_bytes(8, "little")
    replacement = tmp_path / "replacement"
    replacement.write_bytes(changed)
    os.replace(replacement, segment)  # the same name, another file
    want = recorded["many"][first:].copy()
    want["seq"][0] = 12345
    assert (
        columns(source(spark, copy, schema, "aeronio", **options), RECORD).tobytes()
        == want.tobytes()
    )
    with open(segment, "r+b") as f:
        f.truncate(100)
    with pytest.raises(DataLossError, match=f"{m.recording_id}-{last}.rec is cut short"):
        source(spark, copy, schema, "aeronio", **options).collect()
    with open(segment, "r+b") as f:  # the same file grown again: past the last mapping's end
        f.write(changed)
    assert (
        columns(source(spark, copy, schema, "aeronio", **options), RECORD).tobytes()
        == want.tobytes()
    )


def test_a_read_from_another_thread(jvm, spark, host, recorded):
    """PySpark gives each Python thread a JVM thread of its own: each must find the reader."""
    m = recorded["m"]
    found = []
    thread = threading.Thread(
        target=lambda: found.append(
            jvm.read_fixed(spark, SCHEMA, host.archive_dir, stream_id=201).count()
        )
    )
    thread.start()
    thread.join(120)
    assert found == [len(m.rows)]


def test_the_reader_is_compiled_once_per_source_and_spark(jvm, spark, monkeypatch, tmp_path):
    from aeronio.spark import SourceError
    from aeronio.spark import jvm as reader

    monkeypatch.setenv("AERONIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(reader, "SHIPPED", tmp_path / "none.jar")  # none built with the package
    first = reader.jar(spark.version)
    assert first.is_relative_to(tmp_path / "cache")
    stamp = first.stat().st_mtime_ns
    assert reader.jar(spark.version) == first and first.stat().st_mtime_ns == stamp
    other = reader.jar(spark.version + "-other")  # another Spark: another jar
    assert other != first and other.exists()
    monkeypatch.setattr(reader, "SOURCES", tmp_path / "java")  # another source: another jar
    (tmp_path / "java").mkdir()
    (tmp_path / "java" / "Broken.java").write_text("class Broken { nonsense }")
    with pytest.raises(SourceError, match="compiling the JVM reader against .* failed"):
        reader.jar(spark.version)
    monkeypatch.setenv("AERONIO_CACHE", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SourceError, match="needs javac"):
        reader.jar(spark.version)
    assert not (tmp_path / "elsewhere").exists()
