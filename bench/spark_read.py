#!/usr/bin/env python
"""Spark reads of recordings: rows/s of a full scan with an aggregation over fixed-layout
records that aeronio's archive recorded, read by the "aeronio" source, beside the same rows in
Parquet read by Spark's own reader, in one run and one SparkSession.

Setup (untimed):

  records  N records of 32 bytes, RECORD: ts long, symbol int, price double, qty int, seq
           long (little-endian, packed: the `fixed` layout); symbol uniform over --symbols,
           price a multiple of 1/64 (every sum of prices is exact, in any order), qty 1..999,
           ts ascending.
  archive  recorded by aeronio's archive in this process: `aeronio.connect()` (embedded
           driver), `archive.Archive.launch` (IPC control, --segment-length segments: 1 GiB,
           the largest, by default), start_recording(aeron:ipc?term-length=T) and an exclusive
           publication, `await publication.offer_batch(2-D uint8 records)` (--batch-rows a
           call) until the recording's position reaches the publication's; then stopped.
  parquet  the same records written once by pyarrow to one Parquet file (snappy, Spark's
           default codec; row groups of 1 Mi rows).
  arrow    and to one Arrow IPC file, in record batches of the rows the source decodes at a
           time (the floor path below).

  json     the same records as JSON objects ({"ts": .., "symbol": .., "price": .., "qty": ..,
           "seq": ..}, padded with spaces to JSON_WIDTH bytes), recorded as a second recording
           (stream JSON_STREAM_ID), and written to a Parquet file of one string column; the
           raw payloads (the 32-byte records) to a Parquet file of one binary column.

Timed, each path as `df.groupBy("symbol").agg(count(*), sum(qty), avg(price),
max(ts)).collect()` (the raw paths: `count(*), sum(length(data)), sum(crc32(data))`), in one
SparkSession (local[2] by default, see --master):

  aeronio   spark.read.format("aeronio").option("archive", DIR).option("layout", "fixed")
            .schema(SCHEMA).option("max_partition_bytes", P).load(): the JVM source, P
            (--max-partition-bytes) splitting the recording into a partition per core, as
            Spark's 128 MB splits do Parquet's file (vs parquet). The source computes
            the aggregation's partial results as it reads (its aggregate push-down) and
            Spark merges them
  scan      the same with .option("push_down_aggregates", "false"): the source hands Spark
            every row and Spark aggregates them, as it does Parquet's (vs parquet)
  raw       format("aeronio") of the same recording, layout raw: column data (vs parquet_raw:
            spark.read.parquet of the payloads as a binary column)
  json      format("aeronio") of the JSON recording, layout json, .schema(SCHEMA) (vs
            parquet_json: spark.read.parquet of the JSON strings, parsed by from_json(SCHEMA))
  python    spark.read.format("aeronio_python"): the Python source (the oracle), its
            defaults, a partition per segment file (one, with 1 GiB segments); it yields Arrow
            record batches (numpy views of the payloads, no Python per row)
  split     the same with .option("max_partition_bytes", P)
  jvm       aeronio.spark.read_fixed(spark, SCHEMA, DIR, max_partition_bytes=P): the aeronio
            path's read, its options checked by the call in Python (its jar compiled before
            the runs, in the first warm-up round at the latest)
  rows      split's partitions, frame scan and decode, yielded to Spark as one tuple per row by
            a reader written here (RowByRowReader, format "aeronio_bench_rows"): aeronio.spark
            has no row-by-row option. PySpark's worker turns the tuples into Arrow batches
            (spark.sql.execution.arrow.maxRecordsPerBatch rows a batch), value by value
  arrow     a floor for any Python data source: a reader written here (format
            "aeronio_bench_arrow") that yields the record batches of the memory-mapped Arrow
            IPC file (no reading or decoding to speak of), as many partitions as split's
  parquet   spark.read.parquet(FILE)
  cached    the same Parquet rows in Spark's in-memory cache (`.cache()` at its defaults,
            filled before the runs): how fast Spark reads rows it already holds in memory, as
            columnar batches like the JVM source's (a reference, not a target)

and two paths that write every row to a Parquet sink (a new directory each run), timed from
the start to the sink's last file, the aggregation then run on what was written (untimed):

  stream    spark.readStream.format("aeronio") of the fixed recording (layout fixed, P) as a
            query with Trigger.AvailableNow into writeStream.format("parquet"): the JVM
            source's MicroBatchStream, one micro-batch of every recorded row (vs copy)
  copy      spark.read.parquet(FILE).write.parquet(DIR): the Parquet batch read of those rows
            into the same sink

--warmups rounds (every path once in each, dropped), then --repeats rounds, every path once in
each (round robin, so that a slow spell of the machine falls on all of them). The warm-ups let
the JVM compile the paths' code (Spark's and the readers'): on this 2-core machine the rounds
right after the first still run slower, the short queries most (compilations competing for the
cores), and every round's time is printed, the warm-ups' too. Every result is
checked against the aggregates numpy computes from the records: count, sum(qty), max(ts) and
avg(price) exactly (the sums of prices are exact); a difference fails the benchmark. The CPU
time of the Spark JVM and of its Python workers is read from /proc around every run. The files
are read from the page cache (written just before, and smaller than the memory).

    python bench/spark_read.py --quick
    python bench/spark_read.py --markdown --out spark.md
    python bench/spark_read.py --paths aeronio,parquet,raw,parquet_raw,json,parquet_json
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import io
import itertools
import os
import pstats
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from basics import BenchError, check, require_positive, run_main, split_modes
from children import progress, unwind_on_sigterm
from reports import (
    fmt,
    fmt_x,
    load_average,
    machine_info,
    md_table,
    median_or_none,
    span,
    text_table,
    verdict,
    write_markdown,
)

import aeronio
from aeronio import archive
from aeronio.spark.reader import CHUNK_BYTES
from aeronio.spark.source import PYTHON_NAME

RECORD = np.dtype(
    [("ts", "<i8"), ("symbol", "<i4"), ("price", "<f8"), ("qty", "<i4"), ("seq", "<i8")]
)
SCHEMA = "ts long, symbol int, price double, qty int, seq long"
STREAM_ID = 1001
TS_BASE = 1_700_000_000_000_000_000  # ns
ROWS_FORMAT = "aeronio_bench_rows"
ARROW_FORMAT = "aeronio_bench_arrow"

JSON_STREAM_ID = 1002
JSON_WIDTH = 96  # bytes of a JSON record, padded with spaces: a 128-byte frame

PATHS = {
    "aeronio": "aeronio: JVM, layout fixed",
    "scan": "scan: aeronio, aggregates not pushed",
    "raw": "raw: JVM, layout raw",
    "json": "json: JVM, layout json",
    "python": "python: layout fixed, Arrow batches",
    "split": "split: python + max_partition_bytes",
    "jvm": "jvm: aeronio.spark.read_fixed",
    "rows": "rows: split, row by row (bench reader)",
    "arrow": "arrow: floor, IPC batches (bench reader)",
    "parquet": "parquet: spark.read.parquet",
    "cached": "cached: parquet in Spark's cache",
    "parquet_raw": "parquet_raw: payloads, binary",
    "parquet_json": "parquet_json: JSON, from_json",
    "stream": "stream: AvailableNow -> Parquet sink",
    "copy": "copy: read.parquet -> Parquet sink",
}
# Each path's Parquet baseline (same rows, same query) and the speed it must reach over it.
BASELINE = {
    "raw": "parquet_raw",
    "json": "parquet_json",
    "parquet_raw": None,
    "parquet_json": None,
    "stream": "copy",
    "copy": None,
}
TARGET = {"aeronio": 2.0, "raw": 1.5, "json": 1.0}
RAW_PATHS = ("raw", "parquet_raw")
SINKS = {"stream": "aeronio", "copy": "parquet"}  # path -> the batch read planned as it is
SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    m = SIZE.match(text)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


@dataclass
class Options:
    count: int
    symbols: int
    term_length: int
    segment_length: int
    batch_rows: int
    max_partition_bytes: str
    master: str
    shuffle_partitions: int
    driver_memory: str
    timeout: float

    @property
    def batch_records(self) -> int:
        """Records (64-byte frames) of the batches the source yields: whole terms of at least
        its 8 MiB chunk."""
        chunk = -(-CHUNK_BYTES // self.term_length) * self.term_length
        return chunk // 64


@dataclass
class Cell:
    path: str
    rows: int
    partitions: int = 0
    bytes_read: int = 0  # what the path reads: recorded bytes, the file
    seconds: list[float] = field(default_factory=list)
    cpu: list[Cpu] = field(default_factory=list)  # CPU seconds of each run

    @property
    def rates(self) -> list[float]:
        return [self.rows / s for s in self.seconds]

    @property
    def rate(self) -> float | None:
        return median_or_none(self.rates)


# =========================================================================================
# Setup: the records, their recording, their Parquet and Arrow files
# =========================================================================================


def make_records(n: int, symbols: int, seed: int = 13) -> np.ndarray:
    rng = np.random.default_rng(seed)
    records = np.empty(n, RECORD)
    index = np.arange(n, dtype=np.int64)
    records["ts"] = TS_BASE + index * 1000 + rng.integers(0, 1000, n)
    records["symbol"] = rng.integers(0, symbols, n, dtype=np.int32)
    records["price"] = rng.integers(64, 64 * 200, n) / 64.0  # exact sums: multiples of 1/64
    records["qty"] = rng.integers(1, 1000, n, dtype=np.int32)
    records["seq"] = index
    return records


def json_records(records: np.ndarray) -> np.ndarray:
    """The records as JSON objects, each padded with spaces to JSON_WIDTH bytes: (n, width)
    uint8 (made a million at a time)."""
    out = np.empty((len(records), JSON_WIDTH), np.uint8)
    step = 1 << 20
    for start in range(0, len(records), step):
        part = records[start : start + step]
        text = "".join(
            f'{{"ts":{t},"symbol":{s},"price":{p!r},"qty":{q},"seq":{i}}}'.ljust(JSON_WIDTH)
            for t, s, p, q, i in zip(
                part["ts"].tolist(), part["symbol"].tolist(), part["price"].tolist(),
                part["qty"].tolist(), part["seq"].tolist(), strict=True,
            )
        ).encode()  # fmt: skip
        check(len(text) == len(part) * JSON_WIDTH, f"a JSON record is over {JSON_WIDTH} B")
        out[start : start + len(part)] = np.frombuffer(text, np.uint8).reshape(-1, JSON_WIDTH)
    return out


def expected_raw(records: np.ndarray) -> dict[int, tuple]:
    """{0: (count, sum(length(data)), sum(crc32(data)))} of the payloads, as zlib computes."""
    import zlib

    raw = records.view(np.uint8).reshape(len(records), RECORD.itemsize)
    crc = sum(zlib.crc32(row) for row in map(bytes, raw))
    return {0: (len(records), len(records) * RECORD.itemsize, crc)}


def expected_aggregates(records: np.ndarray, symbols: int) -> dict[int, tuple]:
    """{symbol: (count, sum(qty), avg(price), max(ts))} as numpy computes them."""
    symbol = records["symbol"]
    count = np.bincount(symbol, minlength=symbols)
    qty = np.bincount(symbol, weights=records["qty"], minlength=symbols)  # < 2**53: exact
    price = np.bincount(symbol, weights=records["price"], minlength=symbols)  # exact
    max_ts = np.full(symbols, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(max_ts, symbol, records["ts"])
    return {
        s: (int(count[s]), int(qty[s]), float(price[s]) / float(count[s]), int(max_ts[s]))
        for s in range(symbols)
        if count[s]
    }


async def _record(
    payloads: dict[int, np.ndarray], archive_dir: Path, opts: Options
) -> dict[int, dict]:
    """Each stream id's payloads ((n, size) uint8) recorded, one recording each."""
    channel = f"aeron:ipc?term-length={opts.term_length}"
    out = {}
    async with aeronio.connect(term_buffer_sparse_file=False) as aeron:
        async with archive.Archive.launch(
            aeron,
            archive_dir=archive_dir,
            segment_file_length=opts.segment_length,
            **archive.LOCAL_ARCHIVE,
        ):
            async with archive.connect(aeron, **archive.LOCAL) as client:
                for stream_id, raw in payloads.items():
                    out[stream_id] = await _record_one(client, aeron, channel, stream_id, raw, opts)
    return out


