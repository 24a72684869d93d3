"""A synthetic market: random-walk prices, uneven activity across symbols and bursts.

Rules of the model
- Each symbol has a mid price (a log-normal random walk), an activity weight (Zipf-like: a few
  symbols trade much more than the rest) and a spread of 1-3 cents.
- Ticks arrive as a Poisson process at `rate` per wall-clock second; market time runs `speed`
  times faster than the wall clock, so that a short run spans many 1-minute bars.
- A burst takes one symbol for 0.3-1 s of wall time: its ticks come 5-20 times faster (at most
  `rate` more), lean to one side and drift its price 1 % that way; they are flagged BURST.
- Timestamps are strictly increasing across all symbols: a bar's open and close are never tied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ticks import BURST, TICK, last_of_each

CENT = 0.01
VOLATILITY = 0.003  # of the mid, per square root of a market minute
BURSTS_PER_S = 1 / 3
BURST_DRIFT = 0.01


@dataclass
class Burst:
    """A burst under way."""

    symbol: int
    until_ns: int  # wall clock
    rate: float  # its extra ticks per wall second
    side: int
    drift: float  # per tick, in log price


class Market:
    """Ticks of `symbols` symbols; `step(wall_ns)` makes those since the previous step (the
    first step starts the clocks: market time `start_ns` at that wall time)."""

    def __init__(self, symbols: int, rate: float, speed: float, start_ns: int, seed: int = 1):
        self.rng = np.random.default_rng(seed)
        self.symbols, self.rate, self.speed = symbols, rate, speed
        self.mid = np.exp(self.rng.normal(np.log(60), 0.8, symbols))
        weights = 1.0 / np.arange(1, symbols + 1) ** 0.8
        self.weights = self.rng.permutation(weights / weights.sum())
        self.spread = self.rng.integers(1, 4, symbols) * CENT
        # a tick's step: VOLATILITY scaled to the market time between the symbol's ticks
        minutes_per_tick = speed / (rate * self.weights) / 60
        self.sigma = VOLATILITY * np.sqrt(minutes_per_tick)
        self.start_ns = self.market_ns = start_ns
        self.wall0_ns = self.wall_ns = 0
        self.seq = 0
        self.burst: Burst | None = None

    def step(self, wall_ns: int) -> np.ndarray:
        """The ticks from the previous step to `wall_ns` (CLOCK_REALTIME), in time order."""
        if not self.wall0_ns:
            self.wall0_ns = self.wall_ns = wall_ns
            return np.zeros(0, TICK)
        elapsed_s = (wall_ns - self.wall_ns) / 1e9
        self.wall_ns = wall_ns
        rng = self.rng
        symbols = rng.choice(self.symbols, rng.poisson(self.rate * elapsed_s), p=self.weights)
        flags = np.zeros(len(symbols), np.uint8)
        if self.burst is None and rng.random() < elapsed_s * BURSTS_PER_S:
            self.burst = self._new_burst(wall_ns)
        if self.burst is not None:
            extra = rng.poisson(self.burst.rate * elapsed_s)
            symbols = np.concatenate([symbols, np.full(extra, self.burst.symbol)])
            flags = np.concatenate([flags, np.full(extra, BURST, np.uint8)])
        until_ns = self.start_ns + int((wall_ns - self.wall0_ns) * self.speed)
        ticks = self._ticks(symbols, flags, until_ns)
        ticks["wall"] = wall_ns
        if self.burst is not None and wall_ns >= self.burst.until_ns:
            self.burst = None
        return ticks

    def _new_burst(self, wall_ns: int) -> Burst:
        rng = self.rng
        symbol = int(rng.choice(self.symbols, p=self.weights))
        seconds = rng.uniform(0.3, 1.0)
        rate = min(self.rate * self.weights[symbol] * rng.uniform(5, 20), self.rate)
        side = int(rng.choice((-1, 1)))
        drift = side * BURST_DRIFT / max(1.0, rate * seconds)
        return Burst(symbol, wall_ns + int(seconds * 1e9), rate, side, drift)

    def _ticks(self, symbols: np.ndarray, flags: np.ndarray, until_ns: int) -> np.ndarray:
        rng, count = self.rng, len(symbols)
        order = rng.permutation(count)  # burst ticks interleave with the rest
        symbols, flags = symbols[order], flags[order]
        span = max(until_ns - self.market_ns, count + 1)
        ticks = np.zeros(count, TICK)
        offsets = np.sort(rng.integers(0, span - count, count)) + np.arange(count)
        ticks["ts"] = self.market_ns + offsets
        self.market_ns += span
        ticks["seq"] = self.seq + np.arange(count)
        self.seq += count
        ticks["symbol"] = symbols
        ticks["flags"] = flags

        bursting = flags == BURST
        steps = rng.normal(0.0, self.sigma[symbols])
        buy_odds = np.full(count, 0.5)
        if self.burst is not None:
            steps[bursting] += self.burst.drift
            buy_odds[bursting] += 0.3 * self.burst.side
        mid = self.mid[symbols] * np.exp(_cumsum_by(symbols, steps))
        moved, last = last_of_each(symbols)
        self.mid[moved] = mid[last]

        spread = self.spread[symbols]
        ticks["bid"] = np.round(mid - spread / 2, 2)
        ticks["ask"] = np.round(ticks["bid"] + spread, 2)
        buy = rng.random(count) < buy_odds
        ticks["side"] = np.where(buy, 1, -1)
        ticks["price"] = np.where(buy, ticks["ask"], ticks["bid"])
        odd_lot = rng.random(count) < 0.2
        ticks["qty"] = np.where(
            odd_lot, rng.integers(1, 100, count), rng.geometric(0.35, count) * 100
        )
        return ticks


def _cumsum_by(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The running sum of `values` within each key, in the order given."""
    if not len(keys):
        return values.copy()
    order = np.argsort(keys, kind="stable")
    sorted_keys, sorted_values = keys[order], values[order]
    sums = np.cumsum(sorted_values)
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    lengths = np.diff(np.r_[starts, len(keys)])
    before = np.repeat(sums[starts] - sorted_values[starts], lengths)
    out = np.empty_like(values)
    out[order] = sums - before
    return out
