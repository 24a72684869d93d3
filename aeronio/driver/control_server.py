"""The driver's control socket: clients in other processes send commands and get responses.

One Unix stream socket per driver, in the abstract namespace under a name derived from the
driver directory (`protocol.layout.control_address`): no file to go stale, no path-length limit.
A connection opens with ClientHello; the driver answers DriverHello, or an ErrorResponse and
closes when the protocol versions differ (or the first frame is no ClientHello). Then every frame
is a command for the conductor. A bad command (one that does not decode, has a value out of its
bounds, or is longer than `MAX_FRAME_LENGTH`: skipped whole, so the stream stays in step) is
counted and refused with an ErrorResponse to its correlation id (when that can be read); it
never reaches the conductor, and the connection goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

import msgspec

from aeronio.driver.client_proxy import ClientProxy
from aeronio.protocol import control as p

log = logging.getLogger("aeronio.driver")
# How much of a command over the maximum length is read to answer it (its type and correlation
# id come first); the rest is skipped in chunks of SKIP_CHUNK.
HEAD_LENGTH = 64
SKIP_CHUNK = 64 * 1024


class ControlServer:
    def __init__(
        self,
        path: str,
        submit: Callable[[p.Command, Callable[[p.Response], None]], None],
        hello: Callable[[], p.DriverHello],
        on_bad_input: Callable[[str], None],
    ):
        self.path = path
        self._submit = submit
        self._hello = hello
        self._on_bad_input = on_bad_input
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        # The listening socket is made here: uvloop (libuv) cannot bind an abstract address.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.path)
            sock.listen(128)
            sock.setblocking(False)
            self._server = await asyncio.start_unix_server(self._serve, sock=sock)
        except BaseException:
            sock.close()
            raise

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)

        def reply(response: p.Response) -> None:
            if not writer.is_closing():
                writer.write(p.frame(response))

        try:
            first = await p.read_frame(reader)
            if first is None:
                return  # a liveness probe: connected and went away
            hello = p.unpack_command(first)
            if not isinstance(hello, p.ClientHello):
                raise ValueError(f"expected ClientHello, got {type(hello).__name__}")
            if hello.version != p.PROTOCOL_VERSION:
                reply(
                    p.ErrorResponse(
                        0,
                        p.VERSION_MISMATCH,
                        f"driver speaks control protocol v{p.PROTOCOL_VERSION}, "
                        f"client v{hello.version}",
                    )
                )
                return
            reply(self._hello())
            await self._serve_commands(reader, reply)
        except (ValueError, msgspec.DecodeError) as e:
            self._on_bad_input(f"control connection dropped: {e}")
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _serve_commands(
        self, reader: asyncio.StreamReader, reply: Callable[[p.Response], None]
    ) -> None:
        """Hand the conductor each command until the client goes; refuse the bad ones."""
        while True:
            try:
                prefix = await reader.readexactly(4)
            except asyncio.IncompleteReadError:
                return
            length = int.from_bytes(prefix, "little")
            try:
                if length > p.MAX_FRAME_LENGTH:
                    head = await reader.readexactly(min(length, HEAD_LENGTH))
                    await _skip(reader, length - len(head))
                    self._refuse(
                        head,
                        reply,
                        f"a command of {length} bytes exceeds the control protocol's maximum "
                        f"of {p.MAX_FRAME_LENGTH} bytes",
                    )
                    continue
                data = await reader.readexactly(length)
            except asyncio.IncompleteReadError:
                self._on_bad_input(f"control connection ended inside a command of {length} bytes")
                return
            try:
                command = p.unpack_command(data)
            except msgspec.DecodeError as e:
                self._refuse(data, reply, str(e))
                continue
            if isinstance(command, p.ClientHello):
                self._refuse(data, reply, "ClientHello sent twice")
                continue
            self._submit(command, reply)

    def _refuse(self, data: bytes, reply: Callable[[p.Response], None], reason: str) -> None:
        """Count a bad command and answer it, if its correlation id can be read from `data`
        (its start)."""
        fields = p.head_fields(data)
        kind = fields.get("type")
        message = f"{kind if isinstance(kind, str) else 'control command'} refused: {reason}"
        self._on_bad_input(message)
        correlation_id = fields.get("correlation_id")
        if isinstance(correlation_id, int) and -(2**63) <= correlation_id < 2**63:
            ClientProxy.error(reply, correlation_id, p.GENERIC_ERROR, message)

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self._server = None


async def _skip(reader: asyncio.StreamReader, length: int) -> None:
    """Read and drop `length` bytes (IncompleteReadError if the stream ends first)."""
    while length > 0:
        length -= len(await reader.readexactly(min(length, SKIP_CHUNK)))