async def _record_one(client, aeron, channel: str, stream_id: int, raw: np.ndarray, opts) -> dict:
    """One recording of `raw` ((n, size) uint8: offer_batch of --batch-rows at a time)."""
    await client.start_recording(channel, stream_id, archive.SourceLocation.LOCAL)
    publication = await aeron.add_exclusive_publication(channel, stream_id)
    try:
        while (
            rid := await client.find_last_matching_recording(
                0, "aeron:ipc", stream_id, publication.session_id
            )
        ) < 0:
            await asyncio.sleep(0.001)
        started = time.perf_counter()
        rows, n = opts.batch_rows, len(raw)
        for start in range(0, n, rows):
            await publication.offer_batch(raw[start : start + rows])
        end = publication.position
        while await client.get_recording_position(rid) < end:
            await asyncio.sleep(0.001)
        elapsed = time.perf_counter() - started
    finally:
        await publication.close()
    await client.stop_recording(channel, stream_id)
    descriptor = await client.list_recording(rid)
    check(descriptor is not None, f"recording {rid} is not in the catalog")
    check(
        descriptor.stop_position == end,
        f"recording {rid} stopped at {descriptor.stop_position}, not {end}",
    )
    frame = (raw.shape[1] + 32 + 31) // 32 * 32
    check(end == frame * len(raw), f"recording {rid} holds {end} B, not {frame} per record")
    return {"recording_id": rid, "end": end, "seconds": elapsed}


