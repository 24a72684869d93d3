"""A chat server: a web page and a WebSocket for browsers, an embedded Aeron driver for the room.

    python examples/chat/server.py --home            # the room's home (archive, sequencer)
    python examples/chat/server.py --join SPEC       # another server of that room

It prints `chat server NAME: URL` (and, for the home, `room: SPEC` for `--join`) once it
serves. aiohttp, because its server runs inside our own asyncio program (`web.AppRunner`):
the program owns the loop, the embedded driver and the order of shutdown, and one package
gives HTTP, WebSocket and static files.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import logging
import sys
import tempfile
from pathlib import Path

import msgspec
from aiohttp import WSCloseCode, WSMsgType, web
from home import open_home
from room import (
    POSTS_STREAM,
    ROOM_STREAM,
    BadPost,
    Entry,
    Home,
    Post,
    check_post,
    free_port,
    free_ports,
)

import aeronio
from aeronio import archive

STATIC = Path(__file__).parent / "static"
OFFER_TIMEOUT_S = 5.0
TOO_SLOW = 4000  # the WebSocket close code for a browser dropped as too far behind
HISTORY_LIMIT = 5000  # entries a browser gets when it joins (the archive keeps them all)
log = logging.getLogger("chat.server")


class Room:
    """This server's copy of the room: its last HISTORY_LIMIT entries in order, and the
    browsers to tell, each with a queue of at most `backlog` entries."""

    def __init__(self, backlog: int) -> None:
        self.entries: collections.deque[dict] = collections.deque(maxlen=HISTORY_LIMIT)
        self.backlog = backlog
        self.browsers: set[asyncio.Queue] = set()
        self.caught_up = asyncio.Event()  # it holds the history it joined: browsers may come

    def add(self, entry: dict) -> None:
        self.entries.append(entry)
        for queue in list(self.browsers):
            if queue.qsize() < self.backlog:
                queue.put_nowait(entry)
            else:  # too slow: its writer closes the socket (the page joins again)
                self.browsers.discard(queue)
                queue.put_nowait(None)

    def join(self) -> tuple[list[dict], asyncio.Queue]:
        """The entries so far and a queue of those after: nothing missed, nothing twice."""
        queue: asyncio.Queue = asyncio.Queue(self.backlog + 1)  # + 1: room for the None
        self.browsers.add(queue)
        return list(self.entries), queue

    def leave(self, queue: asyncio.Queue) -> None:
        self.browsers.discard(queue)


async def follow(client: archive.ArchiveClient, home: Home, host: str, room: Room) -> None:
    """Every entry of the room into `room`: its recording replayed from the start, then the live
    stream (replay-merge). `room.caught_up` is set once what was recorded when it began is in.
    A server that falls too far behind the live stream loses its image: it merges again from
    the recording where it left off (`remerge=True`), so no browser misses an entry."""
    recording_id = await room_recording(client, home)
    history_end = await client.get_recording_position(recording_id)
    if history_end <= 0:
        room.caught_up.set()
    merge = client.replay_merge(
        recording_id,
        ROOM_STREAM,
        f"aeron:udp?endpoint={host}:{free_port(host)}",
        home.live_destination(host),
        remerge=True,
    )
    async with contextlib.aclosing(merge):
        async for message in merge:
            try:
                entry = msgspec.json.decode(message.data, type=Entry)
            except msgspec.DecodeError as error:  # not from our sequencer: not shown
                log.warning("dropped a room entry at %d: %s", message.position, error)
            else:
                room.add(msgspec.structs.asdict(entry) | {"position": message.position})
            if message.position >= history_end:
                room.caught_up.set()


async def room_recording(client: archive.ArchiveClient, home: Home) -> int:
    """The recording of the room stream that is going on (the home starts it before the stream
    exists)."""
    async with asyncio.timeout(10):
        while True:
            found = await client.list_recordings_for_uri(f":{home.room_port}", ROOM_STREAM)
            live = [r for r in found if r.stop_position == archive.NULL_POSITION]
            if live:
                return live[-1].recording_id
            await asyncio.sleep(0.1)


def make_app(name: str, room: Room, posts: aeronio.Publication) -> web.Application:
    """The page, its script, and `/ws?user=NAME`: the room's history, then each new entry, as
    JSON; the browser sends `{"text": ...}`."""

    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    async def status(request: web.Request) -> web.Response:
        return web.json_response({"server": name, "entries": len(room.entries)})

    sockets: set[web.WebSocketResponse] = set()

    async def chat(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(heartbeat=30)
        await socket.prepare(request)
        try:
            user, _ = check_post(request.query.get("user", ""), "-")
        except BadPost as error:
            await socket.send_json({"type": "error", "message": str(error)})
            await socket.close()
            return socket
        sockets.add(socket)
        history, queue = room.join()
        writer = asyncio.create_task(tell(socket, name, history, queue))
        try:
            async for frame in socket:
                if frame.type is not WSMsgType.TEXT:
                    continue
                await post(socket, posts, name, user, frame.data)
        finally:
            sockets.discard(socket)
            room.leave(queue)
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        return socket

    async def close_sockets(app: web.Application) -> None:
        """At shutdown: browsers are told the server goes away (the handlers then end)."""
        for socket in list(sockets):
            await socket.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")

    app = web.Application()
    app.on_shutdown.append(close_sockets)
    app.router.add_get("/", index)
    app.router.add_get("/status", status)
    app.router.add_get("/ws", chat)
    app.router.add_static("/static", STATIC)
    return app


async def tell(socket: web.WebSocketResponse, name: str, history: list, queue) -> None:
    """The browser's feed: who it talks to and the history, then each entry as it comes."""
    await socket.send_json({"type": "history", "server": name, "entries": history})
    while (entry := await queue.get()) is not None:
        await socket.send_json({"type": "entry", "entry": entry})
    await socket.close(code=TOO_SLOW, message=b"too far behind the room")


