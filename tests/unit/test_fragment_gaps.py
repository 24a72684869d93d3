"""A fragmented message that lost a fragment (an unreliable image filled the gap with PAD) is
dropped by both assemblers, never glued to another message's fragments; one not yet whole is
left for the next read."""

from types import SimpleNamespace

import numpy as np

from aeronio import _core
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import BEGIN_FRAG_FLAG, END_FRAG_FLAG, HDR_TYPE_PAD, data_header

TERM = 65536


def frame(offset: int, payload: bytes, flags: int, frame_type: int = 1) -> bytes:
    header = data_header(
        frame_length=32 + len(payload),
        term_offset=offset,
        session_id=5,
        stream_id=6,
        term_id=0,
        flags=flags,
        type=frame_type,
    ).encode()
    body = header + payload
    return body + bytes(-len(body) % 32)


def image_with_gap(tmp_path):
    """B(A) [lost middle of A, padded] E(A)  B(B) E(B)"""
    log = LogBuffers.create(
        tmp_path / "log", term_length=TERM, initial_term_id=0, session_id=5, stream_id=6, mtu=128
    )
    term = log.term(0)
    frames = [
        frame(0, b"A1" * 16, BEGIN_FRAG_FLAG),
        frame(64, b"\0" * 32, 0, HDR_TYPE_PAD),  # the lost middle fragment, gap-filled
        frame(128, b"A3", END_FRAG_FLAG),
        frame(192, b"B1" * 16, BEGIN_FRAG_FLAG),
        frame(256, b"B2", END_FRAG_FLAG),
    ]
    offset = 0
    for f in frames:
        assert _core.term_rebuild_insert(term, offset, f)
        offset += len(f)
    position = np.zeros(8, dtype=np.uint8)
    return _core.ImageReader(log.mapped, position, 0)


def test_poll_messages_drops_a_message_with_a_missing_fragment(tmp_path):
    out = []
    image_with_gap(tmp_path).poll_messages(out, 100)
    assert [m.data for m in out] == [b"B1" * 16 + b"B2"]


def test_fragment_assembler_drops_a_message_with_a_missing_fragment(tmp_path):
    got = []
    assembler = _core.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
    image_with_gap(tmp_path).poll(assembler, 100)
    assert got == [b"B1" * 16 + b"B2"]


# A message is read whole or not at all: poll_messages (async for, batches()) never keeps the
# first fragments of a message to itself, so every later read of any kind finds it from its
# BEGIN.


def image_of_frames(tmp_path, frames: list[bytes]):
    """(reader, term): an image whose term 0 holds `frames` from offset 0."""
    log = LogBuffers.create(
        tmp_path / "log", term_length=TERM, initial_term_id=0, session_id=5, stream_id=6, mtu=128
    )
    term = log.term(0)
    offset = 0
    for f in frames:
        assert _core.term_rebuild_insert(term, offset, f)
        offset += len(f)
    return _core.ImageReader(log.mapped, np.zeros(8, dtype=np.uint8), 0), term


def test_poll_messages_reads_a_message_whole_past_its_fragment_limit(tmp_path):
    reader, _ = image_of_frames(
        tmp_path,
        [
            frame(0, b"A1" * 16, BEGIN_FRAG_FLAG),
            frame(64, b"A2" * 16, 0),
            frame(128, b"A3", END_FRAG_FLAG),
            frame(192, b"C", BEGIN_FRAG_FLAG | END_FRAG_FLAG),
        ],
    )
    out = []
    assert reader.poll_messages(out, 1) == 3
    assert [m.data for m in out] == [b"A1" * 16 + b"A2" * 16 + b"A3"] and reader.position == 192
    assert out[0].position == 192 and out[0].term_offset == 128  # the END fragment's header
    assert reader.poll_messages(out, 1) == 1 and out[1].data == b"C" and reader.position == 256


def test_poll_messages_leaves_a_message_whose_rest_is_not_written(tmp_path):
    """Before: the BEGIN went into the reader's private assembly and the position past it; a
    later poll handed the END alone, which an assembler drops: the message lost."""
    reader, term = image_of_frames(
        tmp_path,
        [
            frame(0, b"X", BEGIN_FRAG_FLAG | END_FRAG_FLAG),
            frame(64, b"A1" * 16, BEGIN_FRAG_FLAG),
        ],
    )
    out = []
    assert reader.poll_messages(out, 10) == 1
    assert [m.data for m in out] == [b"X"] and reader.position == 64  # at A's BEGIN
    assert reader.poll_messages(out, 10) == 0 and reader.position == 64
    assert _core.term_rebuild_insert(term, 128, frame(128, b"A2", END_FRAG_FLAG))
    got = []
    assembler = _core.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
    assert reader.poll(assembler, 10) == 2
    assert got == [b"A1" * 16 + b"A2"] and reader.position == 192


def test_a_message_the_term_ends_without_an_end_of_is_consumed(tmp_path):
    """A BEGIN whose fragments run to the end of the term with no END (a message lies in one
    term: a sender broke it) is dropped, not waited for forever, by both whole-message reads."""
    frames = [
        frame(0, b"A1" * 16, BEGIN_FRAG_FLAG),
        frame(64, b"A2" * ((TERM - 64 - 32) // 2), 0),
    ]
    for read in ("poll_messages", "views"):
        (tmp_path / read).mkdir()
        reader, _ = image_of_frames(tmp_path / read, frames)
        if read == "poll_messages":
            out = []
            reader.poll_messages(out, 10)
            assert out == []
        else:
            subscription = _core.SubscriptionBase()
            subscription._set_images([SimpleNamespace(_reader=reader)])
            assert not subscription.messages(copy=False).ready()
        assert reader.position == TERM, read
