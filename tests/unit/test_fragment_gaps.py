"""A fragmented message that lost a fragment (an unreliable image filled the gap with PAD) is
dropped by both assemblers, never glued to another message's fragments; one not yet whole is
left for the next read."""

from types import SimpleNamespace

import numpy as np
import pytest

from aeronio import _core
from aeronio.errors import AeronError
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


# A message poll_messages (async for, batches()) began and could not finish waits in the reader's
# assembly, its first fragments consumed (flow control and the unblocker need the position to
# move on); every read of the image takes it first, whole, never its later fragments alone.

A = b"A1" * 16 + b"A2" * 16 + b"A3"


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


def a_then_c(tmp_path):
    """A (three fragments, 192 bytes) then C (one): a reader whose poll_messages(out, 1) took
    A's BEGIN into its assembly."""
    reader, term = image_of_frames(
        tmp_path,
        [
            frame(0, b"A1" * 16, BEGIN_FRAG_FLAG),
            frame(64, b"A2" * 16, 0),
            frame(128, b"A3", END_FRAG_FLAG),
            frame(192, b"C", BEGIN_FRAG_FLAG | END_FRAG_FLAG),
        ],
    )
    assert reader.poll_messages([], 1) == 1 and reader.position == 64
    return reader


def take_with(reader, read: str) -> list:
    """(data, flags, term offset, position) of what `read` of `reader` hands out, until none."""
    got = []

    def handler(buffer, header):
        got.append((bytes(buffer), header.flags, header.term_offset, header.position))

    for _ in range(4):
        if read == "views":
            subscription = _core.SubscriptionBase()
            subscription._set_images([SimpleNamespace(_reader=reader)])
            views = subscription.messages(copy=False)
            while views.ready():
                handler(views.take().data, views.take())
        elif read == "poll_messages":
            out = []
            reader.poll_messages(out, 10)
            for message in out:
                handler(message.data, message)
        else:
            getattr(reader, read)(handler, 10)
    return got


@pytest.mark.parametrize("read", ["poll", "controlled_poll", "views", "poll_messages"])
def test_a_message_the_fragment_limit_cut_is_the_next_reads_first_whole(tmp_path, read):
    """Before: the later fragments alone (poll), or nothing (views): A lost without a word."""
    reader = a_then_c(tmp_path)
    end_flags = 0xC0 if read in ("poll", "controlled_poll") else END_FRAG_FLAG
    assert take_with(reader, read) == [(A, end_flags, 128, 192), (b"C", 0xC0, 192, 256)]
    assert reader.position == 256


def test_an_abort_leaves_the_assembled_message_for_the_next_read(tmp_path):
    reader = a_then_c(tmp_path)
    assert reader.controlled_poll(lambda buffer, header: 1, 10) == 0  # ABORT
    assert reader.position == 128  # A's middle into the assembly, its END in the log
    out = []
    assert reader.poll_messages(out, 10) == 2
    assert [m.data for m in out] == [A, b"C"] and reader.position == 256


@pytest.mark.parametrize("read", ["poll", "controlled_poll"])
def test_a_poll_of_no_fragments_takes_nothing_assembled(tmp_path, read):
    reader = a_then_c(tmp_path)
    assert getattr(reader, read)(lambda *args: None, 0) == 0 and reader.position == 64


def test_a_bad_action_for_the_assembled_message_leaves_it_as_for_any_fragment(tmp_path):
    reader = a_then_c(tmp_path)
    with pytest.raises(ValueError, match="returned 'x', not a ControlledPollAction"):
        reader.controlled_poll(lambda buffer, header: "x", 10)
    assert reader.position == 128  # as ABORT leaves it: its END still in the log
    assert [data for data, *_ in take_with(reader, "poll")] == [A, b"C"]


@pytest.mark.parametrize("read", ["batch_poll", "block_poll"])
def test_batch_and_block_polls_refuse_while_a_message_is_assembled(tmp_path, read):
    reader = a_then_c(tmp_path)
    with pytest.raises(AeronError, match=f"{read} would hand out the log past the first"):
        getattr(reader, read)(lambda *args: None, 1024)
    got = []
    assert reader.poll(lambda buffer, header: got.append(bytes(buffer)), 1) == 1
    assert got == [A] and reader.position == 192
    assert getattr(reader, read)(lambda *args: None, 1024) > 0 and reader.position == 256  # C


@pytest.mark.parametrize("read", ["poll_messages", "views"])
def test_a_message_whose_rest_is_not_written_waits_in_the_assembly(tmp_path, read):
    """Its written fragments are consumed (a sender sends only so far past the subscriber
    position; the unblocker frees only past a BEGIN); the rest, once written, completes it."""
    reader, term = image_of_frames(
        tmp_path,
        [
            frame(0, b"X", BEGIN_FRAG_FLAG | END_FRAG_FLAG),
            frame(64, b"A1" * 16, BEGIN_FRAG_FLAG),
        ],
    )
    assert [data for data, *_ in take_with(reader, read)] == [b"X"]
    assert reader.position == 128  # past A's BEGIN
    assert reader.poll(lambda *args: None, 10) == 0 and reader.position == 128
    assert _core.term_rebuild_insert(term, 128, frame(128, b"A2", END_FRAG_FLAG))
    got = []
    assembler = _core.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
    assert reader.poll(assembler, 10) == 1
    assert got == [b"A1" * 16 + b"A2"] and reader.position == 192


def test_a_dead_writers_message_is_unblocked_past_its_begin(tmp_path):
    """A writer reserved three fragments, wrote the BEGIN and died; another wrote after it. The
    reader consumes the BEGIN, so the driver's unblocker pads the hole and the stream goes on
    (before this was fixed the other way round, the reader waited at the BEGIN forever)."""
    reader, term = image_of_frames(tmp_path, [frame(0, b"A1" * 16, BEGIN_FRAG_FLAG)])
    log = reader.log
    _core.AtomicBuffer(np.asarray(log.owner, dtype=np.uint8).reshape(-1)[-4096:]).put_int64_ordered(
        0, 192
    )  # the tail past the three reserved fragments
    limit = np.zeros(8, np.uint8)
    limit.view(np.int64)[0] = 1 << 40
    assert _core.LogAppender(log, limit, 0, exclusive=False).try_offer(b"two") > 0
    out = []
    assert reader.poll_messages(out, 10) == 1 and reader.position == 64
    assert _core.unblock_log(log, reader.position)
    reader.poll_messages(out, 10)
    assert [m.data for m in out] == [b"two"] and reader.position == 256
    # The PAD broke the message off: nothing is left to take first.
    assert _core.LogAppender(log, limit, 0, exclusive=False).try_offer(b"three") > 0
    blocks = []
    assert reader.block_poll(lambda block, *ids: blocks.append(bytes(block)), 1024) == 64
    assert blocks[0][32:37] == b"three"


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
        assert take_with(reader, read) == [] and reader.position == TERM, read
