"""examples/market_data end to end: its one command (run.py) in reduced size, as a user runs it,
its dashboard in chromium while it runs, then every figure it made checked against the
archive's recording, read here from the segment files with no archive running.

What is checked: the rates table shows ticks flowing through every process; each consumer got
every tick of its channel (count and CRC-32 equal to the feed's, and to the recording's) and its
top of book and VWAP are those recomputed from the recording; Spark's batch bars are the bars
computed with pandas from the recorded ticks, its live bars are those of every closed minute,
and the bars stream (recorded too) carried them; the page shows live prices, the book of every
symbol and Spark's bars as Parquet holds them. Ctrl-C ends the run cleanly: exit status 0, the
driver's directory removed, no process left.

One run serves the module (Spark takes a while to start): the browser test, first, looks at the
dashboard while the feed runs; the others end the run with Ctrl-C once Spark's live bars show.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aeronio import archive
from tests.support.child import Child

pytestmark = [pytest.mark.slow, pytest.mark.spark]

EXAMPLE = Path(__file__).parents[2] / "examples" / "market_data"
SYMBOLS = 6
# The feed runs until the tests' Ctrl-C, which comes once Spark's live bars show. Spark's first
# bars take ~80 s here from the run's start with the run's processes busy on both cores (the
# session starts in ~40 s, its first micro-batches with the sink take the rest); machines
# 2-3 times slower must still pass, hence the long deadline (only a failure waits it out).
RUN_ARGS = ["--symbols", SYMBOLS, "--rate", 2000, "--speed", 60, "--seconds", 900, "--port", 0]
SPARK_BARS_S = 480
ROW = re.compile(r"^\s*\d+ \|")
DATA, FRAME_HEADER, UNFRAGMENTED = 1, 32, 0xC0


def example_module(name: str):
    """One of the example's modules, loaded from its file (the example is no package)."""
    spec = importlib.util.spec_from_file_location(f"market_data_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ticks_module = example_module("ticks")


class MarketRun:
    """run.py as a child process; `finish()` ends it with Ctrl-C once Spark's live bars show
    in its table, and returns all it printed."""

    def __init__(self, work: Path):
        self.work = work
        argv = [sys.executable, str(EXAMPLE / "run.py"), *map(str, RUN_ARGS), "--work", str(work)]
        self.child = Child(argv, "run.py")
        try:
            self.driver_dir = self.child.expect("driver:", 60)
            self.url = self.child.expect("dashboard:", 30)
        except BaseException:  # its children and their drivers' directories go with it
            self.child.stop(signal.SIGINT, timeout=120)
            raise
        self.status: int | None = None
        self.deadline = time.monotonic() + SPARK_BARS_S

    @property
    def running(self) -> bool:
        return self.status is None

    def wait_for_spark_bars(self) -> None:
        """Until the table shows Spark's live bars; fails at the run's deadline for them, or if
        run.py ends first, with what it and Spark printed."""
        while not any(spark_bars(row) for row in table(self.child.stdout_seen)):
            try:
                if self.child.next_line(self.deadline - time.monotonic()) is None:
                    pytest.fail(f"run.py ended before Spark's bars: {self.describe()}")
            except queue.Empty:
                pytest.fail(f"no Spark bars in {SPARK_BARS_S} s: {self.describe()}")

    def finish(self) -> list[str]:
        """Ctrl-C once the table shows Spark's live bars (at once if already done); every line
        run.py printed, once it has exited."""
        if self.status is None:
            try:
                self.wait_for_spark_bars()
            finally:
                self.child.send_signal(signal.SIGINT)
                self.status = self.child.wait(300)
        return self.child.lines()

    def describe(self) -> str:
        """run.py's state and last lines, and the end of Spark's log."""
        log = self.work / "spark.log"
        spark = log.read_text(errors="replace")[-3000:] if log.exists() else "(none)"
        return f"{self.child.describe()}\nspark.log ends:\n{spark}"


def table(lines: list[str]) -> list[list[str]]:
    """The rates table's rows, as cells: s, feed, book IPC, book multicast, archive, dashboard,
    Spark bars (the books' cells hold `msg/s lag-ms lag-B`, the others' `msg/s lag-B`)."""
    return [[cell.strip() for cell in line.split("|")] for line in lines if ROW.match(line)]


def number(text: str) -> float | None:
    """A cell's number ("12,345"), None for "-"."""
    return None if text == "-" else float(text.replace(",", ""))


def spark_bars(row: list[str]) -> bool:
    """The row shows Spark's live bars."""
    return (number(row[6]) or 0) > 0


def recorded_messages(archive_dir: Path, stream_id: int) -> list[bytes]:
    """Every message of the stream's recordings, from the segment files."""
    messages = []
    with archive.Catalog(archive_dir, readonly=True) as catalog:
        for d in [d for d in catalog if d.stream_id == stream_id]:
            assert d.stop_position >= d.start_position, f"recording {d.recording_id} stopped"
            layout = catalog.layout(d.recording_id)
            with archive.RecordingReader(
                archive_dir, layout, d.start_position, d.stop_position
            ) as reader:
                for block in reader.blocks():
                    messages += data_frames(bytes(block.data))
                    block.data.release()
    return messages


def data_frames(block: bytes) -> list[bytes]:
    """The payloads of a block's data frames (PAD frames skipped), each a whole message."""
    payloads, offset = [], 0
    while offset < len(block):
        length = int.from_bytes(block[offset : offset + 4], "little", signed=True)
        flags, kind = block[offset + 5], int.from_bytes(block[offset + 6 : offset + 8], "little")
        if kind == DATA:
            assert flags == UNFRAGMENTED, f"a fragment at block offset {offset}"
            payloads.append(block[offset + FRAME_HEADER : offset + length])
        offset += (length + 31) & ~31
    return payloads


def recorded_ticks(work: Path) -> np.ndarray:
    payloads = recorded_messages(work / "archive", ticks_module.TICKS_STREAM)
    return np.frombuffer(b"".join(payloads), ticks_module.TICK)


def reference_bars(ticks: np.ndarray) -> pd.DataFrame:
    """The 1-minute bars computed by pandas from the ticks themselves."""
    frame = pd.DataFrame(ticks)
    frame["minute"] = frame["ts"] // 60_000_000_000 * 60_000_000_000
    frame["notional"] = frame["price"] * frame["qty"]
    grouped = frame.sort_values("ts").groupby(["minute", "symbol"])
    bars = grouped.agg(
        open=("price", "first"), high=("price", "max"), low=("price", "min"),
        close=("price", "last"), volume=("qty", "sum"), notional=("notional", "sum"),
        ticks=("price", "size"),
    ).reset_index()  # fmt: skip
    bars["vwap"] = bars["notional"] / bars["volume"]
    return bars.drop(columns="notional").sort_values(["minute", "symbol"], ignore_index=True)


def spark_bars_frame(path: Path) -> pd.DataFrame:
    """Bars Spark wrote as Parquet, `minute` in ns since the epoch, in the reference's order."""
    frame = pd.read_parquet(path)
    minutes = pd.to_datetime(frame["minute"])
    if minutes.dt.tz is not None:
        minutes = minutes.dt.tz_convert("UTC").dt.tz_localize(None)
    frame["minute"] = minutes.astype("datetime64[ns]").astype("int64")
    columns = ["minute", "symbol", "open", "high", "low", "close", "volume", "ticks", "vwap"]
    return frame[columns].sort_values(["minute", "symbol"], ignore_index=True)


def assert_bars_equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        got.reset_index(drop=True), want.reset_index(drop=True)[got.columns],
        check_dtype=False, rtol=1e-9,
    )  # fmt: skip


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    pytest.importorskip("pyspark.sql.datasource", reason='needs pip install ".[examples]"')
    pytest.importorskip("aiohttp", reason='needs pip install ".[examples]"')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("needs Java 17 for Spark: apt-get install openjdk-17-jdk-headless")
    run = MarketRun(tmp_path_factory.mktemp("market-data"))
    try:
        yield run
    finally:
        run.child.stop(signal.SIGINT, timeout=120)


