"""The driver's control socket: clients in other processes send commands and get responses.

One Unix stream socket per driver, in the abstract namespace under a name derived from the
driver directory (`protocol.layout.control_address`): no file to go stale, no path-length limit.
A connection opens with ClientHello; the driver answers DriverHello, or an ErrorResponse and
closes when the protocol versions differ. Then every frame is a command for the conductor. A
malformed frame closes that connection and is counted; it never reaches the conductor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

import msgspec

from aeronio.protocol import control as p

log = logging.getLogger("aeronio.driver")


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
            hello = p.decode_command(first)
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
            while (data := await p.read_frame(reader)) is not None:
                command = p.decode_command(data)
                if isinstance(command, p.ClientHello):
                    raise ValueError("ClientHello sent twice")
                self._submit(command, reply)
        except (ValueError, msgspec.DecodeError) as e:
            self._on_bad_input(f"control connection dropped: {e}")
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self._server = None
