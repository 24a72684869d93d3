"""A fragmented message that lost a fragment (an unreliable image filled the gap with PAD) is
dropped by both assemblers, never glued to another message's fragments."""

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