@pytest.mark.browser
def test_the_dashboard_shows_live_prices_the_book_and_spark_bars(market, browser, artifacts):
    """While the feed runs: the chart fills with sampled prices, the book has every symbol (bid
    below ask), Spark's bars come in over the bars stream and are what Spark wrote to Parquet;
    choosing another symbol (list or book row) charts it."""
    assert market.running, "this test looks at the run while it goes on: it runs first"
    names = ticks_module.symbol_names(SYMBOLS)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(market.url)
        page.wait_for_function("Number(document.getElementById('chart').dataset.points) >= 20")
        assert page.inner_text("#connection") == "live"
        assert page.eval_on_selector_all("#symbol option", "os => os.map(o => o.text)") == names
        assert page.inner_text("#chart-title") == names[0]
        book = page.eval_on_selector_all(
            "#book tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
        )
        assert [row[0] for row in book] == names
        for row in book:
            assert number(row[1]) < number(row[2]), f"bid below ask: {row}"
            assert number(row[5]) > 0 and number(row[6]) > 0

        market.wait_for_spark_bars()
        page.wait_for_selector("#bars tbody tr", timeout=60_000)  # over the bars stream
        page.wait_for_function("Number(document.getElementById('chart').dataset.candles) > 0")
        shown = page.eval_on_selector_all(
            "#bars tbody tr",
            "rows => rows.map(r => [r.dataset.minute, ...[...r.cells].map(c => c.textContent)])",
        )
        live = spark_bars_frame(market.work / "bars" / "live")
        live = live[live["symbol"] == 0].set_index("minute")
        for iso, hhmm, *values in shown:
            minute = pd.Timestamp(iso).tz_convert("UTC").value
            assert hhmm == pd.Timestamp(minute).strftime("%H:%M")
            bar = live.loc[minute]
            assert values == [
                *(f"{bar[k]:.2f}" for k in ("open", "high", "low", "close")),
                f"{int(bar['volume']):,}", f"{bar['vwap']:.4f}", f"{int(bar['ticks']):,}",
            ]  # fmt: skip
        assert [row[0] for row in shown] == sorted((row[0] for row in shown), reverse=True)

        page.select_option("#symbol", "2")
        page.wait_for_function(
            f"document.getElementById('chart-title').textContent == {names[2]!r}"
        )
        page.click(f"#book tbody tr[data-symbol='{SYMBOLS - 1}']")
        page.wait_for_selector(f"#book tbody tr.chosen[data-symbol='{SYMBOLS - 1}']")
        assert page.input_value("#symbol") == str(SYMBOLS - 1)
        page.wait_for_function(
            f"document.getElementById('chart').dataset.symbol == '{SYMBOLS - 1}' && "
            "Number(document.getElementById('chart').dataset.points) >= 20"
        )
        page.wait_for_selector(f"#bars tbody[data-symbol='{SYMBOLS - 1}'] tr")
        page.screenshot(path=str(artifacts / "market-data-dashboard.png"), full_page=True)
    finally:
        page.close()
    assert errors == []


