"""The room's home: its archive, recording the room stream, and its sequencer, which orders the
posts of every server into that stream (see room.py)."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from room import POSTS_STREAM, ROOM_STREAM, BadPost, Home, stamp

import aeronio
from aeronio import archive

log = logging.getLogger("chat.home")


@contextlib.asynccontextmanager
async def open_home(
    aeron: aeronio.Aeron, home: Home, archive_dir: Path
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """The archive (control on `home.archive_channel`) recording the room stream, until the
    block ends; the block gets the sequencer, to run as a task of its own."""
    async with archive.Archive.launch(
        aeron,
        archive_dir=archive_dir,
        control_channel=home.archive_channel,
        recording_events_channel="aeron:ipc",
    ):
        async with archive.connect(aeron, **archive.LOCAL) as client:
            # Recorded from its first byte: the recording exists before the stream does.
            await client.start_recording(
                home.room_channel, ROOM_STREAM, archive.SourceLocation.LOCAL
            )
        posts = await aeron.add_subscription(home.posts_channel, POSTS_STREAM)
        room = await aeron.add_exclusive_publication(home.room_channel, ROOM_STREAM)
        yield functools.partial(sequence, posts, room)


async def sequence(posts: aeronio.Subscription, room: aeronio.ExclusivePublication) -> None:
    """Each valid post, stamped, onto the room stream in the order it came; a bad one is logged
    and dropped, and so is a server's posts stream that went away before its end."""
    while True:
        try:
            async for message in posts:
                await sequence_one(message, room)
            return
        except aeronio.ImageUnavailableError as error:  # what was not read from it is lost
            log.warning("lost the posts of a server: %s", error)


async def sequence_one(message: aeronio.Message, room: aeronio.ExclusivePublication) -> None:
    try:
        entry = stamp(message.data)
    except BadPost as error:
        log.warning("dropped a post from session %d: %s", message.header.session_id, error)
        return
    try:
        await room.offer(entry)
    except aeronio.MessageTooLargeError as error:  # a room entry has its limits too
        log.warning("dropped a post from session %d: %s", message.header.session_id, error)
