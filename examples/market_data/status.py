"""What the example's processes tell run.py: one line per event on stdout, `<tag> <json>`
(`ready`, `status` once a second, `done`, `final`), and message rates for those lines."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aeronio


def say(tag: str, payload: object = None) -> None:
    """Print `<tag> <payload as JSON>` and flush (stdout is a pipe to run.py)."""
    print(tag if payload is None else f"{tag} {json.dumps(payload)}", flush=True)


class Meter:
    """A message count and its rate between two looks."""

    def __init__(self) -> None:
        self.count = 0
        self._seen = (time.monotonic(), 0)

    def add(self, count: int) -> None:
        """Count `count` more messages."""
        self.count += count

    def rate(self) -> float:
        """Messages per second since the previous call (or since the start)."""
        now = time.monotonic()
        then, count = self._seen
        self._seen = (now, self.count)
        return (self.count - count) / max(now - then, 1e-9)


async def report(status: Callable[[], dict], interval: float = 1.0) -> None:
    """`say("status", status())` every `interval` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval)
        say("status", status())


def run_script(main: Coroutine[Any, Any, object]) -> None:
    """Run a script's main under aeronio.run (SIGINT and SIGTERM unwind it); what aeronio
    refuses (no driver on --dir, a channel in use) is one line on stderr and status 1."""
    try:
        aeronio.run(main)
    except aeronio.AeronError as e:
        sys.exit(f"{Path(sys.argv[0]).name}: {e}")
