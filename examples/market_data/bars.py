"""The Spark pipeline: 1-minute OHLCV bars (with VWAP and tick count) per symbol, from the
archive's recording of the feed, live and in batch.

    python examples/market_data/bars.py --archive ARCHIVE_DIR --out OUT_DIR [--driver-dir DIR]

- Live: a streaming query reads the recording as it grows (`format("aeronio")`, layout
  `fixed`: the TICK records of ticks.py) and emits a symbol's bar once its minute has closed.
  The feed's ticks are recorded in time order, so a minute is closed as soon as a later tick is
  seen: the watermark needs no delay. Each micro-batch's bars are appended to OUT/live
  (Parquet) and published as JSON messages on the bars stream (`format("aeronio")` sink through
  the driver), where the dashboard takes them: bars are a stream like any other.
- Batch: on a `finish` line on stdin (or its end) the live query takes everything recorded and
  stops; then the bars of the whole recording, the last (open) minute included, go to
  OUT/batch (Parquet).

Starts its query once the archive lists a recording of the ticks and says `ready`, then
`status` after each micro-batch, and `bars` at the end (ticks read, bars live and in batch, the
busiest symbol's last bars). Needs the examples extra (`pip install ".[examples]"`) and Java 17.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from status import say
from ticks import BARS, BARS_STREAM, SPARK_SCHEMA, TICKS_STREAM

BAR_COLUMNS = ["minute", "symbol", "open", "high", "low", "close", "volume", "vwap", "ticks"]


def spark_session():
    """A local SparkSession with the aeronio format (`aeronio.spark.local_session`)."""
    import aeronio.spark

    return aeronio.spark.local_session(
        app_name="aeronio-market-data",
        conf={
            # a short-lived JVM on a small machine: the quick compiler only (~30 % faster here)
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.streaming.stopTimeout": "30s",
        },
    )


def read_ticks(spark, archive_dir: Path, driver_dir: str | None, live: bool = False):
    """The recorded ticks, with `t`, their market time as a timestamp. With the archive's
    driver, an active recording is read to its rec-pos counter."""
    from pyspark.sql import functions as F

    reader = (spark.readStream if live else spark.read).format("aeronio")
    if driver_dir is not None:
        reader = reader.option("driver_dir", driver_dir)
    ticks = (
        reader.option("archive", str(archive_dir))
        .option("stream_id", TICKS_STREAM)
        .option("layout", "fixed")
        .schema(SPARK_SCHEMA)
        .load()
    )
    return ticks.withColumn("t", F.timestamp_micros(F.floor(F.col("ts") / 1000)))


def bars(ticks):
    """Per symbol and minute: open, high, low, close, volume, VWAP and tick count."""
    from pyspark.sql import functions as F

    return (
        ticks.groupBy(F.window("t", "1 minute").alias("w"), "symbol")
        .agg(
            F.min_by("price", "ts").alias("open"),
            F.max("price").alias("high"),
            F.min("price").alias("low"),
            F.max_by("price", "ts").alias("close"),
            F.sum("qty").alias("volume"),
            (F.sum(F.col("price") * F.col("qty")) / F.sum("qty")).alias("vwap"),
            F.count("*").alias("ticks"),
        )
        .select(F.col("w.start").alias("minute"), *BAR_COLUMNS[1:])
    )


def publish(frame, driver_dir: str) -> None:
    """Bars as JSON messages on the bars stream, through the driver."""
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


class LiveBars:
    """The streaming query and what it has emitted."""

    def __init__(self, spark, archive_dir: Path, driver_dir: str | None, out: Path):
        self.driver_dir, self.out = driver_dir, out
        self.batches = self.bars = 0
        live = read_ticks(spark, archive_dir, driver_dir, live=True).withWatermark("t", "0 seconds")
        self.query = (
            bars(live)
            .writeStream.outputMode("append")
            .foreachBatch(self.each_batch)
            .option("checkpointLocation", str(out / "checkpoint"))
            .trigger(processingTime="2 seconds")
            .start()
        )

    def each_batch(self, frame, batch_id: int) -> None:
        """A micro-batch's closed bars: to Parquet and onto the bars stream."""
        frame.persist()
        try:
            count = frame.count()
            if count:
                frame.write.mode("append").parquet(str(self.out / "live"))
                if self.driver_dir is not None:
                    publish(frame, self.driver_dir)
        finally:
            frame.unpersist()
        self.batches += 1
        self.bars += count
        say("status", {"batches": self.batches, "bars": self.bars})

    def finish(self) -> None:
        """Take everything recorded so far, then stop."""
        self.query.processAllAvailable()
        self.query.stop()


def batch_bars(spark, archive_dir: Path, driver_dir: str | None, out: Path) -> dict:
    """Every recorded tick's bars to OUT/batch; returns the figures `bars` reports."""
    from pyspark.sql import functions as F

    every = bars(read_ticks(spark, archive_dir, driver_dir)).orderBy("minute", "symbol")
    every.write.mode("overwrite").parquet(str(out / "batch"))
    done = spark.read.parquet(str(out / "batch"))
    per_symbol = done.groupBy("symbol").agg(F.sum("ticks").alias("n")).orderBy(F.desc("n"))
    busiest = per_symbol.first()
    last = done.where(F.col("symbol") == busiest.symbol).orderBy(F.desc("minute")).limit(5)
    return {
        "ticks": per_symbol.agg(F.sum("n")).first()[0],
        "batch": done.count(),
        "minutes": done.select("minute").distinct().count(),
        "last": [
            {**row.asDict(), "minute": row.minute.strftime("%H:%M")} for row in last.collect()
        ],
    }


def wait_for_recording(archive_dir: Path) -> None:
    """Until the archive's catalog lists a recording of the ticks (the query then has a
    recording to follow from its first tick)."""
    from aeronio import archive

    while True:
        if (archive_dir / "archive.catalog").exists():
            with archive.Catalog(archive_dir, readonly=True) as catalog:
                if any(d.stream_id == TICKS_STREAM for d in catalog):
                    return
        time.sleep(0.2)


def main(args: argparse.Namespace) -> None:
    """Live bars until `finish`, then batch bars; Spark stopped in any case."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM unwinds as Ctrl-C does
    spark = spark_session()
    live = None
    try:
        wait_for_recording(args.archive)
        live = LiveBars(spark, args.archive, args.driver_dir, args.out)
        say("ready")
        for line in sys.stdin:
            if line.strip() == "finish":
                break
        live.finish()
        say(
            "bars",
            {"live": live.bars, **batch_bars(spark, args.archive, args.driver_dir, args.out)},
        )
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # Spark's own stop is not to be cut short
        if live is not None and live.query.isActive:
            live.query.stop()
        spark.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=Path, required=True, help="the archive's directory")
    parser.add_argument(
        "--driver-dir", help="the archive's driver (else no bars stream: Parquet only)"
    )
    parser.add_argument("--out", type=Path, required=True, help="where the bars go (Parquet)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
