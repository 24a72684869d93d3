"""The table run.py prints every second: messages per second of each process (from its own
`status` line) and each subscriber's lag, in milliseconds (how old the newest tick was when a
consumer got it) and in bytes (the feed's position minus the subscriber's, both read at one
instant from the driver's counters, as `aeronio streams` shows them).
"""

from __future__ import annotations

from aeronio.counters import CountersReader
from aeronio.counters.stream_stat import streams

HEADER = (
    "      |    feed |      book (IPC)         |   book (multicast)      |     archive     "
    "|    dashboard    | Spark\n"
    "    s |   msg/s |   msg/s  lag ms   lag B |   msg/s  lag ms   lag B |   msg/s   lag B "
    "|   msg/s   lag B |  bars"
)
ROWS_PER_HEADER = 20


class Lags:
    """Subscribers' lags in bytes from the driver's counters (read only: no client needed)."""

    def __init__(self, driver_dir: str):
        self.driver_dir = driver_dir
        self.reader = CountersReader.open(driver_dir)

    def read(self) -> dict[int, int]:
        """Subscription registration id -> the publisher's position minus the subscriber's, for
        the streams whose publication is still there."""
        lags = {}
        for stream in streams(self.reader, self.driver_dir):
            published = stream.positions.get("pub-pos")
            if published is not None:
                for subscription, position in stream.subscribers.items():
                    lags[subscription] = max(0, published - position)
        return lags

    def close(self) -> None:
        """Unmap the counters."""
        self.reader.close()


def _n(value: float | None, width: int) -> str:
    return f"{'-' if value is None else f'{value:,.0f}':>{width}}"


def _ms(value: float | None) -> str:
    return f"{'-' if value is None else f'{value:.1f}':>7}"


def row(seconds: float, statuses: list[dict], lags: list[int | None]) -> str:
    """One line of the table from the latest `status` payloads ({} if none yet) of the feed, the
    two books, the archive, the dashboard and Spark, and the lags in bytes of the books, the
    archive and the dashboard."""
    feed, *books, archive, dashboard, spark = statuses
    cells = [f"{seconds:5.0f}", f" {_n(feed.get('rate'), 7)}"]
    for book, lag in zip(books, lags[:2], strict=True):
        cells.append(f" {_n(book.get('rate'), 7)} {_ms(book.get('lag_ms'))} {_n(lag, 7)}")
    for status, lag in ((archive, lags[2]), (dashboard, lags[3])):
        cells.append(f" {_n(status.get('rate'), 7)} {_n(lag, 7)}")
    cells.append(f" {_n(spark.get('bars'), 5)}")
    return " |".join(cells)
