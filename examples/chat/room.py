"""One chat room over Aeron: what goes on the wire, and which channel carries it.

The room's order
----------------
Every server publishes its users' posts to the room's home (unicast, one Aeron session per
server). The home's sequencer republishes each post, stamped, on the room stream: one
publication, so one order that every server sees, and one recording of it in the home's
archive. (Aeron's sequencer pattern, as Aeron Cluster orders its log.)

The room stream
---------------
Multicast (`--transport multicast`: one datagram reaches every server) or, where multicast is
not available, multi-destination-cast with dynamic control (`--transport mdc`: the home sends to
each server that asked). Every server joins it with replay-merge: the archive replays the room
from its first post, then the live stream takes over, with no gap and no duplicate; a server
that joins late shows the whole history first.

The slowest server paces the room stream (`fc=min`): under a burst the sequencer waits for the
server busiest with its browsers, instead of running more than a receiver window ahead of it
(the default for multicast, `fc=max`, lets the fastest receiver pace: a slower one is over-run,
what it lacks is soon no longer retransmitted, and its image goes). A server silent for longer
than the flow control's receiver timeout (2 s: stopped, hung) no longer holds the room back; it
loses its image then, and merges again from the recording where it left off (`remerge=True`):
no entry is lost either way.

Messages
--------
- posts (server -> home): `Post`, JSON.
- room entries (home -> everyone): `Entry`, JSON; a browser gets an entry with its `position`
  on the room stream, the entry's unique, increasing id.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass

import msgspec

POSTS_STREAM = 1001
ROOM_STREAM = 1002
MULTICAST_GROUP = "224.0.1.21"
TERM_LENGTH = "64k"
MAX_USER = 32
MAX_SERVER = 32
MAX_TEXT = 1000


class Post(msgspec.Struct, frozen=True):
    """A user's message, as a server sends it to the home."""

    user: str
    text: str
    server: str


class Entry(msgspec.Struct, frozen=True):
    """A post as the room ordered it: `at` is the home's time (ms since the epoch)."""

    user: str
    text: str
    server: str
    at: int


class BadPost(ValueError):
    """A post that breaks the room's rules (the message says which)."""


def check_post(user: str, text: str) -> tuple[str, str]:
    """The post's user and text, stripped; BadPost when either is empty or too long."""
    user, text = user.strip(), text.strip()
    if not user or len(user) > MAX_USER:
        raise BadPost(f"user: 1 to {MAX_USER} characters")
    if not text or len(text) > MAX_TEXT:
        raise BadPost(f"text: 1 to {MAX_TEXT} characters")
    return user, text


def stamp(post: bytes) -> bytes:
    """The room entry for an encoded post; BadPost when it is not a valid post."""
    try:
        decoded = msgspec.json.decode(post, type=Post)
        user, text = check_post(decoded.user, decoded.text)
    except (msgspec.DecodeError, BadPost) as error:
        raise BadPost(str(error)) from None
    if not decoded.server or len(decoded.server) > MAX_SERVER:
        raise BadPost(f"server: 1 to {MAX_SERVER} characters")
    return msgspec.json.encode(Entry(user, text, decoded.server, time.time_ns() // 1_000_000))


def free_ports(host: str, count: int) -> list[int]:
    """`count` different UDP ports free on `host` now (each held until all are chosen)."""
    with contextlib.ExitStack() as probes:
        ports = []
        for _ in range(count):
            probe = probes.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            probe.bind((host, 0))
            ports.append(probe.getsockname()[1])
        return ports


def free_port(host: str) -> int:
    """A UDP port free on `host` now."""
    return free_ports(host, 1)[0]


@dataclass(frozen=True)
class Home:
    """Where a room lives: its host and ports, and how its stream travels."""

    host: str
    posts_port: int
    room_port: int
    archive_port: int
    transport: str  # "multicast" or "mdc"

    @classmethod
    def parse(cls, text: str) -> Home:
        """`host:posts:room:archive:transport`, as `Home.spec` writes it."""
        try:
            host, posts, room, archive, transport = text.split(":")
            home = cls(host, int(posts), int(room), int(archive), transport)
        except ValueError:
            raise ValueError(f"--join: host:posts:room:archive:transport, not {text!r}") from None
        if transport not in ("multicast", "mdc"):
            raise ValueError(f"--join: transport is multicast or mdc, not {transport!r}")
        return home

    @property
    def spec(self) -> str:
        return (
            f"{self.host}:{self.posts_port}:{self.room_port}:{self.archive_port}:{self.transport}"
        )

    @property
    def posts_channel(self) -> str:
        return f"aeron:udp?endpoint={self.host}:{self.posts_port}"

    @property
    def archive_channel(self) -> str:
        return f"aeron:udp?endpoint={self.host}:{self.archive_port}"

    @property
    def room_channel(self) -> str:
        """The sequencer's publication."""
        if self.transport == "multicast":
            return (
                f"aeron:udp?endpoint={MULTICAST_GROUP}:{self.room_port}|interface={self.host}"
                f"|term-length={TERM_LENGTH}|fc=min"
            )
        return (
            f"aeron:udp?control={self.host}:{self.room_port}|control-mode=dynamic"
            f"|term-length={TERM_LENGTH}|fc=min"
        )

    def live_destination(self, server_host: str) -> str:
        """Where a server on `server_host` hears the live room stream."""
        if self.transport == "multicast":
            return f"aeron:udp?endpoint={MULTICAST_GROUP}:{self.room_port}|interface={server_host}"
        return (
            f"aeron:udp?endpoint={server_host}:{free_port(server_host)}"
            f"|control={self.host}:{self.room_port}"
        )
