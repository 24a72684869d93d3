"""Capture Aeron 1.53's command protocol as the C client and C driver write it (test data).

Run once with the 3.12 interpreter that has pyaeron (its extension exports the C client and
driver API, called here through ctypes):

    /work/venv312/bin/python tests/data/aeron_c/capture_control.py tests/data/aeron_c

A C driver and C clients run in this thread in lock step (the driver's manual main loop, the
clients' agent invokers): each step lets the clients write their commands, copies the new
records of the to-driver ring buffer (the driver zeroes what it reads), then lets the driver
work. One client adds a publication, an exclusive publication, a subscription (an image comes),
a counter, a send and a receive destination, tries an invalid channel, removes everything (the
image goes) and closes; a second one stops working until the driver times it out; then a driver
termination is requested (refused by the default validator). A third client then writes the
commands 1.53 added (`commands_of_1_53`) and closes.

- control_commands.bin: every command record the clients wrote, in order.
- control_responses.bin: the to-clients broadcast buffer's records, from 0 to its tail.

Both hold records as the buffers do: length i32 (header included), msg type id i32, payload,
each record 8-byte aligned. The few cnc.dat offsets needed are read with struct."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import struct
import sys
import tempfile
import time

import pyaeron

C = ctypes.CDLL(pyaeron._pyaeron.__file__)
C.aeron_errmsg.restype = ctypes.c_char_p
C.aeron_async_add_counter_get_registration_id.restype = ctypes.c_int64
C.aeron_async_destination_get_registration_id.restype = ctypes.c_int64
C.aeron_subscription_image_at_index.restype = ctypes.c_void_p
P, S = ctypes.c_void_p, ctypes.c_size_t
THREADING_MODE_SHARED = 2
CNC_HEADER = 128  # AERON_CNC_VERSION_AND_META_DATA_LENGTH
RB_TRAILER = 768  # AERON_RB_TRAILER_LENGTH: tail @128, head @384
BROADCAST_TRAILER = 128  # tail counter @8
LIVENESS_TIMEOUT_NS = 1_000_000_000
KEY, LABEL = b"\x01\x02\x03\x04\x05", b"captured counter"


def call(name: str, *args) -> int:
    result = getattr(C, name)(*args)
    if result < 0:
        raise RuntimeError(f"{name}: {C.aeron_errmsg().decode()}")
    return result


class Session:
    def __init__(self, dir: str):
        context, self.driver = P(), P()
        call("aeron_driver_context_init", ctypes.byref(context))
        call("aeron_driver_context_set_dir", context, dir.encode())
        call("aeron_driver_context_set_threading_mode", context, THREADING_MODE_SHARED)
        call("aeron_driver_context_set_client_liveness_timeout_ns", context,
             ctypes.c_uint64(LIVENESS_TIMEOUT_NS))  # fmt: skip
        call("aeron_driver_context_set_timer_interval_ns", context, ctypes.c_uint64(10**8))
        call("aeron_driver_context_set_term_buffer_sparse_file", context, True)
        call("aeron_driver_init", ctypes.byref(self.driver), context)
        call("aeron_driver_start", self.driver, True)
        with open(os.path.join(dir, "cnc.dat"), "rb") as f:
            self.cnc = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        to_driver, to_clients = struct.unpack_from("<ii", self.cnc, 4)
        self.ring, self.ring_capacity = CNC_HEADER, to_driver - RB_TRAILER
        self.broadcast, self.broadcast_capacity = CNC_HEADER + to_driver, to_clients - 128
        self.commands = bytearray()
        self.taken = 0  # ring buffer position copied up to
        self.clients: list[P] = []
        self.dir = dir

    def client(self) -> P:
        context, aeron = P(), P()
        call("aeron_context_init", ctypes.byref(context))
        call("aeron_context_set_dir", context, self.dir.encode())
        call("aeron_context_set_use_conductor_agent_invoker", context, True)
        call("aeron_init", ctypes.byref(aeron), context)
        call("aeron_start", aeron)
        self.clients.append(aeron)
        return aeron

    def step(self) -> None:
        for aeron in self.clients:
            call("aeron_main_do_work", aeron)
        self.take_commands()
        call("aeron_driver_main_do_work", self.driver)
        time.sleep(0.001)

    def take_commands(self) -> None:
        tail = struct.unpack_from("<q", self.cnc, self.ring + self.ring_capacity + 128)[0]
        while self.taken < tail:
            at = self.ring + (self.taken & (self.ring_capacity - 1))
            length, type_id = struct.unpack_from("<ii", self.cnc, at)
            if length <= 0:
                return  # claimed, not yet committed
            aligned = (length + 7) & ~7
            if type_id != -1:  # not padding
                self.commands += self.cnc[at : at + aligned]
            self.taken += aligned

    def until(self, done, what: str) -> None:
        deadline = time.monotonic() + 30
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(what)
            self.step()

    def add(self, aeron: P, kind: str, channel: bytes, stream_id: int, *extra) -> P:
        pending, made = P(), P()
        call(f"aeron_async_add_{kind}", ctypes.byref(pending), aeron, channel, stream_id, *extra)
        self.until(lambda: call(f"aeron_async_add_{kind}_poll", ctypes.byref(made), pending), kind)
        return made

    def destination(self, aeron: P, owner: str, verb: str, resource: P, *target) -> int:
        """Add or remove a destination (`target`: its channel, or for `verb`
        "remove_destination_by_id" its registration id); the command's registration id."""
        pending = P()
        name = verb if verb.endswith("by_id") else f"{verb}_destination"
        call(f"aeron_{owner}_async_{name}", ctypes.byref(pending), aeron, resource, *target)
        registration_id = C.aeron_async_destination_get_registration_id(pending)
        self.until(lambda: call(f"aeron_{owner}_async_destination_poll", pending), verb)
        return registration_id

    def counter(self, aeron: P, kind: str, type_id: int, *extra) -> tuple[P, int]:
        """aeron_async_add_counter, or _static_counter (`extra`: its registration id); the
        counter and its command's registration id."""
        pending, counter = P(), P()
        call(f"aeron_async_add_{kind}", ctypes.byref(pending), aeron, type_id, KEY, S(len(KEY)),
             LABEL, S(len(LABEL)), *extra)  # fmt: skip
        registration_id = C.aeron_async_add_counter_get_registration_id(pending)
        self.until(
            lambda: call("aeron_async_add_counter_poll", ctypes.byref(counter), pending), kind
        )
        return counter, registration_id

    def responses(self) -> bytes:
        tail = struct.unpack_from("<q", self.cnc, self.broadcast + self.broadcast_capacity + 8)[0]
        assert tail <= self.broadcast_capacity, "the broadcast buffer wrapped"
        return bytes(self.cnc[self.broadcast : self.broadcast + tail])

    def responded(self, type_id: int) -> int:
        """How many responses of `type_id` the driver sent."""
        data, at, seen = self.responses(), 0, 0
        while at < len(data):
            length, found = struct.unpack_from("<ii", data, at)
            seen += found == type_id
            at += (length + 7) & ~7
        return seen


