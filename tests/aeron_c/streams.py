"""Streams between aeronio and pyaeron in the `aeron_c` tests: the messages of the pyaeron roles'
`payload`, sent and received by aeronio's side."""

import asyncio
import zlib

from tests.support.child import Child
from tests.support.pyaeron_roles import payload

COUNT, SIZES = 500, [1, 100, 3000]  # 3000 bytes: fragmented (MTU 1408)


def expected(count: int = COUNT, sizes: list[int] = SIZES) -> list[bytes]:
    """The messages the `publish` role sends, as `subscribe` checks them."""
    return [payload(i, sizes[i % len(sizes)]) for i in range(count)]


async def receive(subscription, count: int) -> list[bytes]:
    """The data of the next `count` messages of `subscription` (within 30 s)."""
    received = []
    async with asyncio.timeout(30):
        async for message in subscription:
            received.append(message.data)
            if len(received) == count:
                return received
    return received


async def send_to_pyaeron(publication, subscriber: Child) -> None:
    """Once `subscriber` (the `subscribe` role, count COUNT) has the publication's image, offer
    COUNT messages and check it received them all, in order."""
    image = await subscriber.aexpect_json("image-available", 30)
    assert image["session_id"] == publication.session_id
    crc = 0
    for data in expected():
        await publication.offer(data, timeout=30)
        crc = zlib.crc32(len(data).to_bytes(4, "big") + data, crc)
    received = await subscriber.aexpect_json("received", 60)
    assert received == {"count": COUNT, "crc": crc, "in_order": True}
