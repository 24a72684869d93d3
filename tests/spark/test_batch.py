"""Batch reads of an archive through Spark: every row what was published, byte for byte;
decoding layouts; partitions; options and filters; active recordings; errors."""

import random
import shutil
import threading
from pathlib import Path

import msgspec
import numpy as np
import pytest

from tests.spark.conftest import SEGMENT, TERM, frames_length, rows_of, scoped_queries

pytestmark = pytest.mark.slow

IPC = f"aeron:ipc?term-length={TERM}"
RECORD = np.dtype([("ts", "<i8"), ("symbol", "<i4"), ("price", "<f8"), ("qty", "<i4")])
FIXED_SCHEMA = "ts long, symbol int, price double, qty int"


def varied(count: int, seed: int) -> list[bytes]:
    """Small messages and some over the MTU (fragmented), so that terms end in PADs."""
    rng = random.Random(seed)
    return [
        i.to_bytes(4, "little") + rng.randbytes(rng.choice([0, 28, 100, 500, 1400, 3000, 8000]))
        for i in range(count)
    ]


class Tick(msgspec.Struct):
    ts: int
    symbol: str
    price: float
    qty: int | None = None


@pytest.fixture(scope="module")
def recorded(host):
    """Stopped recordings: a (varied sizes, many segments), b (another stream and alias),
    fixed (records), msgpack and json (maps)."""
    out = {}
    out["a"] = host.run(host.record(f"{IPC}|alias=a", 101, varied(1500, 1)))
    out["b"] = host.run(host.record(f"{IPC}|alias=b", 102, varied(300, 2)))
    rng = np.random.default_rng(3)
    records = np.zeros(3000, RECORD)
    records["ts"] = np.arange(3000) * 1000 + 1_700_000_000_000
    records["symbol"] = rng.integers(0, 50, 3000)
    records["price"] = rng.random(3000) * 100
    records["qty"] = rng.integers(-1000, 1000, 3000)
    out["fixed"] = host.run(host.record(f"{IPC}|alias=f", 103, [r.tobytes() for r in records]))
    out["records"] = records
    ticks = [Tick(i, f"S{i % 7}", i / 4, None if i % 5 == 0 else i) for i in range(500)]
    out["ticks"] = ticks
    out["msgpack"] = host.run(
        host.record(f"{IPC}|alias=m", 104, [msgspec.msgpack.encode(t) for t in ticks])
    )
    out["json"] = host.run(
        host.record(f"{IPC}|alias=j", 105, [msgspec.json.encode(t) for t in ticks])
    )
    return out


@pytest.fixture(params=["aeronio", "aeronio_python"])
def source(request):
    """Each test reads through both: the JVM source and the Python one, its oracle."""
    return request.param


def read(spark, source, host, **options):
    reader = spark.read.format(source).option("archive", str(host.archive_dir))
    schema = options.pop("schema", None)
    if schema is not None:
        reader = reader.schema(schema)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


# -- rows ---------------------------------------------------------------------------------


def test_every_row_is_what_was_published(spark, source, host, recorded):
    a, b = recorded["a"], recorded["b"]
    assert a.end > 8 * SEGMENT  # many segment files
    assert any(len(d) > 1376 for _, _, d in a.rows)  # fragmented messages
    df = read(spark, source, host, stream_id=101)
    assert [f.name for f in df.schema.fields] == [
        "recording_id", "session_id", "stream_id", "channel", "position", "length",
        "reserved_value", "data",
    ]  # fmt: skip
    assert rows(df) == rows_of(a)
    everything = rows(read(spark, source, host))
    assert [r for r in everything if r[0] == b.recording_id] == rows_of(b)
    assert len(everything) == sum(
        len(recorded[k].rows) for k in ("a", "b", "fixed", "msgpack", "json")
    )


def test_a_partition_per_segment_or_per_run_of_terms(spark, source, host, recorded):
    a = recorded["a"]
    segments = len(list(Path(host.archive_dir).glob(f"{a.recording_id}-*.rec")))
    assert (
        read(spark, source, host, recording_ids=a.recording_id).rdd.getNumPartitions() == segments
    )
    per_term = read(spark, source, host, recording_ids=a.recording_id, max_partition_bytes="64k")
    assert per_term.rdd.getNumPartitions() == (a.end + TERM - 1) // TERM
    assert rows(per_term) == rows_of(a)


