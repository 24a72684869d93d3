"""A segment file mapped for reading (`_core.map_segment_file`, `segments.map_segment`): its
bytes as they are in the file, unmapped once closed and no view of it is left, errors naming the
file, and no system call that hands the GIL to another thread (the replayer's thread maps
segments beside an event loop that would keep it)."""

from __future__ import annotations

import gc
import io
import operator
import os
import re
import sys
import threading
import time
from collections import deque
from itertools import starmap

import numpy as np
import pytest

from aeronio import _core
from aeronio.archive import segments


@pytest.fixture
def segment_file(tmp_path):
    path = tmp_path / "7-0.rec"
    path.write_bytes(os.urandom(3 * 4096 + 100))
    return path


def test_the_mapping_holds_the_files_bytes_read_only(segment_file):
    data = segment_file.read_bytes()
    with _core.map_segment_file(segment_file) as mapped:
        assert len(mapped) == len(data)
        view = memoryview(mapped)
        assert view.readonly and view.nbytes == len(data)
        assert (view.format, view.itemsize, view.shape, view.strides) == (
            "B",
            1,
            (len(data),),
            (1,),
        )
        assert view.tobytes() == data
        assert np.frombuffer(mapped, np.uint8).tobytes() == data
        with pytest.raises(TypeError):
            view[0] = 1
        with pytest.raises(TypeError, match="read-write"):  # a writable buffer refused
            io.BytesIO(b"x").readinto(mapped)
        view.release()
    assert mapped.closed and len(mapped) == 0
    with pytest.raises(ValueError, match="unmapped"):
        memoryview(mapped)


def test_a_mapping_with_views_left_is_unmapped_when_the_last_goes(segment_file):
    data = segment_file.read_bytes()
    mapped = _core.map_segment_file(segment_file)
    first, second = memoryview(mapped), memoryview(mapped)
    with pytest.raises(BufferError, match="2 exported views"):
        mapped.close()
    first.release()
    assert not mapped.closed and second[:64].tobytes() == data[:64]  # still mapped
    second.release()
    assert mapped.closed


def test_a_file_that_cannot_be_mapped_is_named_and_an_empty_one_has_no_bytes(tmp_path):
    missing = tmp_path / "7-1.rec"
    with pytest.raises(FileNotFoundError) as raised:
        _core.map_segment_file(missing)
    assert raised.value.filename == missing
    present = tmp_path / "7-3.rec"
    present.write_bytes(b"x" * 64)
    with pytest.raises(ValueError, match="embedded null byte"):
        _core.map_segment_file(f"{present}\0.old")  # not the file named before the null
    empty = tmp_path / "7-2.rec"
    empty.write_bytes(b"")
    with _core.map_segment_file(empty) as mapped:
        assert len(mapped) == 0 and memoryview(mapped).tobytes() == b""
    assert mapped.closed
    with pytest.raises(
        segments.SegmentError, match=re.escape(f"segment file {missing} is missing")
    ):
        segments.map_segment(missing)
    with pytest.raises(
        segments.SegmentError, match=re.escape(f"segment file {empty} is empty (0 bytes)")
    ):
        segments.map_segment(empty)


def test_mapping_and_unmapping_never_hand_the_gil_to_another_thread(segment_file):
    """Another thread that wants the GIL (it asks at once: a switch interval of a microsecond)
    gets it only where this one releases it: the calls between two marks run one after another
    in C (no bytecode, so no forced switch), and the other thread's marks fall between them only
    if a call released the GIL. Waiting for an event does (the check sees it); mapping and
    unmapping do not. (A call that released the GIL for a moment is seen whenever the other
    thread waits for it then: os.stat's release is seen that way on an idle machine.)"""
    marks: list[str] = []
    ran, stop = threading.Event(), threading.Event()

    def other() -> None:
        while not stop.is_set():
            marks.append("other")
            ran.set()
            time.sleep(0)

    def other_ran_during(*calls: tuple) -> bool:
        marks.clear()
        steps = [(marks.append, "start"), *calls, (marks.append, "end")]
        gc.disable()  # a collection could run finalizers (bytecode) between the marks
        try:
            deque(starmap(operator.call, steps), maxlen=0)  # each result dropped at once
        finally:
            gc.enable()
        return "other" in marks[marks.index("start") : marks.index("end")]

    premapped = [_core.map_segment_file(segment_file) for _ in range(100)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=other)
    thread.start()
    try:
        waits = [(ran.clear,), (ran.wait, 10)] * 2  # the second: set after a mark in the window
        assert other_ran_during(*waits)  # the GIL released: seen
        path = str(segment_file)  # a Path's __fspath__ is Python
        mapping = [(_core.map_segment_file, path)] * 1000  # each unmapped as it is dropped
        closing = [(operator.methodcaller("close"), mapped) for mapped in premapped]
        assert not other_ran_during(*mapping, *closing)
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        thread.join(10)
    assert not thread.is_alive() and all(mapped.closed for mapped in premapped)
