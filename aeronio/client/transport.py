"""How a client reaches its driver: in-process (embedded driver) or over the control socket."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable

from aeronio.errors import DriverError, DriverNotFoundError, DriverTimeoutError
from aeronio.protocol import control as p
from aeronio.protocol.embedded import EmbeddedDriver
from aeronio.protocol.layout import control_address

OnResponse = Callable[[p.Response], None]
OnLost = Callable[[str], None]


class EmbeddedTransport:
    """Commands handed straight to a driver running on this process's loop."""

    def __init__(self, driver: EmbeddedDriver, on_response: OnResponse):
        self.driver = driver
        self._on_response = on_response
        self.hello = driver.hello()

    def submit(self, command: p.Command) -> None:
        if self.driver.is_running:
            self.driver.submit(command, self._on_response)

    async def close(self) -> None:
        pass


class SocketTransport:
    """Commands as frames on the driver's control socket; responses read by a task."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        hello: p.DriverHello,
        on_response: OnResponse,
        on_lost: OnLost,
    ):
        self._reader = reader
        self._writer = writer
        self.hello = hello
        self._on_response = on_response
        self._on_lost = on_lost
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(
        cls,
        dir: str,
        client_id: int,
        on_response: OnResponse,
        on_lost: OnLost,
        timeout_s: float,
    ) -> SocketTransport:
        # The socket is connected here: uvloop (libuv) cannot connect to an abstract address.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, control_address(dir))
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            raise DriverNotFoundError(f"no media driver runs on dir {dir} ({e.strerror})") from None
        except BaseException:
            sock.close()
            raise
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        writer.write(p.frame(p.ClientHello(p.PROTOCOL_VERSION, client_id, os.getpid())))
        try:
            async with asyncio.timeout(timeout_s):
                data = await p.read_frame(reader)
        except TimeoutError:
            writer.close()
            raise DriverTimeoutError(
                f"the driver on {dir} did not answer the handshake within {timeout_s} s"
            ) from None
        except BaseException:  # cancelled: the socket goes with the attempt
            writer.close()
            raise
        hello = p.unpack_response(data) if data else None
        if isinstance(hello, p.ErrorResponse):
            writer.close()
            raise DriverError(f"driver on {dir} refused this client: {hello.message}", hello.code)
        if not isinstance(hello, p.DriverHello) or hello.version != p.PROTOCOL_VERSION:
            writer.close()
            raise DriverError(
                f"driver on {dir} speaks control protocol "
                f"v{getattr(hello, 'version', '?')}, this client v{p.PROTOCOL_VERSION}",
                p.VERSION_MISMATCH,
            )
        return cls(reader, writer, hello, on_response, on_lost)

    def submit(self, command: p.Command) -> None:
        if not self._writer.is_closing():
            self._writer.write(p.frame(command))

    async def _read(self) -> None:
        reason = "the driver closed the control connection"
        try:
            while (data := await p.read_frame(self._reader)) is not None:
                self._on_response(p.unpack_response(data))
        except (ConnectionError, ValueError) as e:
            reason = f"control connection failed: {e}"
        except asyncio.CancelledError:
            return
        self._on_lost(reason)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._writer.close()