def test_the_run_shows_rates_and_ends_cleanly_on_ctrl_c(market):
    """Every process's rate is in the table while the feed runs, the books' lags too; Ctrl-C
    ends the run with every end figure checked (status 0), the driver's directory removed and
    none of the run's processes left."""
    lines = market.finish()
    assert market.status == 0, market.describe()
    rows = table(lines)
    flowing = [r for r in rows if all((number(c.split()[0]) or 0) > 0 for c in r[1:6])]
    assert len(flowing) >= 5, rows
    for row in flowing:
        for book in row[2:4]:
            msgs, lag_ms, lag_bytes = map(number, book.split())
            assert 0 <= lag_ms < 5000 and lag_bytes >= 0
    assert any(spark_bars(row) for row in rows)
    assert "stopping: the feed ends, the rest drains (again to stop at once)" in lines
    end = lines[lines.index("at the end:") + 1 :]
    checks = [line.strip() for line in end if line.startswith("  ok ") or "BAD" in line]
    assert [c.split(":")[0] for c in checks] == [
        "ok  book (IPC)", "ok  book (multicast)", "ok  archive", "ok  Spark",
    ]  # fmt: skip
    assert not Path(market.driver_dir).exists()
    marks = [str(market.work).encode(), market.driver_dir.encode()]  # in the children's argv
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if any(mark in cmdline.read_bytes() for mark in marks):
                left.append(cmdline.parent.name)
        except OSError:
            continue  # gone meanwhile
    assert left == [], f"processes of the run still there: {left}"


def test_the_books_are_those_of_the_recorded_ticks(market):
    """The recording holds every tick once, in order, byte for byte what each consumer got; each
    consumer's top of book and VWAP are those recomputed from it."""
    market.finish()
    ticks = recorded_ticks(market.work)
    assert len(ticks) > 10_000
    assert np.array_equal(ticks["seq"], np.arange(len(ticks)))
    crc = zlib.crc32(ticks.tobytes())
    for name in ("book-ipc.json", "book-multicast.json"):
        summary = json.loads((market.work / name).read_text())
        assert (summary["count"], summary["crc"], summary["breaks"]) == (len(ticks), crc, 0)
        for row in summary["book"]:
            mine = ticks[ticks["symbol"] == row["symbol"]]
            last = mine[-1]
            assert (row["bid"], row["ask"], row["last"], row["ts"]) == (
                last["bid"], last["ask"], last["price"], last["ts"],
            )  # fmt: skip
            assert (row["count"], row["volume"]) == (len(mine), int(mine["qty"].sum()))
            vwap = float((mine["price"] * mine["qty"]).sum() / mine["qty"].sum())
            assert row["vwap"] == pytest.approx(vwap, rel=1e-12)
        assert sorted(row["symbol"] for row in summary["book"]) == list(range(SYMBOLS))


def test_spark_bars_are_those_of_the_recorded_ticks(market):
    """Batch: every minute's bars, the last (open) one included, equal pandas' from the recorded
    ticks. Live: exactly the bars of the closed minutes (all but the last), each once. The bars
    stream, recorded, carried the live bars."""
    market.finish()
    want = reference_bars(recorded_ticks(market.work))
    assert want["minute"].nunique() >= 10
    assert_bars_equal(spark_bars_frame(market.work / "bars" / "batch"), want)

    live = spark_bars_frame(market.work / "bars" / "live")
    closed = want[want["minute"] < want["minute"].max()]
    assert_bars_equal(live, closed)

    published = [
        json.loads(m) for m in recorded_messages(market.work / "archive", ticks_module.BARS_STREAM)
    ]
    carried = {(pd.Timestamp(b["minute"]).value, b["symbol"], b["volume"]) for b in published}
    assert carried == set(zip(live["minute"], live["symbol"], live["volume"], strict=True))
