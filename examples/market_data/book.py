"""Per-symbol top of book and VWAP, kept from batches of ticks with numpy (no Python per tick).

The top of book of a symbol is its last tick's bid, ask and trade price; the VWAP is the
session's: sum(price * qty) / sum(qty) over every tick of the symbol since the start.
"""

from __future__ import annotations

import numpy as np
from ticks import last_of_each


class Book:
    """Top of book, volume and VWAP per symbol id (grows to the largest id seen)."""

    def __init__(self) -> None:
        self.count = np.zeros(0, np.int64)
        self.volume = np.zeros(0, np.int64)
        self.notional = np.zeros(0, np.float64)
        self.bid = np.zeros(0, np.float64)
        self.ask = np.zeros(0, np.float64)
        self.last = np.zeros(0, np.float64)
        self.ts = np.zeros(0, np.int64)

    def _grow(self, size: int) -> None:
        for name in ("count", "volume", "notional", "bid", "ask", "last", "ts"):
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def update(self, ticks: np.ndarray) -> None:
        """Take a batch of ticks (records of ticks.TICK, in time order)."""
        if not len(ticks):
            return
        symbols = ticks["symbol"].astype(np.intp)
        size = int(symbols.max()) + 1
        if size > len(self.count):
            self._grow(size)
        size = len(self.count)
        qty = ticks["qty"]
        self.count += np.bincount(symbols, minlength=size)
        self.volume += np.bincount(symbols, weights=qty, minlength=size).astype(np.int64)
        self.notional += np.bincount(symbols, weights=ticks["price"] * qty, minlength=size)
        moved, last = last_of_each(symbols)
        self.bid[moved] = ticks["bid"][last]
        self.ask[moved] = ticks["ask"][last]
        self.last[moved] = ticks["price"][last]
        self.ts[moved] = ticks["ts"][last]

    def vwap(self) -> np.ndarray:
        """The VWAP per symbol (NaN for a symbol with no tick yet)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.notional / self.volume

    def rows(self) -> list[dict]:
        """One dict per symbol that traded: symbol, count, volume, bid, ask, last, vwap, ts."""
        vwap = self.vwap()
        return [
            {
                "symbol": s,
                "count": int(self.count[s]),
                "volume": int(self.volume[s]),
                "bid": float(self.bid[s]),
                "ask": float(self.ask[s]),
                "last": float(self.last[s]),
                "vwap": float(vwap[s]),
                "ts": int(self.ts[s]),
            }
            for s in np.flatnonzero(self.count).tolist()
        ]