def test_a_raw_schema_may_be_a_subset_of_the_columns(spark, source, host, recorded):
    b = recorded["b"]
    df = read(spark, source, host, schema="data binary, position long", stream_id=102)
    assert rows(df) == sorted((d, p) for p, _, d in b.rows)


# -- options and filters ------------------------------------------------------------------


def test_selection_options(spark, source, host, recorded):
    a, b = recorded["a"], recorded["b"]
    ids = f"{a.recording_id},{b.recording_id}"
    assert rows(read(spark, source, host, recording_ids=ids)) == sorted(rows_of(a) + rows_of(b))
    assert rows(read(spark, source, host, channel="alias=b")) == rows_of(b)
    assert rows(read(spark, source, host, channel="alias=b", stream_id=101)) == []
    # positions need not be message starts: messages that start in [start, end)
    start, end = a.rows[100][0] + 8, a.rows[700][0] + 1
    got = rows(read(spark, source, host, stream_id=101, start_position=start, end_position=end))
    assert got == [r for r in rows_of(a) if start <= r[4] < end]
    assert got[0][4] == a.rows[101][0] and got[-1][4] == a.rows[700][0]


def test_the_local_session_gives_python_workers_time_on_a_busy_host(spark):
    import os

    assert spark.conf.get("spark.python.authenticate.socketTimeout") == "120s"
    assert os.environ["SPARK_AUTH_SOCKET_TIMEOUT"] == "120"  # what Python's sockets take


def test_filters_on_every_column_are_exact(spark, source, host, recorded):
    from pyspark.sql.functions import col

    a, b = recorded["a"], recorded["b"]
    low, high = a.rows[200][0], a.rows[900][0]
    df = read(spark, source, host).where(
        (col("recording_id") == a.recording_id)
        & (col("position") > low)
        & (col("position") <= high)
    )
    assert rows(df) == [r for r in rows_of(a) if low < r[4] <= high]
    df = read(spark, source, host).where(col("channel").contains("alias=b") & (col("length") > 100))
    assert rows(df) == [r for r in rows_of(b) if r[5] > 100]
    ids = [a.recording_id, b.recording_id]
    df = read(spark, source, host).where(
        col("recording_id").isin(ids) & (col("position") == a.rows[5][0])
    )
    assert rows(df) == [rows_of(a)[5]]


def test_filters_at_the_largest_position_are_exact(spark, source, host, recorded):
    """A bound at Long.MAX_VALUE (one past it would wrap) keeps what Spark's filter keeps."""
    b = recorded["b"]
    top, first = 2**63 - 1, b.rows[0][0]
    df = read(spark, source, host, recording_ids=b.recording_id)
    assert rows(df.where(f"position <= {top}")) == rows_of(b)
    assert rows(df.where(f"position in ({first}, {top})")) == rows_of(b)[:1]
    assert rows(df.where(f"position = {top} or position > {top}")) == []


@pytest.mark.parametrize("pushdown", ["true", "false"])
def test_a_filter_is_scoped_to_its_query(spark, source, host, recorded, pushdown):
    """Filters never outlive their query, whichever the session's Python filter pushdown
    setting: every query on one DataFrame answers as the unfiltered rows and Spark's filter."""
    fixed = recorded["fixed"]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
    try:
        df = read(spark, source, host, recording_ids=fixed.recording_id)
        position = fixed.rows[16][0]
        filtered = f"position >= {position} and recording_id = {fixed.recording_id}"
        scoped_queries(df, rows_of(fixed), filtered, position)
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


# -- layouts --------------------------------------------------------------------------------


def test_fixed_layout_decodes_records_into_columns(spark, source, host, recorded):
    f, records = recorded["fixed"], recorded["records"]
    df = read(spark, source, host, schema=FIXED_SCHEMA, layout="fixed", stream_id=103)
    got = df.toPandas().sort_values("ts")
    for name in RECORD.names:
        assert np.array_equal(got[name].to_numpy(), records[name])
    schema = f"position long, {FIXED_SCHEMA}, recording_id long"
    df = read(
        spark,
        source,
        host,
        schema=schema,
        layout="fixed",
        stream_id=103,
        metadata_columns="position,recording_id",
    )
    got = sorted(tuple(r) for r in df.collect())
    assert [r[0] for r in got] == [p for p, _, _ in f.rows]
    assert {r[-1] for r in got} == {f.recording_id}
    assert [r[1] for r in got] == records["ts"].tolist()