def capture(out: str) -> None:
    with tempfile.TemporaryDirectory() as dir:
        s = Session(os.path.join(dir, "driver"))
        aeron = s.client()
        publication = s.add(aeron, "publication", b"aeron:ipc", 1001)
        exclusive = s.add(
            aeron, "exclusive_publication", b"aeron:udp?endpoint=localhost:24325", 1002
        )
        subscription = s.add(aeron, "subscription", b"aeron:ipc", 1001, None, None, None, None)
        s.until(lambda: s.responded(0x0F02), "ON_AVAILABLE_IMAGE")
        counter, _ = s.counter(aeron, "counter", 1001)
        mdc = s.add(aeron, "publication", b"aeron:udp?control-mode=manual", 1003)
        s.destination(aeron, "publication", "add", mdc, b"aeron:udp?endpoint=localhost:24326")
        s.destination(aeron, "publication", "remove", mdc, b"aeron:udp?endpoint=localhost:24326")
        mds = s.add(aeron, "subscription", b"aeron:udp?control-mode=manual", 1004, None, None,
                    None, None)  # fmt: skip
        s.destination(aeron, "subscription", "add", mds, b"aeron:udp?endpoint=localhost:24327")
        s.destination(aeron, "subscription", "remove", mds, b"aeron:udp?endpoint=localhost:24327")
        try:
            s.add(aeron, "publication", b"aeron:bogus", 1)
        except RuntimeError:
            pass  # ON_ERROR, as wanted
        call("aeron_counter_close", counter, None, None)
        call("aeron_publication_close", publication, None, None)
        call("aeron_exclusive_publication_close", exclusive, None, None)
        call("aeron_publication_close", mdc, None, None)
        call("aeron_subscription_close", mds, None, None)
        s.until(lambda: s.responded(0x0F05), "ON_UNAVAILABLE_IMAGE")
        call("aeron_subscription_close", subscription, None, None)
        for _ in range(20):
            s.step()
        other = s.client()
        s.add(other, "publication", b"aeron:ipc", 1005)
        s.clients.remove(other)  # it stops working: the driver times it out
        s.until(lambda: s.responded(0x0F0A), "ON_CLIENT_TIMEOUT")
        call("aeron_close", aeron)
        s.clients.remove(aeron)
        call("aeron_context_request_driver_termination", s.dir.encode(), b"token", S(5))
        for _ in range(20):
            s.step()
        commands_of_1_53(s)
        with open(os.path.join(out, "control_commands.bin"), "wb") as f:
            f.write(s.commands)
        with open(os.path.join(out, "control_responses.bin"), "wb") as f:
            f.write(s.responses())
        s.cnc.close()
        call("aeron_close", other)
        call("aeron_driver_close", s.driver)