def record(payloads: dict[int, np.ndarray], archive_dir: Path, opts: Options) -> dict[int, dict]:
    async def bounded():
        try:
            return await asyncio.wait_for(_record(payloads, archive_dir, opts), opts.timeout)
        except TimeoutError:
            raise BenchError(f"recording did not finish within {opts.timeout} s") from None

    return asyncio.run(bounded())


def write_files(
    records: np.ndarray, json: np.ndarray | None, base: Path, arrow: Path, batch_rows: int
) -> None:
    """The records as Parquet files (snappy, row groups of 1 Mi rows: the columns, the payloads
    as binary column data, the JSON records as string column json) and one Arrow IPC file
    (record batches of `batch_rows`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def fixed_width(kind, rows: np.ndarray) -> pa.Array:
        n, width = rows.shape
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
        return pa.Array.from_buffers(
            kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(rows))]
        )

    def parquet(name: str, table: pa.Table) -> None:
        pq.write_table(table, base / name, compression="snappy", row_group_size=1 << 20)

    table = pa.table({name: records[name] for name in RECORD.names})
    parquet("records.parquet", table)
    raw = records.view(np.uint8).reshape(len(records), RECORD.itemsize)
    parquet("raw.parquet", pa.table({"data": fixed_width(pa.large_binary(), raw)}))
    if json is not None:
        parquet("json.parquet", pa.table({"json": fixed_width(pa.large_string(), json)}))
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)


# =========================================================================================
# The benchmark's own Python data sources (defined in functions: pickled by value)
# =========================================================================================


def rows_source():
    """Format "aeronio_bench_rows": aeronio's source (its options, partitions, frame scan and
    fixed decode: its own reader, wrapped), each batch it yields handed to Spark as tuples, one
    per row (how a Python data source hands rows over when it builds no Arrow batches)."""
    from pyspark.sql.datasource import DataSourceReader

    from aeronio.spark.source import AeronioDataSource

    class RowByRowReader(DataSourceReader):
        def __init__(self, inner):
            self.inner = inner

        def partitions(self):
            return self.inner.partitions()

        def read(self, partition):
            for batch in self.inner.read(partition):
                yield from zip(*(c.to_numpy().tolist() for c in batch.columns), strict=True)

    class RowByRowDataSource(AeronioDataSource):
        @classmethod
        def name(cls) -> str:
            return ROWS_FORMAT

        def reader(self, schema):
            return RowByRowReader(super().reader(schema))

    return RowByRowDataSource


def arrow_source():
    """Format "aeronio_bench_arrow" (options path, partitions): the record batches of an Arrow
    IPC file, memory-mapped, split into `partitions` runs of batches; no decoding."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class ArrowFileReader(DataSourceReader):
        def __init__(self, path: str, partitions: int):
            self.path, self.count = path, partitions

        def partitions(self):
            import pyarrow as pa

            with pa.memory_map(self.path) as source:
                batches = pa.ipc.open_file(source).num_record_batches
            bounds = np.linspace(0, batches, self.count + 1).round().astype(int).tolist()
            return [InputPartition(pair) for pair in zip(bounds[:-1], bounds[1:], strict=True)]

        def read(self, partition):
            import pyarrow as pa

            first, stop = partition.value
            with pa.memory_map(self.path) as source:
                reader = pa.ipc.open_file(source)
                for i in range(first, stop):
                    yield reader.get_batch(i)

    class ArrowFileDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return ARROW_FORMAT

        def schema(self):
            return SCHEMA

        def reader(self, schema):
            return ArrowFileReader(self.options["path"], int(self.options["partitions"]))

    return ArrowFileDataSource