def test_fixed_layout_names_a_message_of_the_wrong_size(spark, source, host, recorded):
    a = recorded["a"]
    df = read(spark, source, host, schema=FIXED_SCHEMA, layout="fixed", stream_id=101)
    with pytest.raises(
        Exception, match=r"is \d+ bytes, the record \(ts, symbol, price, qty\) is 24 bytes"
    ) as e:
        df.collect()
    assert f"recording {a.recording_id}" in str(e.value)


@pytest.mark.parametrize("layout", ["msgpack", "json"])
def test_msgpack_and_json_layouts(spark, source, host, recorded, layout):
    ticks = recorded["ticks"]
    stream = 104 if layout == "msgpack" else 105
    schema = "ts long, symbol string, price double, qty int, position long"
    df = read(
        spark,
        source,
        host,
        schema=schema,
        layout=layout,
        stream_id=stream,
        metadata_columns="position",
    )
    got = sorted(tuple(r) for r in df.collect())
    assert [r[:4] for r in got] == [(t.ts, t.symbol, t.price, t.qty) for t in ticks]
    assert [r[4] for r in got] == [p for p, _, _ in recorded[layout].rows]
    bad = read(spark, source, host, schema="ts long, symbol int", layout=layout, stream_id=stream)
    with pytest.raises(Exception, match=f"layout {layout}: the message at position 0 of recording"):
        bad.collect()


# -- active recordings ----------------------------------------------------------------------


def test_an_active_recording_is_read_to_its_last_whole_frame(spark, source, host):
    channel = f"{IPC}|alias=live"
    rid, publication = host.run(host.start(channel, 106))
    try:
        first = host.run(host.publish(rid, varied(400, 6)))
        expected = [(p, len(d), d) for p, _, d in first]
        for options in ({}, {"driver_dir": host.driver_dir}):
            df = read(
                spark,
                source,
                host,
                schema="position long, length int, data binary",
                recording_ids=rid,
                **options,
            )
            assert rows(df) == expected
        more = host.run(host.publish(rid, varied(100, 7)))
        df = read(
            spark, source, host, schema="position long, length int, data binary", recording_ids=rid
        )
        assert rows(df) == expected + [(p, len(d), d) for p, _, d in more]
    finally:
        host.run(host.stop(rid, channel, 106))


# -- errors ---------------------------------------------------------------------------------


def test_bad_options_fail_on_the_driver(spark, source, host, recorded, tmp_path):
    with pytest.raises(Exception, match="unknown option.*recordingids"):
        read(spark, source, host, recordingids="1").collect()
    with pytest.raises(Exception, match="option archive is required"):
        spark.read.format(source).load().collect()
    with pytest.raises(Exception, match="does not exist"):
        spark.read.format(source).load(str(tmp_path / "nowhere")).collect()
    with pytest.raises(Exception, match="no archive catalog"):
        spark.read.format(source).load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="layout fixed needs a schema"):
        read(spark, source, host, layout="fixed").collect()
    with pytest.raises(Exception, match="option layout: 'avro' is not one of"):
        read(spark, source, host, layout="avro").collect()
    with pytest.raises(Exception, match="column 'price' is not one of the raw layout's"):
        read(spark, source, host, schema="price double").collect()
    with pytest.raises(Exception, match="option stream_id: 'x' is not an integer"):
        read(spark, source, host, stream_id="x").collect()
    with pytest.raises(Exception, match="starting_positions are for a streaming read"):
        read(spark, source, host, starting_positions="earliest").collect()
    with pytest.raises(Exception, match="layout fixed: column 'name' is string"):
        read(spark, source, host, schema="name string", layout="fixed").collect()