def commands_of_1_53(s: Session) -> None:
    """A static counter added twice (the second add is answered with the first's counter) and
    once where a client owns the counter of its type and registration id (refused); the next
    session id of a stream; a manual multi-destination-cast destination removed by id; an image
    rejected with a reason over Aeron's 1023 bytes (refused: a rejection that passes makes an
    ON_PUBLICATION_ERROR, which aeronio does not decode); then the client closes."""
    aeron = s.client()
    for _ in range(2):
        s.counter(aeron, "static_counter", 1006, ctypes.c_int64(777))
    _, owned = s.counter(aeron, "counter", 1007)
    with contextlib.suppress(RuntimeError):  # ON_ERROR, as wanted
        s.counter(aeron, "static_counter", 1007, ctypes.c_int64(owned))
    pending, session_id = P(), ctypes.c_int32()
    call("aeron_async_next_session_id", ctypes.byref(pending), aeron, 1001)
    s.until(lambda: call("aeron_async_next_session_id_poll", ctypes.byref(session_id), pending),
            "the next session id")  # fmt: skip
    mdc = s.add(aeron, "publication", b"aeron:udp?control-mode=manual", 1008)
    added = s.destination(aeron, "publication", "add", mdc, b"aeron:udp?endpoint=localhost:24328")
    s.destination(aeron, "publication", "remove_destination_by_id", mdc, ctypes.c_int64(added))
    s.add(aeron, "publication", b"aeron:ipc", 1009)
    subscription = s.add(aeron, "subscription", b"aeron:ipc", 1009, None, None, None, None)
    s.until(lambda: C.aeron_subscription_image_count(subscription) > 0, "the image")
    image = C.aeron_subscription_image_at_index(subscription, S(0))
    errors = s.responded(0x0F01)
    call("aeron_image_reject", P(image), b"x" * 1100)
    s.until(lambda: s.responded(0x0F01) > errors, "the rejection refused")
    call("aeron_close", aeron)
    s.clients.remove(aeron)
    for _ in range(20):
        s.step()


if __name__ == "__main__":
    capture(sys.argv[1])