# =========================================================================================
# Spark
# =========================================================================================


def spark_session(opts: Options):
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import aeronio.spark

    session = (
        SparkSession.builder.master(opts.master)
        .appName("aeronio-bench-spark-read")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", opts.driver_memory)
        .config("spark.sql.shuffle.partitions", str(opts.shuffle_partitions))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    aeronio.spark.register(session)
    session.dataSource.register(rows_source())
    session.dataSource.register(arrow_source())
    return session


def frames(spark, archive_dir: Path, base: Path, arrow: Path, opts: Options) -> dict:
    """path -> a function making the path's DataFrame (SINKS' paths: writing the rows to a
    new directory under `base`, then a DataFrame of what was written)."""
    from pyspark.sql import functions as F

    def recorded(
        name: str, split: bool, layout: str = "fixed", stream_id: int = STREAM_ID, **options
    ):
        reader = (
            spark.read.format(name)
            .option("archive", str(archive_dir))
            .option("layout", layout)
            .option("stream_id", stream_id)
            .options(**options)
        )
        if layout != "raw":
            reader = reader.schema(SCHEMA)
        if split and opts.max_partition_bytes:
            reader = reader.option("max_partition_bytes", opts.max_partition_bytes)
        return reader.load()

    partitions = recorded("aeronio", True).rdd.getNumPartitions()  # planned once, untimed
    split_option = (
        {"max_partition_bytes": opts.max_partition_bytes} if opts.max_partition_bytes else {}
    )

    def arrow_file():
        return (
            spark.read.format(ARROW_FORMAT)
            .option("path", str(arrow))
            .option("partitions", partitions)
            .load()
        )

    def parquet_json():
        df = spark.read.parquet(str(base / "json.parquet"))
        return df.select(F.from_json("json", SCHEMA).alias("r")).select("r.*")

    runs = itertools.count()
    written: list[Path] = []

    def sink_dir() -> Path:
        """A new directory for a sink run (the last run's removed: it was checked)."""
        while written:
            shutil.rmtree(written.pop(), ignore_errors=True)
        written.append(base / f"sink-{next(runs)}")
        return written[-1]

    def streamed():
        where = sink_dir()
        reader = (
            spark.readStream.format("aeronio")
            .option("archive", str(archive_dir))
            .option("layout", "fixed")
            .option("stream_id", STREAM_ID)
            .schema(SCHEMA)
        )
        for key, value in split_option.items():
            reader = reader.option(key, value)
        writer = reader.load().writeStream.format("parquet").option("path", str(where / "out"))
        query = writer.option("checkpointLocation", str(where / "checkpoint"))
        query = query.trigger(availableNow=True).start()
        query.awaitTermination()
        check(query.exception() is None, f"stream: the query failed: {query.exception()}")
        return spark.read.parquet(str(where / "out"))

    @functools.cache
    def cached():
        """The Parquet rows cached, filled by the first call (the untimed planning). They are
        read from a copy of the file: Spark's cache serves every query whose plan matches the
        cached one, so a cache of records.parquet itself would feed the parquet and copy paths
        too."""
        copy = base / "cached.parquet"
        shutil.copyfile(base / "records.parquet", copy)
        df = spark.read.parquet(str(copy)).cache()
        df.count()
        plain = spark.read.parquet(str(base / "records.parquet"))._jdf.queryExecution()
        check(
            "InMemoryTableScan" not in plain.executedPlan().toString(),
            "cached: Spark's cache serves the parquet path too",
        )
        return df

    def copied():
        where = sink_dir()
        spark.read.parquet(str(base / "records.parquet")).write.parquet(str(where / "out"))
        return spark.read.parquet(str(where / "out"))

    return {
        "aeronio": lambda: recorded("aeronio", True),
        "scan": lambda: recorded("aeronio", True, push_down_aggregates="false"),
        "raw": lambda: recorded("aeronio", True, "raw"),
        "json": lambda: recorded("aeronio", True, "json", JSON_STREAM_ID),
        "python": lambda: recorded(PYTHON_NAME, False),
        "split": lambda: recorded(PYTHON_NAME, True),
        "jvm": lambda: aeronio.spark.read_fixed(
            spark, SCHEMA, archive_dir, stream_id=STREAM_ID, **split_option
        ),
        "rows": lambda: recorded(ROWS_FORMAT, True),
        "arrow": arrow_file,
        "parquet": lambda: spark.read.parquet(str(base / "records.parquet")),
        "cached": cached,
        "parquet_raw": lambda: spark.read.parquet(str(base / "raw.parquet")),
        "parquet_json": parquet_json,
        "stream": streamed,
        "copy": copied,
    }


def aggregate(df, path: str) -> dict:
    """The path's query, collected: {symbol: (count, sum(qty), avg(price), max(ts))}, or for
    the raw paths {0: (count, sum(length(data)), sum(crc32(data)))}."""
    from pyspark.sql import functions as F

    if path in RAW_PATHS:
        row = df.agg(F.count(F.lit(1)), F.sum(F.length("data")), F.sum(F.crc32("data"))).first()
        return {0: tuple(row)}
    rows = (
        df.groupBy("symbol")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("qty").alias("qty"),
            F.avg("price").alias("avg_price"),
            F.max("ts").alias("max_ts"),
        )
        .collect()
    )
    return {r["symbol"]: (r["n"], r["qty"], r["avg_price"], r["max_ts"]) for r in rows}


