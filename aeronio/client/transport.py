"""How a client reaches its driver, any driver (aeronio's in this process or another, Aeron's):
through the driver directory's cnc.dat, as Aeron 1.53's clients do.

Commands go into the to-driver ring buffer; every response comes on the to-clients broadcast
buffer, which this client reads when its doorbell rings (an aeronio driver rings it after
transmitting) or, with a driver that rings none, when a ChangeWatcher sees the broadcast tail
move (within WATCH_INTERVAL_NS). Liveness both ways is Aeron's: the client stores epoch ms into
its heartbeat counter (allocated by the driver on its first command), the driver stores its own
into the ring buffer's consumer heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable

from aeronio import _core
from aeronio.cnc import CncFile, CncNotReadyError
from aeronio.concurrent.broadcast import (
    TAIL_COUNTER_OFFSET,
    CopyBroadcastReceiver,
    CorruptRecordError,
)
from aeronio.counters import CountersReader
from aeronio.counters.counters_file import (
    CLIENT_HEARTBEAT_TYPE_ID,
    DRIVER_DOORBELL_TYPE_ID,
    RECORD_ALLOCATED,
    Counter,
)
from aeronio.errors import AeronError, ClientTimeoutError, DriverNotFoundError, DriverTimeoutError
from aeronio.logbuffer import waker
from aeronio.protocol import control as p

OnResponse = Callable[[p.Response], None]
OnFail = Callable[[AeronError], None]

WATCH_INTERVAL_NS = 10_000_000  # how late a client without doorbell reads the broadcast buffer
CONNECT_PAUSE_S = 0.01  # between looks at a cnc.dat that is not there or not ready yet
FULL_PAUSE_S = 0.001  # between attempts to write into a full to-driver ring buffer
log = logging.getLogger("aeronio.client")


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def wake_key(wake_id: int) -> bytes:
    """A doorbell counter's key: the wake id, 8 bytes in native order."""
    return wake_id.to_bytes(8, sys.byteorder)


