"""`aeronio.connect`: the one place that knows both the client and the driver. With a directory
it attaches a client to the driver that owns it (in this process or another); with no directory,
or with driver options, it first launches an embedded driver on the running loop, which the
client owns and closes."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

from aeronio.client.aeron import DEFAULT_DRIVER_TIMEOUT_S, Aeron
from aeronio.client.conductor import PublicationErrorHandler
from aeronio.driver.context import env_var_name
from aeronio.driver.media_driver import MediaDriver
from aeronio.idle import DEFAULT_IDLE_STRATEGY, IdleStrategy

SPARSE = "term_buffer_sparse_file"


class Connection:
    """What `connect` returns: await it, or use it with `async with` (which closes the client)."""

    def __init__(self, dir: str | None, driver_options: dict, client_options: dict):
        self._dir = dir
        self._driver_options, self._client_options = driver_options, client_options
        self._client: Aeron | None = None

    async def _connect(self) -> Aeron:
        if self._dir is not None and not self._driver_options:
            self._client = await Aeron(self._dir, **self._client_options).attach()
            return self._client
        if self._dir is not None:
            self._driver_options["dir"] = self._dir
        if SPARSE not in self._driver_options and env_var_name(SPARSE) not in os.environ:
            self._driver_options[SPARSE] = True  # see connect()
        driver = await MediaDriver.launch(**self._driver_options).start()
        try:
            self._client = await Aeron(driver.dir, **self._client_options).attach(owned=driver)
        except BaseException:
            await driver.close()
            raise
        return self._client

    def __await__(self) -> Generator[Any, None, Aeron]:
        return self._connect().__await__()

    async def __aenter__(self) -> Aeron:
        return await self._connect()

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()


def connect(
    dir: str | os.PathLike[str] | None = None,
    *,
    idle_strategy: IdleStrategy = DEFAULT_IDLE_STRATEGY,
    driver_timeout_s: float = DEFAULT_DRIVER_TIMEOUT_S,
    publication_error_handler: PublicationErrorHandler | None = None,
    **driver_options: Any,
) -> Connection:
    """Connect to the driver on `dir`, or launch an embedded one on the running loop
    (`driver_options`: DriverContext fields for a new driver). `publication_error_handler`:
    see `Aeron`. `driver_timeout_s` bounds the wait for a driver to appear and for each of
    its answers, and is the age at which its heartbeat says it is lost: a driver heartbeats on
    its timer (aeronio's each `timer_interval_ns`, 1 s by default), so a timeout below that
    period takes a live driver for lost.

    An embedded driver makes sparse logs, suited to a service: a stream takes memory as its
    writers may reach it (a publication's window, an image's term past its consumers), not all
    of it when it is made (192 MiB for a default IPC log, 48 MiB for UDP). Pass
    `term_buffer_sparse_file=False` (or set AERONIO_TERM_BUFFER_SPARSE_FILE) for Aeron's
    default, allocated and pre-faulted logs: the throughput setting, where no append faults a
    page in."""
    return Connection(
        None if dir is None else str(dir),
        driver_options,
        dict(
            idle_strategy=idle_strategy,
            driver_timeout_s=driver_timeout_s,
            publication_error_handler=publication_error_handler,
        ),
    )