def check_aggregates(path: str, got: dict, expected: dict) -> None:
    expected = expected["raw" if path in RAW_PATHS else "records"]
    if got != expected:
        wrong = sorted(s for s in set(got) | set(expected) if got.get(s) != expected.get(s))
        s = wrong[0]
        raise BenchError(
            f"{path}: the aggregates differ from numpy's for {len(wrong)} group(s); group "
            f"{s}: {got.get(s)} != {expected.get(s)}"
        )


class Cpu(NamedTuple):
    """CPU seconds so far: the Spark JVM's, its Python workers', the machine's busy time (all
    processes) and the time stolen by the hypervisor."""

    jvm: float
    python: float
    driver: float  # this process (the PySpark driver)
    busy: float
    steal: float

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(*(a - b for a, b in zip(self, other, strict=True)))

    @property
    def others(self) -> float:
        """What processes other than this benchmark's used."""
        return max(0.0, self.busy - self.jvm - self.python - self.driver)


class CpuMeter:
    """CPU seconds of the Spark JVM (all its threads), of its descendants (the Python workers:
    their own time and that of the ones they reaped), of this process and of the machine, from
    /proc."""

    def __init__(self, spark):
        self.jvm = spark.sparkContext._gateway.proc.pid
        self.tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _stat(pid: int) -> list[str] | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None

    def sample(self) -> Cpu:
        parents: dict[int, int] = {}
        stats: dict[int, list[str]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (s := self._stat(int(entry))) is not None:
                stats[int(entry)] = s
                parents[int(entry)] = int(s[1])

        def below_jvm(pid: int) -> bool:
            while pid > 1:
                pid = parents.get(pid, 0)
                if pid == self.jvm:
                    return True
            return False

        jvm = stats.get(self.jvm)
        jvm_s = (int(jvm[11]) + int(jvm[12])) / self.tick if jvm else 0.0
        py_s = sum(
            sum(int(x) for x in s[11:15]) / self.tick for pid, s in stats.items() if below_jvm(pid)
        )
        me = os.times()
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
        busy = sum(ticks[i] for i in (0, 1, 2, 5, 6)) / self.tick  # user nice system irq softirq
        return Cpu(jvm_s, py_s, me.user + me.system, busy, ticks[7] / self.tick)


def timed_run(make_df, path: str, expected: dict, meter: CpuMeter) -> tuple[float, Cpu]:
    """(seconds, CPU seconds used) of one checked aggregation (SINKS' paths: of the write, the
    aggregation of what was written checked after)."""
    before = meter.sample()
    started = time.perf_counter()
    df = make_df()
    rows = None if path in SINKS else aggregate(df, path)
    elapsed = time.perf_counter() - started
    used = meter.sample() - before
    check_aggregates(path, aggregate(df, path) if rows is None else rows, expected)
    return elapsed, used


def measure(
    dfs: dict, cells: dict[str, Cell], expected: dict, warmups: int, repeats: int, meter
) -> None:
    """`warmups` rounds (dropped), then `repeats` rounds of every path in turn."""
    for round_ in range(warmups + repeats):
        timed = round_ >= warmups
        label = f"run {round_ - warmups + 1}/{repeats}" if timed else f"warm-up {round_ + 1}"
        parts = []
        for path, cell in cells.items():
            seconds, used = timed_run(dfs[path], path, expected, meter)
            if timed:
                cell.seconds.append(seconds)
                cell.cpu.append(used)
            parts.append(f"{path} {seconds:.2f} s")
            if used.others > 0.1 * seconds or used.steal > 0.1 * seconds:
                parts[-1] += f" (others {used.others:.1f}, steal {used.steal:.1f} CPU s)"
        progress(f"    {label}: " + ", ".join(parts))


# =========================================================================================
# --profile: where the aeronio path's time goes
# =========================================================================================


def profile_decode(archive_dir: Path, opts: Options, top: int) -> None:
    """The source's read of every partition in this process (no Spark: the work of its Python
    workers, on one core), timed, under cProfile, and timed by stage."""
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        LongType,
        StructField,
        StructType,
    )

    from aeronio.spark import frames as fr
    from aeronio.spark import reader as rd
    from aeronio.spark import recordings as recs
    from aeronio.spark.decode import Decoder, payload_array
    from aeronio.spark.options import read_options
    from aeronio.spark.source import BatchReader

    options = {"archive": str(archive_dir), "layout": "fixed"}
    if opts.max_partition_bytes:
        options["max_partition_bytes"] = opts.max_partition_bytes
    kinds = {"<i8": LongType(), "<i4": IntegerType(), "<f8": DoubleType()}
    schema = StructType([StructField(k, kinds[RECORD[k].str]) for k in RECORD.names])
    decoder = Decoder(schema, "fixed", ())
    reader = BatchReader(read_options(options, streaming=False), decoder)
    partitions = reader.partitions()

    def read_all() -> int:
        return sum(b.num_rows for p in partitions for b in reader.read(p))

    read_all()  # numpy's and Arrow's first calls
    started = time.perf_counter()
    rows = read_all()
    whole = time.perf_counter() - started
    profiler = cProfile.Profile()
    profiler.enable()
    read_all()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    progress(f"  cProfile of the source's read of its {len(partitions)} partitions, one process:")
    progress(out.getvalue().rstrip())

    names = ("read_bytes", "frames.scan", "frames.assemble", "payload_array", "fixed columns")
    stages = dict.fromkeys(names, 0.0)
    clock = time.perf_counter
    for part in (p.value for p in partitions):
        r, position = part.recording, part.scan_from
        while position < part.read_limit and position < part.emit_to:
            end = min(
                part.read_limit,
                r.segment_end(position),
                max(r.term_end(position), r.term_base(position + rd.CHUNK_BYTES)),
            )
            t0 = clock()
            buffer = recs.read_bytes(archive_dir, r, position, end, partial=True)
            t1 = clock()
            found = fr.scan(buffer, position, r.term_length, r.initial_term_id)
            t2 = clock()
            messages = fr.assemble(found)
            t3 = clock()
            payloads = payload_array(buffer, found, messages)
            t4 = clock()
            decoder._fixed(r, position, messages, payloads)
            t5 = clock()
            for name, dt in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
                stages[name] += dt
            position = end
    progress(
        f"  the source's read of {rows:,} rows in this process: {whole:.3f} s "
        f"({rows / whole / 1e6:.1f} M rows/s on one core); by stage: "
        + ", ".join(f"{k} {v:.3f} s" for k, v in stages.items())
    )


