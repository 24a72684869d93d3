"""A sender forged on a real UDP socket: a SETUP that gives a subscription its image, and DATA
frames of the first term, so that a test decides what arrives, and when."""

from __future__ import annotations

import asyncio
import socket

from aeronio.protocol.frames import data_header, setup_frame

SESSION, STREAM, INITIAL_TERM_ID, TERM_LENGTH = 77, 9, 5, 65536


def data(term_offset: int) -> bytes:
    """A 64-byte DATA frame (32 bytes of payload) at `term_offset` of the first term."""
    header = data_header(
        frame_length=64,
        flags=0xC0,
        term_offset=term_offset,
        session_id=SESSION,
        stream_id=STREAM,
        term_id=INITIAL_TERM_ID,
    ).encode()
    return header + term_offset.to_bytes(4, "little") * 8


async def forge_image(sender: socket.socket, port: int, subscription) -> None:
    """SETUP sent to 127.0.0.1:`port` until `subscription` has the image."""
    setup = setup_frame(
        session_id=SESSION,
        stream_id=STREAM,
        initial_term_id=INITIAL_TERM_ID,
        term_length=TERM_LENGTH,
        mtu=1408,
    ).encode()
    for _ in range(500):
        if subscription.images:
            return
        sender.sendto(setup, ("127.0.0.1", port))
        await asyncio.sleep(0.01)
    assert subscription.images, "no image for the forged SETUP"
