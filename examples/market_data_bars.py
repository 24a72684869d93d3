"""Market-data bars with Spark over aeronio recordings: the pipeline of docs/spark.md.

1. Ticks (`ts long, symbol int, price double, qty int`, little-endian records) are published
   on an aeronio stream and recorded by an aeronio archive.
2. A batch job reads the recording (`format("aeronio")`, `layout fixed`) and computes per
   symbol and minute the open, high, low, close, volume and VWAP.
3. A streaming job keeps the same bars from the recording while ticks still arrive, with a
   one-minute watermark on the tick time: a minute's bar comes out once the minute is closed.
4. Each micro-batch's bars go to Parquet and are published back on an aeronio stream as JSON
   messages (`format("aeronio")` sink), itself recorded: bars are a stream like any other.

Run it: `python examples/market_data_bars.py` (needs `pip install -e ".[spark]"` and Java 17).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

import aeronio
from aeronio import archive

TICKS = "aeron:ipc?term-length=1m"
TICKS_STREAM = 2001
BARS = "aeron:ipc?term-length=1m"
BARS_STREAM = 2002
TICK_SCHEMA = "ts long, symbol int, price double, qty int"
TICK = np.dtype([("ts", "<i8"), ("symbol", "<i4"), ("price", "<f8"), ("qty", "<i4")])
MINUTE_NS = 60_000_000_000


def make_ticks(count: int, minutes: int, symbols: int = 3, seed: int = 1) -> np.ndarray:
    """`count` ticks over `minutes` minutes, in time order, from 2026-01-01 00:00 UTC."""
    rng = np.random.default_rng(seed)
    ticks = np.zeros(count, TICK)
    start = 1_767_225_600_000_000_000
    spread = np.sort(rng.integers(0, minutes * MINUTE_NS - count, count))
    ticks["ts"] = start + spread + np.arange(count)  # strictly increasing: one open, one close
    ticks["symbol"] = rng.integers(0, symbols, count)
    walk = np.cumsum(rng.normal(0, 0.05, count))
    ticks["price"] = np.round(100 + ticks["symbol"] * 10 + walk, 2)
    ticks["qty"] = rng.integers(1, 500, count)
    return ticks


class Recorder:
    """An embedded driver and an archive on an event loop in a thread of this process: Spark's
    Python workers (other processes) read the archive's files and attach to the driver."""

    def __init__(self, archive_dir: Path):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.archive_dir = archive_dir
        self.run(self._start())

    def run(self, coro, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        self.aeron = await aeronio.connect()
        self.archive = archive.Archive.launch(
            self.aeron, archive_dir=self.archive_dir, **archive.LOCAL_ARCHIVE
        )
        await self.archive.start()
        self.client = await archive.connect(self.aeron, **archive.LOCAL)
        for channel, stream in ((TICKS, TICKS_STREAM), (BARS, BARS_STREAM)):
            await self.client.start_recording(channel, stream)
        self.ticks = await self.aeron.add_exclusive_publication(TICKS, TICKS_STREAM)

    async def publish(self, ticks: np.ndarray, pause_s: float = 0.0, chunk: int = 2000) -> int:
        """Offer the ticks (records of TICK, `chunk` a batch, `pause_s` between batches) and
        wait until they are recorded; returns the recorded position."""
        records = ticks.view(np.uint8).reshape(len(ticks), TICK.itemsize)
        for start in range(0, len(records), chunk):
            await self.ticks.offer_batch(records[start : start + chunk])
            if pause_s:
                await asyncio.sleep(pause_s)
        recording_id = await self.client.find_last_matching_recording(
            0, "aeron:ipc", TICKS_STREAM, self.ticks.session_id
        )
        async with asyncio.timeout(30):
            while await self.client.get_recording_position(recording_id) < self.ticks.position:
                await asyncio.sleep(0.005)
        return self.ticks.position

    @property
    def driver_dir(self) -> str:
        return self.aeron.driver_dir

    def close(self) -> None:
        async def close():
            await self.client.close()
            await self.archive.close()
            await self.aeron.close()

        self.run(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def spark_session():
    """A local SparkSession with the aeronio format (settings known to work on one host)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import aeronio.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("aeronio-bars")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    aeronio.spark.register(spark)
    return spark


def bars(ticks):
    """Per symbol and minute: open, high, low, close, volume and VWAP (a DataFrame of ticks
    with a `t` timestamp column)."""
    from pyspark.sql import functions as F

    return ticks.groupBy(F.window("t", "1 minute").alias("w"), "symbol").agg(
        F.min_by("price", "ts").alias("open"),
        F.max("price").alias("high"),
        F.min("price").alias("low"),
        F.max_by("price", "ts").alias("close"),
        F.sum("qty").alias("volume"),
        (F.sum(F.col("price") * F.col("qty")) / F.sum("qty")).alias("vwap"),
    ).select(
        F.col("w.start").alias("minute"),
        "symbol", "open", "high", "low", "close", "volume", "vwap",
    )  # fmt: skip


def read_ticks(spark, archive_dir: Path, stream: bool = False):
    from pyspark.sql import functions as F

    reader = spark.readStream if stream else spark.read
    ticks = (
        reader.format("aeronio")
        .option("archive", str(archive_dir))
        .option("stream_id", TICKS_STREAM)
        .option("layout", "fixed")
        .schema(TICK_SCHEMA)
        .load()
    )
    return ticks.withColumn("t", F.timestamp_micros(F.floor(F.col("ts") / 1000)))


def publish_bars(frame, driver_dir: str) -> None:
    """Bars as JSON messages on the bars stream (through the driver that records it)."""
    from pyspark.sql import functions as F

    (
        frame.select(F.to_json(F.struct(*frame.columns)).cast("binary").alias("data"))
        .write.format("aeronio")
        .mode("append")
        .option("channel", BARS)
        .option("stream_id", BARS_STREAM)
        .option("driver_dir", driver_dir)
        .save()
    )


def batch_bars(spark, archive_dir: Path):
    """The bars of everything recorded so far (step 2)."""
    return bars(read_ticks(spark, archive_dir)).orderBy("minute", "symbol")


def start_streaming_bars(spark, archive_dir: Path, out: Path, driver_dir: str):
    """Step 3 and 4: closed minutes' bars to Parquet and to the bars stream, per micro-batch."""
    live = read_ticks(spark, archive_dir, stream=True).withWatermark("t", "1 minute")

    def each_batch(frame, batch_id: int) -> None:
        if frame.isEmpty():
            return
        frame.write.mode("append").parquet(str(out / "bars.parquet"))
        publish_bars(frame, driver_dir)

    return (
        bars(live)
        .writeStream.outputMode("append")
        .foreachBatch(each_batch)
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="aeronio-bars-"))
    recorder = Recorder(work / "archive")
    spark = spark_session()
    try:
        ticks = make_ticks(60_000, minutes=6)
        split = int(np.searchsorted(ticks["ts"], ticks["ts"][0] + 3 * MINUTE_NS))
        first, rest = ticks[:split], ticks[split:]
        recorder.run(recorder.publish(first))
        print("batch bars of the first three minutes:")
        batch_bars(spark, work / "archive").show(12, truncate=False)
        query = start_streaming_bars(spark, work / "archive", work, recorder.driver_dir)
        recorder.run(recorder.publish(rest, pause_s=0.05))
        query.processAllAvailable()
        query.stop()
        streamed = spark.read.parquet(str(work / "bars.parquet")).orderBy("minute", "symbol")
        print(f"streamed bars of closed minutes (Parquet in {work}):")
        streamed.show(18, truncate=False)
    finally:
        spark.stop()
        recorder.close()


if __name__ == "__main__":
    main()