def profile_spark(spark, dfs: dict, paths: list[str], expected: dict, top: int, base: Path):
    """Each path's scan without the aggregation (the noop sink), and the aeronio paths' Python
    workers under Spark's perf profiler (spark.sql.pyspark.dataSource.profiler: cProfile, wall
    clock), merged over their partitions."""
    for path in (p for p in paths if p not in SINKS):
        seconds = []
        for _ in range(3):
            started = time.perf_counter()
            dfs[path]().write.format("noop").mode("overwrite").save()
            seconds.append(time.perf_counter() - started)
        best = min(seconds)
        progress(f"  {path}: the scan alone (write.format('noop')), best of 3: {best:.3f} s")
    for path in (p for p in ("python", "split") if p in paths):
        where = base / f"profiles-{path}"
        spark.conf.set("spark.sql.pyspark.dataSource.profiler", "perf")
        try:
            spark.profile.clear()
            check_aggregates(path, aggregate(dfs[path](), path), expected)
            spark.profile.dump(str(where), type="perf")
        finally:
            spark.conf.unset("spark.sql.pyspark.dataSource.profiler")
        found = where.glob("udf_*_perf.pstats") if where.is_dir() else []
        files = sorted(str(p) for p in found if p.stem[4:-5].isdigit())
        if not files:
            progress(f"  ({path}: Spark's perf profiler gave no profile of the read)")
            continue
        out = io.StringIO()
        pstats.Stats(*files, stream=out).sort_stats("tottime").print_stats(top)
        progress(
            f"  {path}: Spark's perf profile of the Python workers' read ({len(files)} "
            "partitions, one aggregation, merged):"
        )
        progress(out.getvalue().rstrip())


# =========================================================================================
# Report
# =========================================================================================


HEADERS = [
    "path",
    "rows",
    "parts",
    "read MB",
    "median s",
    "rows/s",
    "vs parquet",
    "CPU s JVM + Python",
    "others CPU s",
    "min..max rows/s",
]
RIGHT = {1, 2, 3, 4, 5, 6, 7, 8}


def baseline(cells: dict[str, Cell], path: str) -> float | None:
    """The rows/s of the path's Parquet baseline (none for the baselines)."""
    name = BASELINE.get(path, "parquet")
    cell = cells.get(name) if name and name != path else None
    return cell.rate if cell else None


def table(cells: dict[str, Cell]):
    rows = []
    for path, c in cells.items():
        base = baseline(cells, path)
        jvm = median_or_none([u.jvm for u in c.cpu])
        py = median_or_none([u.python for u in c.cpu])
        others = median_or_none([u.others + u.steal for u in c.cpu])
        rows.append(
            [
                PATHS[path],
                f"{c.rows:,}",
                str(c.partitions),
                f"{c.bytes_read / 1e6:,.0f}",
                fmt(median_or_none(c.seconds), ".3f"),
                fmt(c.rate, ",.0f"),
                fmt_x(c.rate / base) if base and c.rate else "",
                f"{fmt(jvm, '.2f')} + {fmt(py, '.2f')}",
                fmt(others, ".2f"),
                span(c.rates),
            ]
        )
    return HEADERS, rows, RIGHT