async def map_cnc(dir: str, timeout_s: float) -> CncFile:
    """The cnc.dat of `dir` once it is there, ready, and its driver heartbeats; waits up to
    `timeout_s` for that (Aeron's clients do), then raises DriverNotFoundError naming what
    is missing (a driver that closed is said so, not given a heartbeat age). A cnc.dat of
    another version raises CncFileError at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cnc = CncFile.map(dir)
        except (FileNotFoundError, CncNotReadyError) as e:
            missing = "no cnc.dat" if isinstance(e, FileNotFoundError) else "cnc.dat not ready"
        else:
            age_ms = _epoch_ms() - cnc.driver_heartbeat_ms
            if age_ms <= timeout_s * 1000:
                return cnc
            closed = cnc.driver_closed
            cnc.close()
            heartbeat = f"heartbeat is {age_ms} ms old"
            missing = f"cnc.dat's driver {'closed' if closed else heartbeat}"
        if time.monotonic() >= deadline:
            raise DriverNotFoundError(
                f"no media driver runs on dir {dir}: {missing} after waiting {timeout_s:g} s"
            )
        await asyncio.sleep(CONNECT_PAUSE_S)


class CncTransport:
    """One client's end of a driver's cnc.dat: its client id, its commands, its responses, its
    heartbeat. Responses are handed to `on_response` (all of them: the client keeps its own,
    by correlation id, subscription and client id); a broken link to the driver goes to
    `on_fail`."""

    def __init__(
        self,
        dir: str,
        cnc: CncFile,
        on_response: OnResponse,
        on_fail: OnFail,
        timeout_s: float,
    ):
        self.dir = dir
        self._closed = False
        self.cnc = cnc
        self.counters = CountersReader.of(cnc)
        self.timeout_s = timeout_s
        self._on_response = on_response
        self._on_fail = on_fail
        self._loop = asyncio.get_running_loop()
        self._pid = os.getpid()
        self._ring = cnc.to_driver
        self.max_command_length = self._ring.max_msg_length
        self._receiver = CopyBroadcastReceiver(cnc.to_clients_buffer)
        self.client_id = self._ring.next_correlation_id()
        self._heartbeat: Counter | None = None
        self._waker = waker.waker()
        self._waker.attach(self._loop)
        self.driver_wake_id = self._find_driver_doorbell()
        self._poll_scheduled = False
        self._waker.callbacks.append(self._on_doorbell)
        self._watcher: _core.ChangeWatcher | None = None
        self._eventfd = -1
        if self.driver_wake_id is None:
            self._watch()

    @classmethod
    async def connect(
        cls, dir: str, on_response: OnResponse, on_fail: OnFail, timeout_s: float
    ) -> CncTransport:
        """Map `dir`'s cnc.dat (waiting for its driver up to `timeout_s`) and take a client id."""
        cnc = await map_cnc(dir, timeout_s)
        try:
            return cls(dir, cnc, on_response, on_fail, timeout_s)
        except BaseException:
            cnc.close()
            raise

    @property
    def driver_pid(self) -> int:
        return self.cnc.pid

    @property
    def client_liveness_timeout_ns(self) -> int:
        return self.cnc.client_liveness_timeout_ns

    @property
    def driver_heartbeat_age_ms(self) -> int:
        return _epoch_ms() - self.cnc.driver_heartbeat_ms

    def next_correlation_id(self) -> int:
        return self._ring.next_correlation_id()

    # -- commands ----------------------------------------------------------------------------

    def _find_driver_doorbell(self) -> int | None:
        for info in self.counters.for_each():
            if info.type_id == DRIVER_DOORBELL_TYPE_ID:
                return int.from_bytes(info.key[:8], sys.byteorder)
        return None

    def check_home(self) -> None:
        """AeronError unless called in the process and on the event loop this client was made
        in: a forked child (or a later asyncio.run) that used it would speak for the original
        client to the driver (its removes and ClientClose would end that client's streams),
        and wait for answers only the original's loop reads."""
        if os.getpid() != self._pid:
            raise AeronError(
                f"this Aeron client was made in process {self._pid}: a forked child connects "
                "a client of its own"
            )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside a loop (a close from a finalizer)
            return
        if loop is not self._loop:
            raise AeronError(
                "this Aeron client runs on the event loop it was made on: connect another "
                "on this one"
            )

    def _write(self, command: p.Command) -> bool:
        if self._closed:
            return True
        self.check_home()
        if not self._ring.write(*p.encode(command)):
            return False
        if self.driver_wake_id is not None:
            self._waker.wake(self.driver_wake_id)
        return True

    async def send(self, command: p.Command) -> None:
        """Write `command` for the driver; while its ring buffer is full, wait (up to the driver
        timeout: then DriverTimeoutError)."""
        deadline = time.monotonic() + self.timeout_s
        while not self._write(command):
            if time.monotonic() >= deadline:
                raise DriverTimeoutError(
                    f"the to-driver ring buffer of {self.dir} stayed full for {self.timeout_s:g} s"
                    f" ({type(command).__name__} not sent): is its driver stuck?"
                )
            await asyncio.sleep(FULL_PAUSE_S)

    def submit(self, command: p.Command) -> None:
        """Write `command` now, or from a task while the ring buffer is full (errors logged)."""
        if not self._write(command):
            self._loop.create_task(self._send_logged(command))

    async def _send_logged(self, command: p.Command) -> None:
        try:
            await self.send(command)
        except AeronError as e:
            log.warning("aeronio client %d: %s", self.client_id, e)

    # -- liveness ----------------------------------------------------------------------------

    def keepalive(self) -> None:
        """Store now into this client's heartbeat counter (type CLIENT_HEARTBEAT_TYPE_ID, key
        the client id: Aeron's clients find it so); until the driver made it, send
        CLIENT_KEEPALIVE (the first command allocates it). The counter freed or reused: the
        driver closed (DriverTimeoutError) if it marked its cnc so, else it timed this client
        out (ClientTimeoutError)."""
        key = self.client_id.to_bytes(8, sys.byteorder, signed=True)
        if self._heartbeat is None:
            counter_id = next(
                (
                    info.id
                    for info in self.counters.for_each()
                    if info.type_id == CLIENT_HEARTBEAT_TYPE_ID and info.key[:8] == key
                ),
                None,
            )
            if counter_id is None:
                self.submit(p.ClientKeepalive(self.client_id))
                return
            self._heartbeat = self.counters.counter(counter_id)
        counter_id = self._heartbeat.id
        if (
            self.counters.get_counter_state(counter_id) != RECORD_ALLOCATED
            or self.counters.get_counter_type_id(counter_id) != CLIENT_HEARTBEAT_TYPE_ID
            or self.counters.get_counter_key(counter_id)[:8] != key
        ):
            if self.cnc.driver_closed:
                self._on_fail(DriverTimeoutError(f"media driver on {self.dir} lost: it closed"))
                return
            self._on_fail(
                ClientTimeoutError(
                    f"the driver on {self.dir} freed the heartbeat counter of client "
                    f"{self.client_id}: it timed this client out"
                )
            )
            return
        self._heartbeat.set(_epoch_ms())

    # -- responses ---------------------------------------------------------------------------

    def _watch(self) -> None:
        """Read the broadcast buffer within WATCH_INTERVAL_NS of a transmission."""
        self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        receiver = self._receiver.receiver
        self._tail_at = receiver.capacity + TAIL_COUNTER_OFFSET
        self._tail_buffer = _core.AtomicBuffer(receiver.buffer)
        self._watcher = _core.ChangeWatcher(
            self._tail_buffer, self._tail_at, -1, WATCH_INTERVAL_NS, self._eventfd
        )
        self._loop.add_reader(self._eventfd, self._on_watched)
        self._watcher.start()

    def _on_watched(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self._eventfd)
        tail = self._tail_buffer.get_int64_volatile(self._tail_at)
        self.poll()
        if self._watcher is not None:
            self._watcher.seen(tail)

    def _on_doorbell(self) -> None:
        """A wake-up of this process (maybe from another thread): poll once, on the loop."""
        if not self._poll_scheduled and not self._closed:
            self._poll_scheduled = True
            with contextlib.suppress(RuntimeError):  # the loop closed
                self._loop.call_soon_threadsafe(self._scheduled_poll)

    def _scheduled_poll(self) -> None:
        self._poll_scheduled = False
        self.poll()

    def poll(self) -> int:
        """Hand every new response on the broadcast buffer to on_response; how many."""
        if self._closed:
            return 0
        count = 0
        receiver = self._receiver
        lapped = receiver.lapped_count
        try:
            while receiver.receive(self._handle):
                count += 1
        except CorruptRecordError as e:
            self._on_fail(
                AeronError(f"the to-clients broadcast buffer of {self.cnc.path} is corrupt: {e}")
            )
            return count
        if receiver.lapped_count != lapped:
            # As Aeron's clients: responses were lost, this client's state is not the driver's.
            self._on_fail(
                AeronError(
                    f"client {self.client_id} could not keep up with the broadcast buffer of "
                    f"the driver on {self.dir}: it was lapped and lost responses"
                )
            )
        return count

    def _handle(self, msg_type_id: int, payload: memoryview) -> None:
        try:
            response = p.decode_response(msg_type_id, payload)
        except p.MalformedMessageError as e:
            log.warning("aeronio client %d dropped a driver message: %s", self.client_id, e)
            return
        if isinstance(response, p.ClientTimeout) and response.client_id != self.client_id:
            return
        self._on_response(response)

    async def close(self) -> None:
        """Stop reading; unmap cnc.dat (what still maps parts of it keeps them alive)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ValueError):
            self._waker.callbacks.remove(self._on_doorbell)
        if self._watcher is not None:
            self._loop.remove_reader(self._eventfd)
            await asyncio.to_thread(self._watcher.close)  # returns within one interval
            self._watcher = None
            os.close(self._eventfd)
        self._heartbeat = None
        self.counters.close()
