"""ActivityProbe: the driver's one-call check for work (socket input, subscriber positions,
appends to network publications), with changes made by real threads and real processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
from aeronio._core import ActivityProbe, AtomicBuffer

from aeronio.logbuffer.log_buffers import LogBuffers


@dataclass
class Word:
    """A counter as the probe takes it: an AtomicBuffer and an offset."""

    buffer: AtomicBuffer
    offset: int


def shared_words(path, count: int = 4) -> list[Word]:
    mapped = np.memmap(path, dtype=np.uint8, mode="w+", shape=(4096,))
    buffer = AtomicBuffer(mapped)
    return [Word(buffer, 128 * i) for i in range(count)]


def wait_moved(probe: ActivityProbe, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe.moved():
        assert time.monotonic() < deadline, "the probe never saw the change"
        time.sleep(0.0005)


def test_first_look_moves_then_quiet(tmp_path):
    probe = ActivityProbe([], shared_words(tmp_path / "c"), [])
    assert probe.moved()
    assert not probe.moved()
    assert not probe.moved()


def test_counter_moved_by_another_thread(tmp_path):
    words = shared_words(tmp_path / "c")
    probe = ActivityProbe([], words, [])
    assert probe.moved()
    go = threading.Event()

    def writer():
        go.wait()
        words[2].buffer.put_int64_ordered(words[2].offset, 12345)

    thread = threading.Thread(target=writer)
    thread.start()
    assert not probe.moved()
    go.set()
    wait_moved(probe)
    thread.join()
    assert not probe.moved()  # the snapshot took the new value
    words[2].buffer.put_int64_ordered(words[2].offset, 12345)  # the same value again
    assert not probe.moved()


def test_counter_moved_by_another_process(tmp_path):
    path = tmp_path / "c"
    words = shared_words(path)
    probe = ActivityProbe([], words, [])
    assert probe.moved()
    child = (
        "import sys, numpy as np; from aeronio._core import AtomicBuffer; "
        "b = AtomicBuffer(np.memmap(sys.argv[1], dtype=np.uint8, mode='r+', shape=(4096,))); "
        "b.put_int64_ordered(384, 7)"
    )
    subprocess.run([sys.executable, "-c", child, str(path)], check=True, timeout=60)
    assert probe.moved()
    assert words[3].buffer.get_int64_volatile(384) == 7
    assert not probe.moved()


def test_append_to_a_log_by_another_process(tmp_path):
    path = tmp_path / "log"
    log = LogBuffers.create(
        path, term_length=65536, initial_term_id=5, session_id=1, stream_id=2, mtu=1408
    )
    probe = ActivityProbe([], [], [log.mapped])
    assert probe.moved()
    assert not probe.moved()
    child = (
        "import sys; from aeronio.logbuffer.log_buffers import LogBuffers; "
        "from aeronio.logbuffer import descriptor as d; "
        "log = LogBuffers.open(sys.argv[1]); "
        "log.metadata.put_int64_ordered(d.TERM_TAIL_COUNTERS_OFFSET, d.pack_tail(5, 64))"
    )
    subprocess.run([sys.executable, "-c", child, str(path)], check=True, timeout=60)
    assert log.producer_position == 64
    assert probe.moved()
    assert not probe.moved()
    log.close()


def test_socket_input_and_which_socket(tmp_path):
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with a, b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        a.setblocking(False)
        probe = ActivityProbe([a.fileno(), b.fileno()], [], [])
        assert not probe.moved()
        assert not probe.has_input(a.fileno()) and not probe.has_input(b.fileno())
        assert probe.has_input(10_000)  # a socket it does not watch must be read to know
        b.sendto(b"x", a.getsockname())
        wait_moved(probe)
        assert probe.has_input(a.fileno())
        assert not probe.has_input(b.fileno())
        assert probe.moved()  # input stays until read
        assert a.recv(16) == b"x"
        assert not probe.moved()
        assert not probe.has_input(a.fileno())


def test_sockets_are_unknown_until_polled():
    probe = ActivityProbe([3, 4], [], [])
    assert probe.has_input(3) and probe.has_input(4)


def test_logs_must_be_mapped_logs():
    with pytest.raises(TypeError, match="MappedLog"):
        ActivityProbe([], [], [object()])