def targets(cells: dict[str, Cell]) -> list[str]:
    out = []
    rate = {p: c.rate for p, c in cells.items()}
    for path in ("aeronio", "raw", "json", "stream", "python", "split", "jvm"):
        base = baseline(cells, path)
        if rate.get(path) and base:
            ratio, target = rate[path] / base, TARGET.get(path, 1.0)
            out.append(
                f"{PATHS[path]} at least {target:g}x {BASELINE.get(path, 'parquet')}'s rows/s: "
                f"{rate[path]:,.0f} vs {base:,.0f} = {fmt_x(ratio)} -> {verdict(ratio >= target)}"
            )
    if rate.get("cached") and rate.get("parquet"):
        out.append(
            f"Spark's own cache of the same rows (in memory) vs parquet: "
            f"{rate['cached']:,.0f} vs {rate['parquet']:,.0f} rows/s = "
            f"{fmt_x(rate['cached'] / rate['parquet'])}"
            + (
                f"; the fixed layout at {fmt_x(rate['aeronio'] / rate['cached'])} the cache's"
                if rate.get("aeronio")
                else ""
            )
        )
    if rate.get("split") and rate.get("rows"):
        out.append(
            f"Arrow batches vs row by row (the same partitions and decode): "
            f"{rate['split']:,.0f} vs {rate['rows']:,.0f} rows/s = "
            f"{fmt_x(rate['split'] / rate['rows'])}"
        )
    if rate.get("split") and rate.get("arrow"):
        out.append(
            f"split vs the floor of a Python data source (ready Arrow batches, the same "
            f"partitions): {fmt_x(rate['split'] / rate['arrow'])}; the floor vs Parquet: "
            + (fmt_x(rate["arrow"] / rate["parquet"]) if rate.get("parquet") else "n/a")
        )
    return out


