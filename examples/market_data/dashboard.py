"""The dashboard: a web page with a live price chart of one symbol (drawn on a canvas by
static/dashboard.js, no library, nothing from a CDN), its 1-minute bars and every symbol's top
of book, fed over a WebSocket.

    python examples/market_data/dashboard.py --dir DRIVER_DIR [--symbols N] [--port 8050]

Another client of the standalone driver: it reads the feed's IPC ticks (book.py, and a price
sampled every 100 ms per symbol) and the bars stream, where the Spark pipeline publishes each
closed minute's bars as JSON. Says `ready` with its URL and its ticks subscription's
registration id, then `status` every second. aiohttp, because its server runs inside this
asyncio program (`web.AppRunner`): one loop for the aeronio client and the web.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections import deque
from pathlib import Path

import numpy as np
from aiohttp import WSCloseCode, WSMsgType, web
from book import Book
from options import number
from status import Meter, report, run_script, say
from ticks import BARS, BARS_STREAM, IPC_TICKS, TICKS_STREAM, last_of_each, receive, symbol_names

import aeronio

STATIC = Path(__file__).parent / "static"
SAMPLE_S = 0.1  # a chart point per symbol that traded, every 100 ms
SERIES_POINTS = 900  # the chart's last 90 s
PUSH_S = 0.5  # a snapshot to each browser every 500 ms
BARS_SENT = 120  # the newest bars of the symbol: candles on the chart, the table shows 15


class Board:
    """What the page shows: the book, a sampled price series per symbol, the bars."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.book = Book()
        self.meter = Meter()
        self.rate = 0.0
        self.moved: set[int] = set()
        self.series: dict[int, deque] = {}
        self.bars: dict[int, dict[str, dict]] = {}  # symbol -> minute -> bar
        self.bar_count = 0

    def take_ticks(self, ticks: np.ndarray) -> None:
        """A batch of ticks (a view over the log, valid during the call)."""
        self.book.update(ticks)
        self.moved.update(last_of_each(ticks["symbol"])[0].tolist())
        self.meter.add(len(ticks))

    def take_bar(self, data: bytes) -> None:
        """A bar from the bars stream (the sink may send one twice: it is at-least-once)."""
        bar = json.loads(data)
        minutes = self.bars.setdefault(bar["symbol"], {})
        self.bar_count += bar["minute"] not in minutes
        minutes[bar["minute"]] = bar

    def sample(self) -> None:
        """A chart point for each symbol that traded since the last sample."""
        book = self.book
        for s in self.moved:
            point = (int(book.ts[s]) // 1_000_000, book.last[s], book.bid[s], book.ask[s])
            self.series.setdefault(s, deque(maxlen=SERIES_POINTS)).append(point)
        self.moved.clear()

    def status(self) -> dict:
        """The `status` payload (and the rate the page shows)."""
        self.rate = self.meter.rate()
        return {"count": self.meter.count, "rate": self.rate, "bars": self.bar_count}

    def snapshot(self, symbol: int) -> dict:
        """The page's data for `symbol`, as JSON-ready values."""
        book = self.book
        vwap = book.vwap()
        rows = [
            [s, book.bid[s], book.ask[s], book.last[s], vwap[s], int(book.volume[s]),
             int(book.count[s])]
            for s in np.flatnonzero(book.count).tolist()
        ]  # fmt: skip
        bars = sorted(self.bars.get(symbol, {}).values(), key=lambda b: b["minute"], reverse=True)
        return {
            "type": "snapshot",
            "symbol": symbol,
            "series": list(self.series.get(symbol, ())),
            "book": rows,
            "bars": bars[:BARS_SENT],
            "stats": {
                "ticks": self.meter.count,
                "rate": self.rate,
                "bars": self.bar_count,
                "market_ms": int(book.ts.max()) // 1_000_000 if len(book.ts) else None,
            },
        }


def make_app(board: Board) -> web.Application:
    """`/` the page, `/static/` its script and style, `/ws` the WebSocket (a hello with the
    symbol names, then a snapshot every PUSH_S; the page sends `{"symbol": id}` to switch),
    `/snapshot?symbol=ID` one snapshot as JSON."""
    sockets: set[web.WebSocketResponse] = set()

    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    def chosen(text: str | None) -> int:
        try:
            symbol = int(text)
        except (TypeError, ValueError):
            raise web.HTTPBadRequest(text=f"symbol {text!r} is not a number") from None
        if not 0 <= symbol < len(board.names):
            raise web.HTTPBadRequest(text=f"no symbol {symbol}")
        return symbol

    async def snapshot(request: web.Request) -> web.Response:
        return web.json_response(board.snapshot(chosen(request.query.get("symbol", "0"))))

    async def feed(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(heartbeat=30)
        await socket.prepare(request)
        sockets.add(socket)
        await socket.send_json({"type": "hello", "names": board.names})
        symbol = [0]
        pusher = asyncio.create_task(push(socket, board, symbol))
        try:
            async for frame in socket:
                if frame.type is WSMsgType.TEXT:
                    with contextlib.suppress(ValueError, KeyError, TypeError, web.HTTPBadRequest):
                        symbol[0] = chosen(json.loads(frame.data)["symbol"])
        finally:
            sockets.discard(socket)
            pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pusher
        return socket

    async def close_sockets(app: web.Application) -> None:
        for socket in list(sockets):
            await socket.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")

    app = web.Application()
    app.on_shutdown.append(close_sockets)
    app.router.add_get("/", index)
    app.router.add_get("/snapshot", snapshot)
    app.router.add_get("/ws", feed)
    app.router.add_static("/static", STATIC)
    return app


async def push(socket: web.WebSocketResponse, board: Board, symbol: list[int]) -> None:
    """A snapshot of the chosen symbol every PUSH_S while the socket is open."""
    with contextlib.suppress(ConnectionResetError):  # the browser left
        while not socket.closed:
            await socket.send_json(board.snapshot(symbol[0]))
            await asyncio.sleep(PUSH_S)


async def sample(board: Board) -> None:
    """`board.sample()` every SAMPLE_S, until cancelled."""
    while True:
        await asyncio.sleep(SAMPLE_S)
        board.sample()


async def take_bars(subscription: aeronio.Subscription, board: Board) -> None:
    """Every message of the bars stream into the board, until cancelled; a bars publisher lost
    before its end (its bars not all here) is said on stderr, and the others go on."""
    while True:
        try:
            async for message in subscription:
                board.take_bar(message.data)
        except aeronio.ImageUnavailableError as lost:
            print(f"dashboard.py: bars lost: {lost}", file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> None:
    """Subscribe, serve, say `ready`, then `status` every second until cancelled."""
    board = Board(symbol_names(args.symbols))
    runner = web.AppRunner(make_app(board))
    await runner.setup()
    async with aeronio.connect(args.dir) as aeron:
        ticks = await aeron.add_subscription(IPC_TICKS, TICKS_STREAM)
        bars = await aeron.add_subscription(BARS, BARS_STREAM)
        tasks = [
            asyncio.create_task(receive(ticks, board.take_ticks)),
            asyncio.create_task(take_bars(bars, board)),
            asyncio.create_task(sample(board)),
        ]
        try:
            try:
                await web.TCPSite(runner, args.host, args.port).start()
            except OSError as error:
                raise SystemExit(
                    f"dashboard.py: cannot serve on {args.host}:{args.port}: {error.strerror} "
                    "(another --port?)"
                ) from None
            host, port = runner.addresses[0][:2]
            say("ready", {"url": f"http://{host}:{port}/", "subscription": ticks.registration_id})
            await report(board.status)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await runner.cleanup()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="the standalone driver's directory")
    parser.add_argument(
        "--symbols", type=number(int, 1, 1000), default=50, help="the feed's --symbols (50)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="where to serve (127.0.0.1)")
    parser.add_argument(
        "--port", type=number(int, 0, 65535), default=8050, help="(8050; 0: any free port)"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    run_script(main(parse_args()))