def copy_archive(host, tmp_path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    return copy


def test_a_corrupt_catalog(spark, source, host, recorded, tmp_path):
    copy = copy_archive(host, tmp_path)
    with open(copy / "archive.catalog", "r+b") as f:
        f.write(b"\xff" * 16)
    with pytest.raises(Exception, match="archive catalog in .* cannot be read"):
        spark.read.format(source).load(str(copy)).collect()


def test_a_missing_or_cut_segment(spark, source, host, recorded, tmp_path):
    a = recorded["a"]
    copy = copy_archive(host, tmp_path)
    (copy / f"{a.recording_id}-3.rec").unlink()
    with open(copy / f"{a.recording_id}-5.rec", "r+b") as f:
        f.truncate(SEGMENT // 2 + 100)
    df = spark.read.format(source).option("recording_ids", a.recording_id)
    with pytest.raises(
        Exception, match=f"segment file .*{a.recording_id}-(3.rec is missing|5.rec is cut short)"
    ):
        df.load(str(copy)).collect()
    # without failing: what is there is read, what is gone is skipped
    got = rows(df.option("fail_on_data_loss", "false").load(str(copy)))
    cut = 5 * SEGMENT + SEGMENT // 2 + 96  # whole 32-byte slots of the cut file
    kept = [
        r
        for r in rows_of(a)
        if r[4] // SEGMENT != 3
        and (r[4] // SEGMENT != 5 or r[4] + frames_length(r[5], 1408) <= cut)
    ]
    assert len(kept) < len(a.rows) - 50
    assert got == kept


# -- the JVM source -------------------------------------------------------------------------


def test_format_aeronio_reads_in_the_jvm(spark, host, recorded):
    """No Python runs in the scan: the plan is Spark's own BatchScan of the JVM source."""
    df = read(spark, "aeronio", host, stream_id=102)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "BatchScan aeronio[" in plan and "(Python)" not in plan


def test_format_aeronio_reads_from_any_python_thread(spark, host, recorded):
    """PySpark serves each Python thread with a JVM thread of its own (a new one, too, when Py4J
    reconnects): the format reads from a thread other than the one that registered it."""
    got: dict[str, object] = {}

    def count(name: str) -> None:
        try:
            got[name] = read(spark, "aeronio", host, stream_id=102).count()
        except Exception as error:  # what the test reports
            got[name] = error

    threads = [threading.Thread(target=count, args=(f"thread {i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    want = len(recorded["b"].rows)
    assert got == {"thread 0": want, "thread 1": want}


def test_filters_choose_the_recordings_and_positions_read(spark, host, recorded):
    """Filters on recording_id, session_id, stream_id, channel and position leave out
    partitions (the rows are still exactly Spark's filter's)."""
    a, b = recorded["a"], recorded["b"]
    df = read(spark, "aeronio", host)
    every = df.rdd.getNumPartitions()
    one = df.where(f"recording_id = {b.recording_id}")
    assert (
        one.rdd.getNumPartitions()
        == read(spark, "aeronio", host, recording_ids=b.recording_id).rdd.getNumPartitions()
    )
    assert one.rdd.getNumPartitions() < every
    assert rows(one) == rows_of(b)
    assert df.where("stream_id = 102 or channel like '%alias=b%'").rdd.getNumPartitions() == (
        one.rdd.getNumPartitions()
    )
    assert a.session_id != b.session_id
    by_session = df.where(f"session_id = {b.session_id}")
    assert by_session.rdd.getNumPartitions() == one.rdd.getNumPartitions()
    assert rows(by_session) == rows_of(b)
    low = a.rows[-20][0]
    tail = df.where(f"position >= {low} and recording_id = {a.recording_id}")
    assert tail.rdd.getNumPartitions() == (a.end - 1) // SEGMENT - low // SEGMENT + 1
    assert rows(tail) == [r for r in rows_of(a) if r[4] >= low]
    assert df.where("recording_id = -5").rdd.getNumPartitions() == 0


def test_columns_are_pruned(spark, host, recorded):
    """The scan reads only the columns a query uses, and their values are the whole read's."""
    b = recorded["b"]
    df = read(spark, "aeronio", host, recording_ids=b.recording_id)
    two = df.select("position", "length")
    scan = [
        line
        for line in two._jdf.queryExecution().executedPlan().toString().splitlines()
        if "BatchScan aeronio[" in line
    ]
    assert len(scan) == 1
    columns = scan[0].split("BatchScan aeronio[", 1)[1].split("]", 1)[0]
    assert [c.split("#")[0] for c in columns.split(", ")] == ["position", "length"]
    assert sorted(tuple(r) for r in two.collect()) == sorted((r[4], r[5]) for r in rows_of(b))
