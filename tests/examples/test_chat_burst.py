"""examples/chat under a burst: three chat servers (processes, each its own embedded driver), 60
WebSocket clients posting 50 entries each as fast as they can through one server that is not
the room's home, then one client posting 3,000 through another. Every client of every server
shows all 6,000 entries, in the room's one order: a server that falls behind the live stream
catches up from the room's recording, nothing is lost.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.examples.test_chat import server

pytestmark = pytest.mark.slow

CLIENTS = 60
POSTS_EACH = 50
SOLO_POSTS = 3000
STALLED_S = 60  # no client got an entry for this long: what they lack is lost


class Client:
    """A browser without a browser: its WebSocket and every entry it was shown."""

    def __init__(self, session: aiohttp.ClientSession, socket, name: str):
        self.session = session
        self.socket = socket
        self.name = name
        self.entries: list[dict] = []

    @classmethod
    async def open(cls, url: str, user: str) -> Client:
        session = aiohttp.ClientSession()
        try:
            socket = await session.ws_connect(f"{url}ws?user={user}", max_msg_size=0)
        except BaseException:
            await session.close()
            raise
        return cls(session, socket, f"{user}@{url}")

    async def read(self) -> None:
        """Take every history and entry message until the socket closes."""
        async for frame in self.socket:
            if frame.type is not aiohttp.WSMsgType.TEXT:
                break
            message = json.loads(frame.data)
            if message["type"] == "history":
                self.entries.extend(message["entries"])
            else:
                assert message["type"] == "entry", message
                self.entries.append(message["entry"])

    async def say(self, texts: list[str]) -> None:
        for text in texts:
            await self.socket.send_json({"text": text})

    async def close(self) -> None:
        await self.session.close()


async def until_all_have(clients: list[Client], count: int) -> None:
    """Wait until every client shows `count` entries, or none got one for STALLED_S."""
    loop = asyncio.get_running_loop()
    seen, last_progress = -1, loop.time()
    while True:
        total = sum(min(len(c.entries), count) for c in clients)
        if total == count * len(clients):
            return
        if total != seen:
            seen, last_progress = total, loop.time()
        elif loop.time() - last_progress > STALLED_S:
            return
        await asyncio.sleep(0.2)


def check(clients: list[Client], said: list[str]) -> None:
    """Every client shows what was said, each entry once, all in one order."""
    reference = clients[0].entries
    for client in clients:
        texts = [entry["text"] for entry in client.entries]
        missing = len(set(said) - set(texts))
        assert len(texts) == len(said) and not missing, (
            f"{client.name}: {len(texts)} entries of {len(said)}, {missing} missing"
        )
        assert client.entries == reference, f"{client.name}: another order than {clients[0].name}"
    positions = [entry["position"] for entry in reference]
    assert positions == sorted(set(positions))


@pytest.mark.parametrize("transport", ["multicast", "mdc"])
async def test_a_burst_through_one_server_reaches_every_client_of_every_server(transport):
    """60 clients x 50 posts through server-2, then one client x 3,000 through server-3: every
    client of the three servers shows the 6,000 entries in one order."""
    home, home_url, room = server("--home", "--name", "server-1", "--transport", transport)
    children = [home]
    clients: list[Client] = []
    readers: list[asyncio.Task] = []
    try:
        urls = []
        for name in ("server-2", "server-3"):
            child, url, _ = server("--join", room, "--name", name)
            children.append(child)
            urls.append(url)
        two_url, three_url = urls
        clients.append(await Client.open(home_url, "one"))
        clients.append(await Client.open(three_url, "solo"))
        for i in range(CLIENTS):
            clients.append(await Client.open(two_url, f"user{i}"))
        readers = [asyncio.create_task(client.read()) for client in clients]
        burst = [[f"user{i} post {j}" for j in range(POSTS_EACH)] for i in range(CLIENTS)]
        await asyncio.gather(*(c.say(texts) for c, texts in zip(clients[2:], burst, strict=True)))
        said = [text for texts in burst for text in texts]
        await until_all_have(clients, len(said))
        check(clients, said)

        solo = [f"solo post {j}" for j in range(SOLO_POSTS)]
        await clients[1].say(solo)
        said += solo
        await until_all_have(clients, len(said))
        check(clients, said)
    finally:
        for reader in readers:
            reader.cancel()
        for client in clients:
            await client.close()
        for child in reversed(children):
            child.stop()
    for child in children:
        assert child.wait() == 128 + 15, child.describe()
