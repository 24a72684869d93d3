"""The market-data pipeline of examples/market_data_bars.py, checked: ticks recorded by an
archive, batch bars from the recording, streaming bars of closed minutes while ticks arrive,
bars to Parquet and published back (and recorded) as JSON messages."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).parents[2] / "examples" / "market_data_bars.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("market_data_bars", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_bars(ticks: np.ndarray) -> pd.DataFrame:
    """The bars computed by pandas from the ticks themselves."""
    frame = pd.DataFrame(ticks)
    frame["minute"] = pd.to_datetime(frame["ts"] // 60_000_000_000 * 60, unit="s")
    frame["notional"] = frame["price"] * frame["qty"]
    grouped = frame.sort_values("ts").groupby(["minute", "symbol"])
    bars = grouped.agg(
        open=("price", "first"), high=("price", "max"), low=("price", "min"),
        close=("price", "last"), volume=("qty", "sum"), notional=("notional", "sum"),
    ).reset_index()  # fmt: skip
    bars["vwap"] = bars["notional"] / bars["volume"]
    return bars.drop(columns="notional").sort_values(["minute", "symbol"], ignore_index=True)


def as_frame(rows) -> pd.DataFrame:
    frame = pd.DataFrame([r.asDict() for r in rows])
    frame["minute"] = pd.to_datetime(frame["minute"])
    return frame.sort_values(["minute", "symbol"], ignore_index=True)


def test_bars_from_the_recording_batch_and_streaming(spark, example, tmp_path):
    recorder = example.Recorder(tmp_path / "archive")
    try:
        ticks = example.make_ticks(20_000, minutes=5, seed=3)
        split = int(np.searchsorted(ticks["ts"], ticks["ts"][0] + 2 * example.MINUTE_NS))
        recorder.run(recorder.publish(ticks[:split]))
        batch = as_frame(example.batch_bars(spark, tmp_path / "archive").collect())
        pd.testing.assert_frame_equal(
            batch, reference_bars(ticks[:split]), check_dtype=False, rtol=1e-9
        )

        query = example.start_streaming_bars(
            spark, tmp_path / "archive", tmp_path, recorder.driver_dir
        )
        try:
            recorder.run(recorder.publish(ticks[split:], pause_s=0.02))
            query.processAllAvailable()
        finally:
            query.stop()
        streamed = as_frame(spark.read.parquet(str(tmp_path / "bars.parquet")).collect())
        every = reference_bars(ticks)
        # a minute comes out once the watermark (the newest tick time - 1 minute) passed its
        # end: all but the last minute or two
        closed = every[every["minute"] + pd.Timedelta(minutes=2) <= every["minute"].max()]
        assert len(closed) >= 3 * 3
        pd.testing.assert_frame_equal(
            streamed[streamed["minute"].isin(closed["minute"])].reset_index(drop=True),
            closed.reset_index(drop=True), check_dtype=False, rtol=1e-9,
        )  # fmt: skip
        assert set(streamed["minute"]) <= set(every["minute"])

        # the bars went out on the bars stream, which the archive recorded
        published = (
            spark.read.format("aeronio").option("archive", str(tmp_path / "archive"))
            .option("stream_id", example.BARS_STREAM).load().collect()
        )  # fmt: skip
        decoded = [json.loads(row.data) for row in published]
        assert len(decoded) == len(streamed)
        assert sorted((d["minute"][:19], d["symbol"], d["volume"]) for d in decoded) == sorted(
            (m.strftime("%Y-%m-%dT%H:%M:%S"), s, v)
            for m, s, v in zip(
                streamed["minute"], streamed["symbol"], streamed["volume"], strict=True
            )
        )
    finally:
        recorder.close()