async def post(socket, posts: aeronio.Publication, name: str, user: str, data: str) -> None:
    """A browser's message to the room's home, or an error back to the browser."""
    try:
        text = msgspec.json.decode(data, type=dict[str, str]).get("text", "")
        user, text = check_post(user, text)
        await posts.offer(msgspec.json.encode(Post(user, text, name)), timeout=OFFER_TIMEOUT_S)
    except (msgspec.DecodeError, BadPost) as error:
        await socket.send_json({"type": "error", "message": f"not sent: {error}"})
    except TimeoutError:
        await socket.send_json({"type": "error", "message": "not sent: the room's home is away"})


async def serve(args: argparse.Namespace) -> None:
    host = args.host
    async with contextlib.AsyncExitStack() as stack:
        aeron = await stack.enter_async_context(aeronio.connect())  # an embedded driver
        sequencer = None
        if args.join:
            home = Home.parse(args.join)
        else:
            home = Home(host, *free_ports(host, 3), args.transport)
            archive_dir = args.archive_dir or Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="chat-archive-"))
            )
            sequencer = await stack.enter_async_context(open_home(aeron, home, archive_dir))
        try:
            client = await stack.enter_async_context(
                archive.connect(
                    aeron,
                    control_channel=home.archive_channel,
                    response_channel=f"aeron:udp?endpoint={host}:{free_port(host)}",
                )
            )
        except TimeoutError:
            if not args.join:
                raise
            raise SystemExit(
                f"server.py: no room's home answers on {home.archive_channel}: is its server "
                "running, with that --join?"
            ) from None
        posts = await aeron.add_publication(home.posts_channel, POSTS_STREAM)
        room = Room(args.browser_backlog)
        async with asyncio.TaskGroup() as tasks:
            if sequencer is not None:
                tasks.create_task(sequencer())
            tasks.create_task(follow(client, home, host, room))
            await room.caught_up.wait()
            runner = web.AppRunner(make_app(args.name, room, posts), access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            site = web.TCPSite(runner, host, args.port)
            await site.start()
            if not args.join:
                print(f"room: {home.spec}", flush=True)
            print(f"chat server {args.name}: http://{host}:{runner.addresses[0][1]}/", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--home", action="store_true", help="be the room's home")
    where.add_argument("--join", metavar="SPEC", help="join the room a home printed")
    parser.add_argument("--name", default="chat", help="this server's name, shown to users")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve and send from")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: any free one)")
    parser.add_argument(
        "--transport", choices=["multicast", "mdc"], default="multicast",
        help="the room stream's (home only): multicast, or multi-destination-cast",
    )  # fmt: skip
    parser.add_argument("--archive-dir", type=Path, help="the home's archive (default: temp)")
    parser.add_argument(
        "--browser-backlog", type=int, default=10_000,
        help="entries a browser may fall behind before it is dropped (it joins again)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.browser_backlog < 1:
        parser.error("--browser-backlog: at least 1")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port: 0 to 65535, not {args.port}")
    try:
        free_port(args.host)
    except OSError as error:
        parser.error(f"--host {args.host}: {error.strerror or error}")
    if args.join:
        try:
            Home.parse(args.join)
        except ValueError as error:
            parser.error(str(error))
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        aeronio.run(serve(args))


if __name__ == "__main__":
    main()