NOTES = [
    "Every run's aggregates equal numpy's, exactly (avg(price) too: its sums are exact), so "
    "every path's equal every other's; a difference fails the benchmark.",
    "rows/s: records aggregated per second of wall time, from the action's start to collect() "
    "returning (planning included); vs parquet: over Parquet's rows/s, same run (stream's: "
    "over copy's). stream and copy: records written to a Parquet sink per second, from the "
    "query's start to its end (the aggregation of what was written checked after, untimed).",
    "read MB: recorded bytes for the aeronio paths (a 32-byte record is a 64-byte frame: its "
    "header and payload), the file for the others. Parquet's is dictionary-encoded and "
    "compressed, and Parquet reads only the four columns the aggregation uses: a Python data "
    "source gets no column pruning (PySpark 4.3) and hands over all five (jvm prunes).",
    "CPU s: the median CPU seconds of a run in the Spark JVM (all threads) and in its Python "
    "workers (from /proc); others: the machine's busy time in that run not used by this "
    "benchmark's processes, plus the time the hypervisor stole (0: the run had the machine).",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Spark reads of recordings: rows/s of a full scan and aggregation of "
        "fixed-layout records through the aeronio source, beside Parquet, in one session.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--count", type=int, default=10_000_000, help="records (rows)")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds after the warm-ups")
    parser.add_argument("--warmups", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"from {','.join(PATHS)}")
    parser.add_argument("--symbols", type=int, default=100, help="distinct symbols (groups)")
    parser.add_argument(
        "--term-length", type=int, default=64 * 1024 * 1024, help="the recorded IPC term"
    )
    parser.add_argument(
        "--segment-length", type=int, default=1 << 30, help="archive segment files (<= 1 GiB)"
    )
    parser.add_argument("--batch-rows", type=int, default=4096, help="records per offer_batch")
    parser.add_argument(
        "--max-partition-bytes",
        default="320m",
        help="the aeronio path's max_partition_bytes (the default gives 2 partitions of "
        "10,000,000 records, one per core)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument(
        "--shuffle-partitions", type=int, default=2, help="spark.sql.shuffle.partitions"
    )
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory")
    parser.add_argument("--dir", default=None, help="where the files go (default: temp dir)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to record in")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="TOP",
        help="after the runs: the source's read in this process (timed, cProfile's TOP "
        "functions, by stage), each path's scan alone (noop sink), and Spark's perf profile of "
        "the aeronio path's Python workers",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: 1,000,000 records, 1 repeat"
    )
    parser.add_argument("--markdown", action="store_true", help="also print a markdown report")
    parser.add_argument("--out", metavar="FILE", help="write the markdown report to FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    unwind_on_sigterm()
    if args.quick:
        args.count, args.repeats, args.warmups = 1_000_000, 1, 1
    require_positive(parser, args, ("count", "repeats", "symbols", "batch_rows", "timeout"))
    if args.warmups < 0:
        parser.error(f"--warmups must be 0 or more, not {args.warmups}")
    paths = split_modes(parser, args.paths, PATHS, "--paths")
    if not paths:
        parser.error("--paths: none given")
    term, segment = args.term_length, args.segment_length
    if not (65536 <= term <= segment <= 1 << 30) or term & (term - 1) or segment & (segment - 1):
        parser.error("--term-length, --segment-length: powers of two, 64 KiB <= term <= segment")
    if args.max_partition_bytes:
        try:
            parse_size(args.max_partition_bytes)
        except ValueError:
            parser.error(f"--max-partition-bytes: a size, not {args.max_partition_bytes!r}")
    opts = Options(
        count=args.count,
        symbols=args.symbols,
        term_length=term,
        segment_length=segment,
        batch_rows=args.batch_rows,
        max_partition_bytes=args.max_partition_bytes,
        master=args.master,
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
        timeout=args.timeout,
    )
    base = Path(tempfile.mkdtemp(prefix="aeronio-bench-spark-", dir=args.dir))
    try:
        return run(args, argv, opts, paths, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(args, argv, opts: Options, paths: list[str], base: Path) -> int:
    import pyspark

    n = opts.count
    info = machine_info(with_load=True)
    archive_dir, arrow = base / "archive", base / "records.arrow"
    parquet = base / "records.parquet"
    progress(f"{n:,} records of {RECORD.itemsize} B ({SCHEMA}) in {base}")
    started = time.perf_counter()
    records = make_records(n, opts.symbols)
    expected = {"records": expected_aggregates(records, opts.symbols)}
    if any(p in RAW_PATHS for p in paths):
        expected["raw"] = expected_raw(records)
    json = json_records(records) if {"json", "parquet_json"} & set(paths) else None
    progress(f"    made, and aggregated by numpy, in {time.perf_counter() - started:.1f} s")
    payloads = {STREAM_ID: records.view(np.uint8).reshape(n, RECORD.itemsize)}
    if json is not None:
        payloads[JSON_STREAM_ID] = json
    recordings = record(payloads, archive_dir, opts)
    recorded = recordings[STREAM_ID]
    record_rate = n / recorded["seconds"]
    progress(
        f"    recorded: {recorded['end']:,} B in {recorded['seconds']:.2f} s "
        f"({record_rate / 1e6:.1f} M records/s, offer_batch of {opts.batch_rows})"
    )
    started = time.perf_counter()
    write_files(records, json, base, arrow, opts.batch_records)
    del json
    progress(
        f"    Parquet {parquet.stat().st_size:,} B, Arrow IPC {arrow.stat().st_size:,} B, "
        f"written in {time.perf_counter() - started:.1f} s"
    )
    del records

    started = time.perf_counter()
    spark = spark_session(opts)
    progress(f"    SparkSession ({opts.master}) in {time.perf_counter() - started:.1f} s")
    try:
        dfs = frames(spark, archive_dir, base, arrow, opts)
        files = {"parquet_raw": "raw.parquet", "parquet_json": "json.parquet"}
        read_bytes = {p: (base / f).stat().st_size for p, f in files.items() if p in paths}
        read_bytes["parquet"] = read_bytes["cached"] = parquet.stat().st_size
        read_bytes["arrow"] = arrow.stat().st_size
        if JSON_STREAM_ID in recordings:
            read_bytes["json"] = recordings[JSON_STREAM_ID]["end"]
        cells = {
            p: Cell(
                p,
                n,
                dfs[SINKS.get(p, p)]().rdd.getNumPartitions(),
                read_bytes.get(SINKS.get(p, p), recorded["end"]),
            )
            for p in paths
        }
        progress(
            f"  partitions: {', '.join(f'{p} {c.partitions}' for p, c in cells.items())}; "
            f"{args.warmups} warm-up round{'s' * (args.warmups != 1)}, then {args.repeats}"
        )
        measure(dfs, cells, expected, args.warmups, args.repeats, CpuMeter(spark))
        info["load average"] += f", {load_average()} (at the end of the runs)"
        used = [u for c in cells.values() for u in c.cpu]
        wall = sum(sum(c.seconds) for c in cells.values())
        cores = len(os.sched_getaffinity(0))
        info["interference"] = (
            f"over the {wall:.0f} s of timed runs, other processes used "
            f"{sum(u.others for u in used):.1f} CPU s and the hypervisor stole "
            f"{sum(u.steal for u in used):.1f} s (of {cores * wall:.0f} core-seconds)"
        )
        if args.profile:
            if "python" in paths:
                profile_decode(archive_dir, opts, args.profile)
            profile_spark(spark, dfs, paths, expected, args.profile, base)
    finally:
        spark.stop()

    info["pyspark"] = f"{pyspark.__version__}, {opts.master}, one SparkSession for every path"
    info["spark settings"] = (
        f"spark.sql.shuffle.partitions {opts.shuffle_partitions}, spark.driver.memory "
        f"{opts.driver_memory}, UI off, driver on 127.0.0.1, Python workers {sys.executable}; "
        "otherwise Spark's defaults (Parquet: vectorized reader, 128 MB splits; "
        "spark.sql.execution.arrow.maxRecordsPerBatch 10,000: the rows path's batches)"
    )
    info["records"] = (
        f"{n:,} x {RECORD.itemsize} B ({SCHEMA}), {opts.symbols} symbols; each run "
        "groupBy(symbol).agg(count(*), sum(qty), avg(price), max(ts)).collect(), checked "
        "against numpy's"
    )
    info["recording"] = (
        f"aeronio archive (in this process, before Spark), aeron:ipc?term-length="
        f"{opts.term_length}, segments {opts.segment_length:,} B, offer_batch of "
        f"{opts.batch_rows} records ({record_rate / 1e6:.1f} M records/s); read with layout "
        f"fixed (split: max_partition_bytes {opts.max_partition_bytes or '(none)'}), "
        f"batches of up to {opts.batch_records:,} rows (whole terms of at least 8 MiB)"
    )
    info["files"] = (
        "pyarrow: Parquet, one file, snappy, row groups of 1 Mi rows; Arrow IPC, one file, "
        f"batches of {opts.batch_records:,} rows"
    )
    info["repeats"] = (
        f"{args.repeats} rounds after {args.warmups} warm-up rounds (dropped), median shown"
    )
    headers, rows, right = table(cells)
    text = [f"{k:>14}: {v}" for k, v in info.items()]
    text += ["", "Full scan + aggregation", "", *text_table(headers, rows, right)]
    text += ["", "Targets:"] + [f"  {t}" for t in targets(cells)]
    text += [""] + [f"* {x}" for x in NOTES]
    print("\n".join(text))

    def markdown(command: str) -> str:
        md = ["## Spark reads of recordings", ""]
        md += [f"- **{k}**: {v}" for k, v in info.items()]
        md += [f"- **command**: `{command}`", "", *md_table(headers, rows, right), ""]
        md += [f"- {t}" for t in targets(cells)] + [""] + [f"- {x}" for x in NOTES]
        return "\n".join(md) + "\n"

    write_markdown(args, argv, "bench/spark_read.py", markdown)
    return 0


if __name__ == "__main__":
    run_main(main, interrupted_exit=True)
